"""Randomized regressions, each built for real (tests/helpers/explainscenario.py), explained
and bisected through the real CLI; what must hold of every answer, whatever the seed:

- explain ends with no regression or a regression explained (never a host failure such as
  a put-back that failed, never an internal error);
- the checkout is left as found (HEAD, branch, index, status, stashes, every file's content
  but the benchmark's own results.json and __pycache__/), the venv's .pth files and package
  too;
- every resolvable cause is named in a `cause:` line (a pair that only slows together in a
  `cause, only together:` line), with its size within the tolerance (size_slack);
- a commit range that is a cause: each resolvable slow commit named (`first bad commit:`,
  `next slow commit:`);
- no harmless difference in a cause line; `no effect:` never said of a resolvable cause;
- two causes or more, all resolvable: a `together ...: the whole drop` line, of the right size;
- bisect: each resolvable slow commit named so, no harmless one, the checkout
  as found.

The suite runs the fixed SEEDS and BISECT_SEEDS; more on demand, each property's pass count
printed (--first picks the first seed, --bisect bisect's scenarios):
    python tests/e2e/test_scenarios_for_real.py --seeds N
"""
from __future__ import annotations

import argparse
import math
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

if __name__ == "__main__":   # run as a script: the suite's helpers as pytest finds them
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pytest
from conftest import Cli, cli_env
from helpers.explainscenario import (
    METRIC,
    REPEAT,
    Built,
    Factor,
    Scenario,
    SlowCommit,
    build,
    draw,
    draw_bisect,
    fingerprint,
    python_state,
)

from envsnap.errors import ExitCode

# Picked to hold, within a minute on two busy cores: unequal causes (a commit and an env
# variable) with drift; an interaction of the pulled code with an env variable, with drift;
# two slow commits among a pull of four, with an env cause beside them. Bisect: one slow
# commit with drift; two slow commits, the first at the pull's first commit, with drift.
SEEDS = (17, 32, 36)
BISECT_SEEDS = (8, 13)
ANSWERED = (ExitCode.OK, ExitCode.DRIFT)   # no regression; a regression, explained
NUMBER = r"([0-9.]+(?:e[+-]?[0-9]+)?)"
CHANGE = rf"{NUMBER} -> {NUMBER} \(([+-]?[0-9.]+)%\)"
CAUSE = re.compile(rf"^cause: (?P<what>.+), alone {CHANGE}")
ONLY_TOGETHER = re.compile(rf"^cause, only together: (?P<what>.+), together {CHANGE}")
TOGETHER = re.compile(rf"^together {CHANGE}: (?P<rest>.*)$")
NO_EFFECT = "no effect: "
# The lines that name a slow commit: the first, and each one found after it.
SLOW_COMMIT = ("first bad commit: ", "next slow commit: ")
WIDE = "1000"   # COLUMNS: each line of the answer whole, as written before the fold


# The rounding of the printed figures, on the log of a ratio.
ROUNDING = 0.02


def size_slack(scenario: Scenario) -> float:
    """How far a measured change may be from the planted one, on the log of the ratio: each
    end's noise (a median of runs within +/- noise: twice the noise), the drift of up to
    three invocations between a trial and the endpoint runs it is sized against (drift that
    explain re-measures and corrects for leaves less), and ROUNDING."""
    return 2 * scenario.noise + 3 * abs(scenario.drift) + ROUNDING


def size_right(scenario: Scenario, percent: str, planted: float) -> bool:
    """`percent` as printed (a sign and digits), against the planted share of the metric
    taken."""
    measured = 1 + float(percent) / 100
    rounding = 0.005 / max(measured, 1e-9)
    return measured > 0 and \
        abs(math.log(measured) - math.log(1 - planted)) <= size_slack(scenario) + rounding


@dataclass(frozen=True)
class Outcome:
    seed: int
    code: int
    out: str
    checks: dict[str, bool | None]    # None: the property does not apply to this seed


def environment(root: Path) -> dict[str, str]:
    env = cli_env(root)
    env["COLUMNS"] = WIDE
    return env


