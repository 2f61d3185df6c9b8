"""How many benchmark invocations `envsnap bisect` needs over 64 commits: a clean signal, a
machine that drifts, and two slow commits.

A synthetic checkout: a good commit, then 64 commits, one of which (commit K) drops the
benchmark's speed from 94 to 60 (the benchmark reads speed.txt in the checkout, +-2% noise).
Both ends are captured as snapshots, then `bisect` (the library, on `local`) runs for several
K. Counted: benchmark invocations beyond the two endpoints' first (one invocation = --repeat
runs of the command), against log2(64) = 6 (what any halving needs) and 63 (a linear scan).
Target: at most 8 at the steps.

Then the same with a machine that slows down by 1% a run (3% an invocation of 3 runs: the
ends are measured again during the search and the drift taken out), and with two slow
commits (94 -> 70 at K1, 70 -> 49 at K2: both must be named, the second found from the
first). Counted for each: invocations at the steps, and the ends measured again.

Usage: PYTHONPATH=. python3 bench/bench_bisect.py [--commits 64] [--repeat 3] [--at 1,17,...]
       [--drift-at 9,40] [--pairs 5:40,30:31]
"""
from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import ledger

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from envsnap.bench.run import BenchSpec  # noqa: E402
from envsnap.bisect.run import BisectOptions, bisect  # noqa: E402
from envsnap.defaults import DEFAULT_BISECT_REPEAT  # noqa: E402
from envsnap.hosts.capture import CaptureOptions, capture  # noqa: E402
from envsnap.hosts.inventory import Inventory, parse_host_spec, with_vars  # noqa: E402
from envsnap.snapshot.store import Store  # noqa: E402

TARGET = 8
BENCH = """\
import os, pathlib, random, sys
drift = float(sys.argv[1]) if len(sys.argv) > 1 else 0.0   # change per run, all commits alike
counter = pathlib.Path(os.environ["HOME"]) / "runs-so-far"
runs = int(counter.read_text()) if counter.exists() else 0
counter.write_text(str(runs + 1))
speed = float(pathlib.Path("speed.txt").read_text()) * (1 + drift) ** runs
print("gen throughput (token/s): %.2f" % (speed * random.uniform(0.98, 1.02)))
"""
SLOW, SLOWER = "Slow down", "Slow down again"
METRIC = r"token/s\): ([0-9.]+)"


def git(repo: Path, *args: str) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="bench@example.com",
               GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="bench@example.com")
    return subprocess.run(["git", "-C", str(repo), *args], env=env, check=True,
                          capture_output=True, text=True).stdout.strip()


