"""How many benchmark invocations `explain`'s search uses, against its bound, and how often
it names the right causes, on a synthetic benchmark with planted causes and noise.

n differences, k of them planted: one cause, two independent causes, two that only slow it
down together (an interaction), or none. A state with a cause applied runs at 61 tok/s,
otherwise 94 (STORY's EAGLE-3 drop); every run is that times lognormal noise (--sigma), and
one invocation is --repeat runs, as `envsnap explain --repeat 3` makes. For each case and n
(4..64), --seeds draws of the planted positions and the noise. Printed: invocations used
(mean, max) against the bound the command prints before a run (worst_case_invocations:
2*k*ceil(log2 n) + k + 2, the +k being one check per cause for more causes) and the issue's
2*k*ceil(log2 n) + 2; how often the answer was right (the planted causes exactly, nothing
unexplained; "no regression" for none), honestly undecided (outcome "can't tell", or a
right answer with some differences left unexplained), or wrong.

Usage: PYTHONPATH=. python3 bench/bench_explain.py [--seeds 200] [--sigma 0.03] [--repeat 3]
"""
from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import ledger

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from envsnap.explain.search import (  # noqa: E402
    Explanation,
    Measure,
    explain,
    worst_case_invocations,
)

GOOD_SPEED, BAD_SPEED = 94.0, 61.0
SIZES = (4, 8, 16, 32, 64)
CASES = ("one", "two independent", "two interacting", "none")


@dataclass
class Row:
    case: str
    n: int
    k: int
    used: list[int]
    right: int = 0
    undecided: int = 0
    wrong: int = 0


def plant(case: str, n: int, rng: random.Random) -> list[frozenset[int]]:
    if case == "none":
        return []
    if case == "one":
        return [frozenset({rng.randrange(n)})]
    first, second = rng.sample(range(n), 2)
    if case == "two interacting":
        return [frozenset({first, second})]
    return [frozenset({first}), frozenset({second})]


def benchmark(causes: list[frozenset[int]], rng: random.Random, sigma: float,
              repeat: int) -> Measure:
    def measure(applied: frozenset[int]) -> list[float]:
        slow = any(cause <= applied for cause in causes)
        speed = BAD_SPEED if slow else GOOD_SPEED
        return [speed * rng.lognormvariate(0, sigma) for _ in range(repeat)]
    return measure


def judge(result: Explanation, causes: list[frozenset[int]]) -> str:
    expected = "found" if causes else "no regression"
    named = sorted(map(sorted, result.causes))
    if result.outcome == expected and named == sorted(map(sorted, causes)):
        return "right" if not result.unexplained else "undecided"
    if result.outcome == "can't tell" or (result.unexplained and all(
            cause in result.causes or cause <= result.unexplained for cause in causes)
            and all(cause in causes for cause in result.causes)):
        return "undecided"
    return "wrong"


def run_case(case: str, n: int, seeds: int, sigma: float, repeat: int) -> Row:
    row = Row(case, n, {"none": 0, "one": 1}.get(case, 2), [])
    for seed in range(seeds):
        rng = random.Random(f"{case}/{n}/{seed}")
        causes = plant(case, n, rng)
        result = explain(n, benchmark(causes, rng, sigma, repeat))
        row.used.append(len(result.trials))
        verdict = judge(result, causes)
        row.right += verdict == "right"
        row.undecided += verdict == "undecided"
        row.wrong += verdict == "wrong"
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--sigma", type=float, default=0.03,
                        help="lognormal noise of each run (0.03: about +-3%%)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per invocation")
    args = parser.parse_args()
    started = time.perf_counter()
    print(f"94 -> 61 tok/s with a cause applied, noise sigma {args.sigma}, {args.repeat} runs "
          f"per invocation, {args.seeds} seeds per row")
    print(f"{'case':<16} {'n':>3} {'k':>2} {'mean':>6} {'max':>4} {'bound':>5} "
          f"{'2kD+2':>5} {'over':>5} {'right':>7} {'undecided':>9} {'wrong':>6}")
    for case in CASES:
        for n in SIZES:
            row = run_case(case, n, args.seeds, args.sigma, args.repeat)
            bound = worst_case_invocations(n, row.k)
            issue_bound = 2 * row.k * math.ceil(math.log2(n)) + 2
            over = sum(used > bound for used in row.used)
            print(f"{case:<16} {n:>3} {row.k:>2} {statistics.fmean(row.used):>6.1f} "
                  f"{max(row.used):>4} {bound:>5} {issue_bound:>5} {over:>5} "
                  f"{row.right / args.seeds:>7.1%} {row.undecided / args.seeds:>9.1%} "
                  f"{row.wrong / args.seeds:>6.1%}")
            if n == SIZES[-1]:
                ledger.record(__file__, f"{case}, n={n}: invocations (max)", max(row.used),
                              "count", f"bound {bound}", f"<= {bound}")
                ledger.record(__file__, f"{case}, n={n}: right answers",
                              row.right / args.seeds * 100, "%", "-")
    print(f"over: runs where re-measuring a can't-tell trial went past the bound; "
          f"{time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
