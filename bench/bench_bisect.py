"""How many benchmark invocations `envsnap bisect` needs over 64 commits with a clean signal.

A synthetic checkout: a good commit, then 64 commits, one of which (commit K) drops the
benchmark's speed from 94 to 60 (the benchmark reads speed.txt in the checkout, +-2% noise).
Both ends are captured as snapshots, then `bisect` (the library, on `local`) runs for several
K. Counted: benchmark invocations beyond the two endpoints' (one invocation = --repeat runs
of the command), against log2(64) = 6 (what any halving needs) and 63 (a linear scan).
Target: at most 8.

Usage: PYTHONPATH=. python3 bench/bench_bisect.py [--commits 64] [--repeat 3] [--at 1,17,...]
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
import pathlib, random
speed = float(pathlib.Path("speed.txt").read_text())
print("gen throughput (token/s): %.2f" % (speed * random.uniform(0.98, 1.02)))
"""
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


def make_case(root: Path, commits: int, slow_at: int) -> tuple[Store, Path]:
    """The checkout, and a store holding `good` (before the commits) and `bad` (after)."""
    repo = root / "repo"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    commit(repo, "Initial", "94", 0)
    store = Store(root / "store")
    host = with_vars(parse_host_spec("local"), {"repos": [str(repo)]})
    capture([host], store, CaptureOptions(label="good"))
    for number in range(1, commits + 1):
        speed = "60" if number >= slow_at else "94"
        commit(repo, "Slow down" if number == slow_at else f"Change {number}", speed, number)
    capture([host], store, CaptureOptions(label="bad"))
    return store, repo


def run_case(root: Path, commits: int, slow_at: int, repeat: int, script: Path) -> tuple:
    store, repo = make_case(root, commits, slow_at)
    spec = BenchSpec(cmd=f"{sys.executable} {script}", metric=METRIC, repeat=repeat,
                     cwd=str(repo), sample_interval=None)
    started = time.monotonic()
    report = bisect(store, Inventory(None), "good", "bad", "local", None, spec, BisectOptions())
    seconds = time.monotonic() - started
    found = report.first_bad is not None and report.first_bad.subject == "Slow down"
    return report.step_invocations, report.endpoint_invocations, report.runs, found, seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=DEFAULT_BISECT_REPEAT,
                        help="runs per commit to start with (bisect's own default)")
    parser.add_argument("--at", default="1,17,32,33,50,64",
                        help="commits that bring the regression, comma-separated")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-bisect-") as folder:
        os.environ["HOME"] = folder          # the host lock and caches stay in here
        script = Path(folder) / "bench_speed.py"
        script.write_text(BENCH)
        worst = 0
        print(f"{'K':>4}  {'steps':>5}  {'endpoints':>9}  {'runs':>5}  {'found':>5}  seconds")
        for slow_at in (int(k) for k in args.at.split(",")):
            steps, ends, runs, found, seconds = run_case(Path(folder) / f"k{slow_at}", args.commits,
                                                   slow_at, args.repeat, script)
            worst = max(worst, steps)
            print(f"{slow_at:>4}  {steps:>5}  {ends:>9}  {runs:>5}  {str(found):>5}  "
                  f"{seconds:.1f}")
    log2 = math.log2(args.commits)
    print(f"benchmark invocations beyond the endpoints: at most {worst} "
          f"(log2({args.commits}) = {log2:g}; a linear scan: {args.commits - 1}; "
          f"target <= {TARGET}): {'ok' if worst <= TARGET else 'OVER TARGET'}")
    ledger.record(__file__, f"invocations beyond the endpoints ({args.commits} commits)", worst,
                  "count", f"halving log2({args.commits}) = {log2:g}; a linear scan "
                  f"{args.commits - 1}", f"<= {TARGET}")
    return 0 if worst <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
