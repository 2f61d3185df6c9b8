"""The bisect search (search.Hunt) over seeded random scenarios: a line of 2-64 commits,
one or two slow commits of 5-80%, noise of 1-5% a run, a machine that drifts by up to 4%
per benchmark invocation either way. The benchmark is a model: each run reads the level of
the commit times the drift so far times lognormal noise.

Properties, over every scenario (each counted; the suite holds them to the rates below):
  named      every resolvable slow commit is named (with its size, within the noise)
  harmless   no commit that changed nothing is named
A slow commit is resolvable when it is past the verdict's threshold with room to spare
(12%), at least three times the drift per invocation, and the noise leaves it three
standard errors at max_repeat runs; the drop of both together must be so too. Slow commits
below that may be named or missed, never replaced by a harmless one.

Two slow commits in one line get a generator of their own (`draw_two`): equal or unequal
sizes, adjacent or apart, anywhere on the line, with the same noise and drift. There the
commit before the second slow one, or before the first, was judged like good early, under a
drift not yet known, and a harmless commit was named in its place; and a search from the
first slow commit, with fewer runs at its good state, ended undecided where the default
threshold could call nothing like it on a noisy machine.

More seeds on demand, with the pass counts printed (--two: the two-slow-commit draw):
    PYTHONPATH=. python tests/unit/bisect/test_bisect_scenarios.py --seeds 2000
"""
from __future__ import annotations

import argparse
import math
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass

from envsnap.bisect.search import Hunt, HuntResult
from envsnap.verdicts import FOUND

SUITE_SEEDS = range(120)
TWO_SEEDS = range(600)
REPEAT, MAX_REPEAT = 3, 20


@dataclass(frozen=True)
class Scenario:
    size: int                              # commits on the line
    slow: tuple[tuple[int, float], ...]    # (position, change): -0.25 is a quarter slower
    sigma: float                           # noise of one run, on the log
    rate: float                            # drift of log(metric) per invocation
    lower_is_better: bool

    def level(self, position: int) -> float:
        value = 1000.0
        for at, change in self.slow:
            if position >= at:
                value = value / (1 + change) if self.lower_is_better else value * (1 + change)
        return value

    def resolvable(self, change: float) -> bool:
        size = abs(math.log1p(change))
        return size >= 0.12 and size >= 3 * abs(self.rate) and size >= 3 * self.sigma


def draw(seed: int) -> Scenario:
    rng = random.Random(seed)
    size = rng.randint(2, 64)
    count = 1 if size < 3 else rng.choice((1, 2))
    positions = sorted(rng.sample(range(1, size + 1), count))
    slow = tuple((at, -rng.uniform(0.05, 0.8)) for at in positions)
    return Scenario(size, slow, rng.uniform(0.01, 0.05), rng.uniform(-0.04, 0.04),
                    rng.random() < 0.25)


def draw_two(seed: int) -> Scenario:
    """Two slow commits on a line as long as `draw` makes it, of sizes as it draws them:
    equal in size a third of the time, next to each other a third of the time, else
    anywhere apart."""
    rng = random.Random(seed)
    size = rng.randint(2, 64)
    if rng.random() < 1 / 3:
        first = rng.randint(1, size - 1)
        positions = (first, first + 1)
    else:
        low, high = sorted(rng.sample(range(1, size + 1), 2))
        positions = (low, high)
    sizes = [-rng.uniform(0.05, 0.8)] * 2 if rng.random() < 1 / 3 else \
        [-rng.uniform(0.05, 0.8), -rng.uniform(0.05, 0.8)]
    slow = tuple(zip(positions, sizes))
    return Scenario(size, slow, rng.uniform(0.01, 0.05), rng.uniform(-0.04, 0.04),
                    rng.random() < 0.25)


def hunt(scenario: Scenario, seed: int) -> HuntResult:
    rng = random.Random(seed * 7919 + 1)
    clock = [0]

    def measure(position: int, count: int, role: str) -> list[float]:
        at = clock[0]
        clock[0] += 1
        return [scenario.level(position) * math.exp(scenario.rate * at
                                                    + rng.gauss(0, scenario.sigma))
                for _ in range(count)]

    return Hunt(scenario.size, measure, repeat=REPEAT, max_repeat=MAX_REPEAT,
                lower_is_better=scenario.lower_is_better).run()