def commit(repo: Path, message: str, speed: str, number: int) -> None:
    (repo / "speed.txt").write_text(speed + "\n")
    (repo / f"module_{number}.py").write_text(f"N = {number}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


def make_case(root: Path, commits: int, slow_at: tuple[int, ...]) -> tuple[Store, Path]:
    """The checkout, and a store holding `good` (before the commits) and `bad` (after):
    94 before slow_at[0], 60 from it; with two, 70 from the first and 49 from the second."""
    repo = root / "repo"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    commit(repo, "Initial", "94", 0)
    store = Store(root / "store")
    host = with_vars(parse_host_spec("local"), {"repos": [str(repo)]})
    capture([host], store, CaptureOptions(label="good"))
    levels = ("60",) if len(slow_at) == 1 else ("70", "49")
    for number in range(1, commits + 1):
        passed = sum(number >= at for at in slow_at)
        speed = levels[passed - 1] if passed else "94"
        subject = (SLOW if number == slow_at[0] else SLOWER if number in slow_at[1:]
                   else f"Change {number}")
        commit(repo, subject, speed, number)
    capture([host], store, CaptureOptions(label="bad"))
    return store, repo


class Case(NamedTuple):
    steps: int
    ends: int
    again: int
    runs: int
    found: bool
    drift: float
    seconds: float


def run_case(root: Path, commits: int, slow_at: tuple[int, ...], repeat: int, script: Path,
             drift: float = 0.0) -> Case:
    store, repo = make_case(root, commits, slow_at)
    (Path(os.environ["HOME"]) / "runs-so-far").unlink(missing_ok=True)
    spec = BenchSpec(cmd=f"{sys.executable} {script} {drift}", metric=METRIC, repeat=repeat,
                     cwd=str(repo), sample_interval=None)
    started = time.monotonic()
    report = bisect(store, Inventory(None), "good", "bad", "local", None, spec, BisectOptions())
    seconds = time.monotonic() - started
    named = [slow.commit.subject for slow in report.culprits]
    wanted = [SLOW] if len(slow_at) == 1 else [SLOW, SLOWER]
    return Case(report.step_invocations, report.endpoint_invocations, report.remeasures,
                report.runs, named == wanted, report.drift.rate, seconds)


HEAD = f"{'K':>7}  {'steps':>5}  {'ends':>4}  {'again':>5}  {'runs':>4}  {'found':>5}  " \
       f"{'drift':>6}  seconds"


def row(name: str, case: Case) -> str:
    return (f"{name:>7}  {case.steps:>5}  {case.ends:>4}  {case.again:>5}  {case.runs:>4}  "
            f"{str(case.found):>5}  {case.drift:>+6.1%}  {case.seconds:.1f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=DEFAULT_BISECT_REPEAT,
                        help="runs per commit to start with (bisect's own default)")
    parser.add_argument("--at", default="1,17,32,33,50,64",
                        help="commits that bring the regression, comma-separated")
    parser.add_argument("--drift-at", default="9,40",
                        help="the same on a machine losing 1%% a run, comma-separated")
    parser.add_argument("--pairs", default="5:40,30:31",
                        help="two slow commits K1:K2, comma-separated")
    args = parser.parse_args()
    log2 = math.log2(args.commits)
    with tempfile.TemporaryDirectory(prefix="bench-bisect-") as folder:
        os.environ["HOME"] = folder          # the host lock and caches stay in here
        script = Path(folder) / "bench_speed.py"
        script.write_text(BENCH)
        groups: dict[str, list[Case]] = {"clean": [], "drift": [], "two": []}
        print(HEAD)
        for number, slow_at in enumerate(int(k) for k in args.at.split(",")):
            case = run_case(Path(folder) / f"k{number}", args.commits, (slow_at,),
                            args.repeat, script)
            groups["clean"].append(case)
            print(row(str(slow_at), case))
        for number, slow_at in enumerate(int(k) for k in args.drift_at.split(",")):
            case = run_case(Path(folder) / f"d{number}", args.commits, (slow_at,),
                            args.repeat, script, drift=-0.01)
            groups["drift"].append(case)
            print(row(f"{slow_at} d", case))
        for number, pair in enumerate(args.pairs.split(",")):
            first, second = (int(k) for k in pair.split(":"))
            case = run_case(Path(folder) / f"p{number}", args.commits, (first, second),
                            args.repeat, script)
            groups["two"].append(case)
            print(row(pair, case))
    worst = max(case.steps for case in groups["clean"])
    print(f"benchmark invocations at the steps, clean signal: at most {worst} "
          f"(log2({args.commits}) = {log2:g}; a linear scan: {args.commits - 1}; "
          f"target <= {TARGET}): {'ok' if worst <= TARGET else 'OVER TARGET'}")
    ledger.record(__file__, f"invocations beyond the endpoints ({args.commits} commits)", worst,
                  "count", f"halving log2({args.commits}) = {log2:g}; a linear scan "
                  f"{args.commits - 1}", f"<= {TARGET}")
    found = all(case.found for cases in groups.values() for case in cases)
    for name, said in (("drift", "machine losing 3% an invocation"),
                       ("two", "two slow commits")):
        cases = groups[name]
        if not cases:
            continue
        steps = max(case.steps for case in cases)
        again = max(case.again for case in cases)
        print(f"{said}: at most {steps} invocations at the steps and {again} at the ends "
              f"again; all named: {all(case.found for case in cases)}")
        ledger.record(__file__, f"invocations at the steps, {said} ({args.commits} commits)",
                      steps, "count", f"clean signal {worst}", "-")
        ledger.record(__file__, f"ends measured again, {said} ({args.commits} commits)",
                      again, "count", "-", "-")
    return 0 if worst <= TARGET and found else 1


if __name__ == "__main__":
    sys.exit(main())
