"""How many benchmark invocations `explain`'s search uses, against its bound, and how often
it names the right causes with their sizes, on a synthetic benchmark with planted causes,
noise and a machine that drifts.

n differences, k of them planted, each cause with its own slowdown: one cause (94 -> 61),
two independent ones of equal size, two of unequal size (a third and a sixth: the issue's
pull and NCCL_PROTO), three of unequal size (40%, 20%, 12%), two that only slow it down
together (an interaction), or none. Causes multiply; every run is that times lognormal
noise (--sigma), and one invocation is --repeat runs, as `envsnap explain --repeat 3` makes.
Each case runs on a still machine and on one that drifts by --drift per invocation (the
sign drawn per seed: slowing down or speeding up). For each case and n (4..64), --seeds
draws of the planted positions, the noise and the drift.

Printed: the search's invocations (the endpoints, the halving steps, the sizes of causes
found on earlier ones; mean, max) against the bound the command prints before a run
(worst_case_invocations: 2*k*ceil(log2 n) + k + 2, k the differences that take part in a
cause) and, listed apart, the sets measured again because their verdict could not tell
(the endpoints beyond their first pair too, and the steps of rounds the noise or the drift
misled: _Search.misled in envsnap/explain/search.py) and GOOD measured again to follow the drift
(mean, max each); how often
the answer was right (the planted causes exactly, the whole drop explained, nothing
unexplained; "no regression" for none), honestly undecided (outcome "can't tell", or the
right causes with some differences left unexplained), or wrong (a difference that slows
nothing named, or a cause missed with nothing left undecided).

Usage: PYTHONPATH=. python3 bench/bench_explain.py [--seeds 200] [--sigma 0.03] [--repeat 3]
       [--drift 0.02]
"""
from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import ledger

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from envsnap.explain.search import (  # noqa: E402
    Explanation,
    Measure,
    explain,
    worst_case_invocations,
)

GOOD_SPEED = 94.0
SIZES = (4, 8, 16, 32, 64)
# each case: the slowdown of each planted cause; "two interacting" plants one pair
CASES: dict[str, tuple[float, ...]] = {
    "one": (1 - 61 / 94,),
    "two equal": (1 - 61 / 94, 1 - 61 / 94),
    "two unequal": (1 / 3, 1 / 6),
    "three unequal": (0.4, 0.2, 0.12),
    "two interacting": (1 - 61 / 94,),
    "none": (),
}


@dataclass
class Row:
    case: str
    n: int
    k: int
    drift: float
    used: list[int] = field(default_factory=list)
    remeasured: list[int] = field(default_factory=list)
    noise_asked: list[int] = field(default_factory=list)
    right: int = 0
    undecided: int = 0
    wrong: int = 0


def plant(case: str, n: int, rng: random.Random) -> list[tuple[frozenset[int], float]]:
    sizes = CASES[case]
    if case == "two interacting":
        return [(frozenset(rng.sample(range(n), 2)), sizes[0])]
    return [(frozenset({index}), size) for index, size in zip(rng.sample(range(n), len(sizes)),
                                                             sizes)]


def benchmark(causes: list[tuple[frozenset[int], float]], rng: random.Random, sigma: float,
              repeat: int, drift: float) -> Measure:
    clock = [0]

    def measure(applied: frozenset[int]) -> list[float]:
        speed = GOOD_SPEED * math.exp(drift * clock[0])
        clock[0] += 1
        for cause, size in causes:
            if cause <= applied:
                speed *= 1 - size
        return [speed * rng.lognormvariate(0, sigma) for _ in range(repeat)]
    return measure


def judge(result: Explanation, causes: list[frozenset[int]]) -> str:
    named = sorted(map(sorted, result.causes))
    if not causes:
        return "right" if result.outcome == "no regression" else (
            "wrong" if result.causes else "undecided")
    if any(cause not in causes for cause in result.causes):
        return "wrong"
    if named == sorted(map(sorted, causes)):
        return "right" if result.whole_drop and not result.unexplained else "undecided"
    missed = [cause for cause in causes if cause not in result.causes]
    if result.outcome == "can't tell" or all(cause <= result.unexplained for cause in missed):
        return "undecided"
    return "wrong"


