"""How often the benchmark verdict is right: thousands of synthetic pairs of run sets with a
known effect and known noise, judged by the verdict `envsnap bench`, `restore --rerun` and
`bisect` use (bench/stats.py: Welch's t-test on logs, Yuen's on trimmed means beside it
from 5 runs a side, with the 5% threshold) and by the one it replaced (a Mann-Whitney rank
test with a Hodges-Lehmann interval), side by side. The old one's numbers come from the rank
test still in stats.py, decided as its decide() did.

Prints one row per noise model and runs per side (n):
  FPR          no effect, and yet "regression" or "improvement"       (must stay <= 5%)
  same@0       no effect, and "same" (the rest is "can't tell")
  10% 20% 2x   the new runs slower by that much: how often "regression" (the power)

Noise is multiplicative around 100 (benchmark noise scales with the number): normal at a
few CVs, lognormal, Student-t with 2 and 3 degrees of freedom (heavy tails), and outliers
(one run in 10 at 3x). tests/unit/bench/test_bench_calibration.py asserts on a smaller
draw of the same.

Usage: PYTHONPATH=. python3 bench/bench_calibration.py [--draws 2000] [--seed 14]
"""
from __future__ import annotations

import argparse
import math
import random
import sys
import time
from pathlib import Path
from typing import Callable

import ledger

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from envsnap import verdicts  # noqa: E402
from envsnap.bench import stats  # noqa: E402

CENTRE = 100.0
EFFECTS = {"10%": 0.9, "20%": 0.8, "2x": 0.5}   # new median / baseline median: slower
RUNS = (2, 3, 5, 10)

Noise = Callable[[random.Random, float], float]   # (rng, true value) -> one run's value
Judge = Callable[[list[float], list[float]], str]  # (baseline, new) -> a verdict


def normal(cv: float) -> Noise:
    return lambda rng, mu: mu * (1 + cv * rng.gauss(0, 1))


def lognormal(sigma: float) -> Noise:
    return lambda rng, mu: mu * math.exp(sigma * rng.gauss(0, 1))


def student(dof: float, scale: float) -> Noise:
    """mu * (1 + scale * T): with 2 dof the variance is infinite, and a run can even come out
    at or below 0 (about 1 in 2,000 at scale 3%): the verdict's raw-value path then."""
    def draw(rng: random.Random, mu: float) -> float:
        t = rng.gauss(0, 1) / math.sqrt(rng.gammavariate(dof / 2, 2) / dof)
        return mu * (1 + scale * t)
    return draw


def with_outliers(base: Noise, rate: float, factor: float) -> Noise:
    return lambda rng, mu: base(rng, mu) * (factor if rng.random() < rate else 1.0)


NOISES: dict[str, Noise] = {
    "normal cv 1%": normal(0.01),
    "normal cv 3%": normal(0.03),
    "normal cv 10%": normal(0.10),
    "lognormal 5%": lognormal(0.05),
    "student-t 3dof 3%": student(3, 0.03),
    "student-t 2dof 3%": student(2, 0.03),
    "outliers 1/10 at 3x": with_outliers(normal(0.02), 0.1, 3.0),
}


def draw_runs(rng: random.Random, noise: Noise, mu: float, n: int) -> list[float]:
    return [noise(rng, mu) for _ in range(n)]


def new_verdict(baseline: list[float], new: list[float]) -> str:
    return stats.compare(baseline, new)["verdict"]


def old_verdict(baseline: list[float], new: list[float],
                threshold: float = stats.DEFAULT_THRESHOLD,
                alpha: float = stats.DEFAULT_ALPHA) -> str:
    """The verdict before issue 14 (stats.py's compare/decide then), from its rank test."""
    n1, n2 = len(baseline), len(new)
    if n1 < 2 or n2 < 2 or stats.min_p_value(n1, n2) > alpha:
        return verdicts.CANT_TELL
    base_median = stats.summarise(baseline)["median"]
    if not base_median:
        return verdicts.CANT_TELL
    change = stats.summarise(new)["median"] / base_median - 1
    p = stats.mann_whitney(baseline, new).p_value
    if p < alpha and abs(change) > threshold:
        return verdicts.REGRESSION if change < 0 else verdicts.IMPROVEMENT
    interval = stats.shift_interval(baseline, new, alpha)
    bounded = interval is not None and -threshold <= interval[0] / abs(base_median) \
        and interval[1] / abs(base_median) <= threshold
    return verdicts.SAME if bounded and abs(change) <= threshold else verdicts.CANT_TELL


def rate(judge: Judge, noise: Noise, n: int, factor: float, draws: int,
         rng: random.Random, wanted: tuple[str, ...]) -> float:
    """The share of `draws` synthetic pairs (n runs a side, new = baseline * factor) whose
    verdict is one of `wanted`."""
    hits = 0
    for _ in range(draws):
        baseline = draw_runs(rng, noise, CENTRE, n)
        new = draw_runs(rng, noise, CENTRE * factor, n)
        hits += judge(baseline, new) in wanted
    return hits / draws


def false_positive_rate(judge: Judge, noise: Noise, n: int, draws: int,
                        rng: random.Random) -> float:
    return rate(judge, noise, n, 1.0, draws, rng, (verdicts.REGRESSION, verdicts.IMPROVEMENT))


def power(judge: Judge, noise: Noise, n: int, factor: float, draws: int,
          rng: random.Random) -> float:
    return rate(judge, noise, n, factor, draws, rng, (verdicts.REGRESSION,))


def same_rate(judge: Judge, noise: Noise, n: int, draws: int, rng: random.Random) -> float:
    return rate(judge, noise, n, 1.0, draws, rng, (verdicts.SAME,))


def row(judge: Judge, noise: Noise, n: int, draws: int, seed: int) -> list[float]:
    """FPR, same@0, then the power at each effect: each from its own seeded stream, so the
    new and old verdicts judge the very same pairs."""
    cells = [false_positive_rate(judge, noise, n, draws, random.Random(seed)),
             same_rate(judge, noise, n, draws, random.Random(seed))]
    cells += [power(judge, noise, n, factor, draws, random.Random(seed + index))
              for index, factor in enumerate(EFFECTS.values(), 1)]
    return cells


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=2000, help="pairs per cell")
    parser.add_argument("--seed", type=int, default=14)
    args = parser.parse_args()
    columns = ["FPR", "same@0", *EFFECTS]
    print(f"{args.draws} synthetic pairs per cell; each cell: new (Welch + Yuen on logs) | old "
          "(Mann-Whitney)")
    print(f"{'noise':<21} {'n':>3}  " + "  ".join(f"{c:>13}" for c in columns))
    started = time.perf_counter()
    worst_new = worst_old = 0.0
    for name, noise in NOISES.items():
        for n in RUNS:
            seed = args.seed * 1000 + n
            new = row(new_verdict, noise, n, args.draws, seed)
            old = row(old_verdict, noise, n, args.draws, seed)
            worst_new, worst_old = max(worst_new, new[0]), max(worst_old, old[0])
            print(f"{name:<21} {n:>3}  " + "  ".join(
                f"{a:>6.1%}|{b:<6.1%}" for a, b in zip(new, old)))
    print(f"({time.perf_counter() - started:.0f} s)")
    ledger.record(__file__, "false-positive rate, worst cell", worst_new * 100, "%",
                  f"the rank test it replaced: {worst_old:.1%}", "<= 5%")


if __name__ == "__main__":
    main()