def judge(seed: int, drawn: Callable[[int], Scenario] = draw) -> tuple[bool | None, bool, str]:
    """(named: None when nothing was resolvable, harmless, what happened)."""
    scenario = drawn(seed)
    result = hunt(scenario, seed)
    named = {culprit.position: culprit for culprit in result.culprits}
    slow = dict(scenario.slow)
    harmless = all(position in slow for position in named)
    total = math.prod(1 + change for change in slow.values()) - 1
    must = [at for at, change in scenario.slow if scenario.resolvable(change)]
    if not must or not scenario.resolvable(total):
        found: bool | None = None
    else:
        found = result.outcome == FOUND and all(
            at in named and sized_right(named[at].change, slow[at], scenario) for at in must)
    told = (f"seed {seed}: {scenario}: {result.outcome}, named "
            f"{[(c.position, round(c.change, 3)) for c in result.culprits]}, drift "
            f"{result.drift.rate:+.3f}")
    return found, harmless, told


def sized_right(measured: float, planted: float, scenario: Scenario) -> bool:
    """Within a third of the planted change on the log (a size found from the slow commit
    before it, when two compound)."""
    if scenario.lower_is_better:
        planted = 1 / (1 + planted) - 1
    return abs(math.log1p(measured) - math.log1p(planted)) <= abs(math.log1p(planted)) / 3


def tally(seeds: range, drawn: Callable[[int], Scenario] = draw
          ) -> tuple[int, int, int, int, list[str]]:
    named = resolvable = harmless = 0
    failures = []
    for seed in seeds:
        found, clean, told = judge(seed, drawn)
        if found is not None:
            resolvable += 1
            named += found
        harmless += clean
        if found is False or not clean:
            failures.append(told)
    return named, resolvable, harmless, len(seeds), failures


# Below what the search reaches over a thousand seeds (`--seeds 1000` prints it): noise near
# the top of the range, or a slow commit just below the threshold, sometimes leaves a step
# judged on the wrong side.
NAMED_AT_LEAST = 0.95
HARMLESS_AT_LEAST = 0.97


def test_resolvable_slow_commits_are_named_and_harmless_ones_never() -> None:
    named, resolvable, harmless, total, failures = tally(SUITE_SEEDS)
    assert resolvable >= len(SUITE_SEEDS) * 0.8       # the draw keeps most scenarios resolvable
    assert harmless >= total * HARMLESS_AT_LEAST, failures
    assert named >= resolvable * NAMED_AT_LEAST, failures


# Two slow commits, over TWO_SEEDS: a harmless commit named in place of a slow one is the
# defect these draws caught; a resolvable one left undecided is the
# noise near the top of its range with a slow commit below the threshold beside it.
TWO_NAMED_AT_LEAST = 0.975
TWO_HARMLESS_AT_LEAST = 0.995


def test_two_slow_commits_in_one_line_are_both_named_with_their_sizes() -> None:
    named, resolvable, harmless, total, failures = tally(TWO_SEEDS, draw_two)
    assert resolvable >= len(TWO_SEEDS) * 0.7
    assert harmless >= total * TWO_HARMLESS_AT_LEAST, failures
    assert named >= resolvable * TWO_NAMED_AT_LEAST, failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=len(SUITE_SEEDS))
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--two", action="store_true", help="two slow commits in every line")
    args = parser.parse_args()
    named, resolvable, harmless, total, failures = tally(
        range(args.first, args.first + args.seeds), draw_two if args.two else draw)
    lines = [f"scenarios: {total}",
             f"resolvable slow commits all named, with their sizes: {named} of {resolvable}",
             f"no harmless commit named: {harmless} of {total}",
             *(f"  {line}" for line in failures)]
    sys.stdout.write("".join(line + "\n" for line in lines))
    return 0 if named >= resolvable * NAMED_AT_LEAST and harmless >= total * HARMLESS_AT_LEAST \
        else 1


if __name__ == "__main__":
    sys.exit(main())
