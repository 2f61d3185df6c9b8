"""`envsnap demo` end to end, against its budget of 60 s on a 2-core machine.

The demo is the README's first command, so its wall time is what a new user waits. Prints
the median of a few runs and its share of the budget (target: under 1.0).

Usage: python3 bench/bench_demo.py [--repeat 3]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import ledger

BUDGET_S = 60.0
ROOT = Path(__file__).resolve().parent.parent


def one_run() -> float:
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "envsnap", "demo"], capture_output=True,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"demo failed:\n{result.stdout[-2000:]}{result.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    times = [one_run() for _ in range(parser.parse_args().repeat)]
    median = statistics.median(times)
    print(f"envsnap demo: median {median:.1f} s (min {min(times):.1f}, max {max(times):.1f})")
    print(f"ratio demo / 60 s budget: {median / BUDGET_S:.2f}  (target < 1.0)")
    ledger.record(__file__, "demo / budget", median / BUDGET_S, "x",
                  f"the budget, {BUDGET_S:g} s (demo {median:.1f} s)", "< 1.0")


if __name__ == "__main__":
    main()