def run_case(case: str, n: int, seeds: int, sigma: float, repeat: int, drift: float) -> Row:
    row = Row(case, n, 2 if case == "two interacting" else len(CASES[case]), drift)
    for seed in range(seeds):
        rng = random.Random(f"{case}/{n}/{seed}/{drift}")
        planted = plant(case, n, rng)
        sign = rng.choice((-1, 1))
        result = explain(n, benchmark(planted, rng, sigma, repeat, sign * drift))
        # the search's own: the first pair of endpoints, the halving steps, the sizes
        row.used.append(result.count("endpoint", "search", "size") - max(
            0, result.count("endpoint") - 2))
        row.remeasured.append(result.remeasured)
        row.noise_asked.append(result.noise_asked)
        verdict = judge(result, [cause for cause, _ in planted])
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
    parser.add_argument("--drift", type=float, default=0.02,
                        help="drift of log(metric) per invocation on the drifting machine")
    args = parser.parse_args()
    started = time.perf_counter()
    print(f"causes multiply from 94 tok/s, noise sigma {args.sigma}, {args.repeat} runs per "
          f"invocation, drift 0 or +-{args.drift} per invocation, {args.seeds} seeds per row")
    print(f"{'case':<16} {'drift':>5} {'n':>3} {'k':>2} {'mean':>6} {'max':>4} {'bound':>5} "
          f"{'over':>4} {'noise again':>11} {'max':>4} {'GOOD again':>10} {'max':>4} "
          f"{'right':>7} {'undecided':>9} "
          f"{'wrong':>6}")
    for case in CASES:
        for drift in (0.0, args.drift):
            for n in SIZES:
                report(run_case(case, n, args.seeds, args.sigma, args.repeat, drift),
                       args.seeds)
    print(f"over: runs whose own invocations went past the bound; noise again: sets "
          f"measured again because their verdict could not tell, and the steps of rounds "
          f"the noise or drift misled; GOOD again: its "
          f"invocations to follow the drift; both apart from the search's own; "
          f"{time.perf_counter() - started:.1f} s")


def report(row: Row, seeds: int) -> None:
    bound = worst_case_invocations(row.n, row.k)
    over = sum(used > bound for used in row.used)
    print(f"{row.case:<16} {row.drift:>5.3f} {row.n:>3} {row.k:>2} "
          f"{statistics.fmean(row.used):>6.1f} {max(row.used):>4} {bound:>5} {over:>4} "
          f"{statistics.fmean(row.noise_asked):>11.1f} {max(row.noise_asked):>4} "
          f"{statistics.fmean(row.remeasured):>10.1f} {max(row.remeasured):>4} "
          f"{row.right / seeds:>7.1%} {row.undecided / seeds:>9.1%} {row.wrong / seeds:>6.1%}")
    if row.n != SIZES[-1]:
        return
    still = "" if row.drift == 0 else f", drift {row.drift:g}"
    ledger.record(__file__, f"{row.case}{still}, n={row.n}: invocations (max)", max(row.used),
                  "count", f"bound {bound}", f"<= {bound}")
    ledger.record(__file__, f"{row.case}{still}, n={row.n}: measured again for noise (max)",
                  max(row.noise_asked), "count", "-")
    ledger.record(__file__, f"{row.case}{still}, n={row.n}: GOOD again for drift (max)",
                  max(row.remeasured), "count", "-")
    ledger.record(__file__, f"{row.case}{still}, n={row.n}: right answers",
                  row.right / seeds * 100, "%", "-")
    ledger.record(__file__, f"{row.case}{still}, n={row.n}: wrong answers",
                  row.wrong / seeds * 100, "%", "-", "0")


if __name__ == "__main__":
    main()