class Runner:
    """envsnap through its real CLI (in this process, as the `cli` fixture), each call with
    the env it is given: GOOD's or BAD's variables."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def __call__(self, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
        return Cli(env=env, cwd=self.root)(*args, timeout=600)


def lines_of(out: str) -> list[str]:
    return [line.rstrip() for line in out.splitlines()]


def named(built: Built, line: str, factor: Factor) -> bool:
    return built.describe(factor) in line


def explain_checks(built: Built, code: int, out: str, as_found: bool) -> dict[str, bool | None]:
    scenario = built.scenario
    lines = lines_of(out)
    causes = [(m, line) for line in lines if (m := CAUSE.match(line))]
    pairs = [(m, line) for line in lines if (m := ONLY_TOGETHER.match(line))]
    no_effect = [line for line in lines if line.startswith(NO_EFFECT)]
    resolvable = [f for f in scenario.causes() if scenario.resolvable(f.size)]
    interaction = scenario.interaction
    pair_parts = [built.by_flag(interaction.first), built.by_flag(interaction.second)] \
        if interaction is not None else []
    pair_resolvable = interaction is not None and scenario.resolvable(interaction.size)
    checks: dict[str, bool | None] = {"exit 0 or 1": code in ANSWERED, "left as found": as_found}

    found_all, sizes = True, []
    for factor in resolvable:
        match = next((m for m, line in causes if named(built, line, factor)), None)
        found_all &= match is not None
        if match is not None:
            sizes.append(size_right(scenario, match.group(4), factor.size))
    if pair_resolvable and interaction is not None:
        match = next((m for m, line in pairs
                      if all(named(built, line, part) for part in pair_parts)), None)
        found_all &= match is not None
        if match is not None:
            sizes.append(size_right(scenario, match.group(4), interaction.size))
    applies = bool(resolvable) or pair_resolvable
    checks["every resolvable cause named"] = found_all if applies else None
    checks["its size right"] = all(sizes) if sizes else None

    commits = scenario.factors[0]
    culprits = [slow for slow in scenario.slow_commits if scenario.resolvable(slow.size)]
    if commits in resolvable and culprits and scenario.pulled > 1:
        checks["culprit commit named"] = commits_named(built, lines, culprits)
    else:
        checks["culprit commit named"] = None

    harmless = scenario.harmless()
    checks["no harmless difference a cause"] = not any(
        named(built, line, factor) for factor in harmless
        for _, line in [*causes, *pairs])
    kept_quiet = resolvable + (pair_parts if pair_resolvable else [])
    checks["no effect never of a resolvable cause"] = not any(
        named(built, line, factor) for factor in kept_quiet for line in no_effect)

    count = len(scenario.causes()) + (interaction is not None)
    everything = all(scenario.resolvable(f.size) for f in scenario.causes()) and \
        (interaction is None or pair_resolvable)
    if count >= 2 and everything:
        whole = [m for line in lines if (m := TOGETHER.match(line))
                 and m.group("rest") == "the whole drop"]
        checks["the drop accounted for"] = bool(whole) and size_right(
            scenario, whole[0].group(3), scenario.total())
    else:
        checks["the drop accounted for"] = None
    return checks


def run_explain(seed: int, root: Path, packages: bool = True,
                extra: tuple[str, ...] = ()) -> Outcome:
    scenario = draw(seed, packages)
    run = Runner(root)
    built = build(scenario, root / "scenario", run, environment(root))
    before, python_before = fingerprint(built.checkout), python_state(built)
    result = run(built.env, "explain", "good", "bad", "--yes", *built.explain_args(), *extra)
    as_found = fingerprint(built.checkout) == before and python_state(built) == python_before
    out = result.stdout + "\n" + result.stderr
    return Outcome(seed, result.returncode, out,
                   explain_checks(built, result.returncode, result.stdout, as_found))


def slow_commit_lines(lines: list[str]) -> list[str]:
    return [line for line in lines if any(name in line for name in SLOW_COMMIT)]


def commits_named(built: Built, lines: list[str], culprits: list[SlowCommit]) -> bool:
    """Each of `culprits` in a line that names a slow commit, and no harmless commit so."""
    said = slow_commit_lines(lines)
    slow = {s.position for s in built.scenario.slow_commits}
    named_all = all(any(built.pulled[s.position][:12] in line for line in said)
                    for s in culprits)
    return named_all and not any(built.pulled[p][:12] in line for line in said
                                 for p in range(built.scenario.pulled) if p not in slow)


def bisect_checks(built: Built, code: int, out: str, as_found: bool) -> dict[str, bool | None]:
    scenario = built.scenario
    lines = slow_commit_lines(lines_of(out))
    slow = {s.position for s in scenario.slow_commits}
    culprits = [s for s in scenario.slow_commits if scenario.resolvable(s.size)]
    return {
        "exit 0 or 1": code in ANSWERED,
        "left as found": as_found,
        "culprit commit named": all(any(built.pulled[s.position][:12] in line for line in lines)
                                    for s in culprits) if culprits else None,
        "no harmless commit named": not any(
            built.pulled[p][:12] in line for line in lines
            for p in range(scenario.pulled) if p not in slow),
    }


def run_bisect(seed: int, root: Path, extra: tuple[str, ...] = ()) -> Outcome:
    scenario = draw_bisect(seed)
    run = Runner(root)
    built = build(scenario, root / "scenario", run, environment(root))
    before = fingerprint(built.checkout)
    result = run(built.env, "bisect", "good", "bad", "--cmd", built.cmd, "--metric", METRIC,
                 "--repeat", str(REPEAT), "--cwd", str(built.checkout.path), *extra)
    as_found = fingerprint(built.checkout) == before
    return Outcome(seed, result.returncode, result.stdout + "\n" + result.stderr,
                   bisect_checks(built, result.returncode, result.stdout, as_found))


def failed(outcome: Outcome) -> list[str]:
    return [name for name, passed in outcome.checks.items() if passed is False]


@pytest.mark.parametrize("seed", SEEDS)
def test_explain_scenario(seed: int, tmp_path: Path) -> None:
    outcome = run_explain(seed, tmp_path)
    assert not failed(outcome), f"{draw(seed)}\n{failed(outcome)}\n{outcome.out}"


@pytest.mark.parametrize("seed", BISECT_SEEDS)
def test_bisect_scenario(seed: int, tmp_path: Path) -> None:
    outcome = run_bisect(seed, tmp_path)
    assert not failed(outcome), f"{draw_bisect(seed)}\n{failed(outcome)}\n{outcome.out}"


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description="explain (or bisect) on seeded scenarios: "
                                     "each property's pass count")
    parser.add_argument("--seeds", type=int, default=len(SEEDS))
    parser.add_argument("--first", type=int, default=0, help="the first seed")
    parser.add_argument("--bisect", action="store_true", help="bisect's scenarios")
    parser.add_argument("--no-packages", action="store_true", help="draw no package cause")
    parser.add_argument("--verbose", action="store_true", help="each seed's failures")
    parser.add_argument("--with", dest="extra", action="append", default=[], metavar="ARG",
                        help="one more argument to explain or bisect (--with=--keep-untracked)")
    args = parser.parse_args()
    passed: Counter[str] = Counter()
    applied: Counter[str] = Counter()
    started = time.monotonic()
    for seed in range(args.first, args.first + args.seeds):
        with tempfile.TemporaryDirectory(prefix=f"scenario-{seed}-") as folder:
            began = time.monotonic()
            extra = tuple(args.extra)
            outcome = run_bisect(seed, Path(folder), extra) if args.bisect else \
                run_explain(seed, Path(folder), not args.no_packages, extra)
        for name, result in outcome.checks.items():
            if result is not None:
                applied[name] += 1
                passed[name] += bool(result)
        say(f"seed {seed}: exit {outcome.code}, {time.monotonic() - began:.1f}s"
            + (f", failed: {', '.join(failed(outcome))}" if failed(outcome) else ""))
        if args.verbose and failed(outcome):
            scenario = draw_bisect(seed) if args.bisect else draw(seed, not args.no_packages)
            say(f"  {scenario}\n" + "\n".join("  | " + line
                                              for line in outcome.out.splitlines()))
    say(f"{args.seeds} scenarios in {time.monotonic() - started:.0f}s")
    for name in applied:
        say(f"  {name}: {passed[name]} of {applied[name]}")


if __name__ == "__main__":
    main()
