"""explain's search over its whole input space, from a seeded generator: 1-4 causes of 5% to
80% among 1-16 differences, some of them an interacting pair, noise of 1-5% a run, a machine
that drifts by up to 4% an invocation, on a simulated benchmark.

Resolvable, the rule these properties hold to: a cause (a lone difference, or a pair that
hurts only together) whose slowdown is at least max(10%, 5 x the noise of one run): the
search's threshold is twice the noise it estimates from the runs, and a cause must be twice
that (explain/search.py, RESOLVABLE), with room for the estimate's own error. Smaller
ones may be found or left undecided; either is true.

Properties, per scenario:
- found: every resolvable cause is named (exactly its set), its size alone within
  max(5%, 3 x the noise) of the planted one (the ratio of medians, drift taken out);
- no false cause: no difference that slows nothing is part of a named cause;
- "no effect" only of a difference measured alone whose interval lies within the noise, and
  never of a resolvable cause;
- the whole drop is claimed only when every resolvable cause was named (alone, or within
  a set named only together).

More seeds on demand: python tests/unit/explain/test_explain_scenarios.py --seeds 2000
(prints each property's pass count).
"""
from __future__ import annotations

import argparse
import math
import random
import sys
from collections import Counter
from dataclasses import dataclass

from envsnap.explain.render import item_lines
from envsnap.explain.search import Explanation, Measure, explain

GOOD_SPEED = 94.0
REPEAT = 3
SEEDS = range(150)       # in the suite; more with --seeds
MAX_DRIFT = 0.04


@dataclass(frozen=True)
class Scenario:
    n: int
    alone: dict[int, float]                 # difference -> its slowdown alone
    pairs: dict[frozenset[int], float]      # two differences -> their slowdown together
    sigma: float                            # lognormal noise of one run
    rate: float                             # drift of log(metric) per invocation
    seed: int

    @property
    def causes(self) -> list[tuple[frozenset[int], float]]:
        return [(frozenset({index}), size) for index, size in self.alone.items()] + \
            list(self.pairs.items())

    @property
    def harmful(self) -> frozenset[int]:
        return frozenset(self.alone).union(*self.pairs)

    def resolvable(self, size: float) -> bool:
        return size >= max(0.10, 5 * self.sigma)

    def speed(self, applied: frozenset[int]) -> float:
        factor = 1.0
        for cause, size in self.causes:
            if cause <= applied:
                factor *= 1 - size
        return GOOD_SPEED * factor


def draw(seed: int) -> Scenario:
    rng = random.Random(seed)
    n = rng.randint(1, 16)
    k = rng.randint(1, min(4, n))
    picked = rng.sample(range(n), k)
    pairs: dict[frozenset[int], float] = {}
    if k >= 2 and rng.random() < 0.3:
        pairs[frozenset(picked[:2])] = rng.uniform(0.05, 0.8)
        picked = picked[2:]
    alone = {index: rng.uniform(0.05, 0.8) for index in picked}
    sigma = rng.uniform(0.01, 0.05)
    rate = rng.uniform(-MAX_DRIFT, MAX_DRIFT) if rng.random() < 0.7 else 0.0
    return Scenario(n, alone, pairs, sigma, rate, seed)


def benchmark(scenario: Scenario) -> Measure:
    rng = random.Random(scenario.seed * 7919 + 1)
    clock = [0]

    def measure(applied: frozenset[int]) -> list[float]:
        moved = math.exp(scenario.rate * clock[0])
        clock[0] += 1
        return [scenario.speed(applied) * moved * rng.lognormvariate(0, scenario.sigma)
                for _ in range(REPEAT)]
    return measure


class Item:
    """A difference as render.item_lines describes it."""

    def __init__(self, index: int) -> None:
        self.index = index

    def describe(self) -> str:
        return f"difference {self.index}"


def failures(scenario: Scenario, result: Explanation) -> list[str]:
    """The properties this result breaks (module docstring), by name."""
    broken = []
    named = set(result.causes)
    tolerance = max(0.05, 3 * scenario.sigma)
    for cause, size in scenario.causes:
        if not scenario.resolvable(size):
            continue
        if cause not in named:
            broken.append("found")
            continue
        effect = result.effect(cause)
        if effect is None or abs(effect.after / effect.before - (1 - size)) > tolerance:
            broken.append("size")
    harmless = frozenset(range(scenario.n)) - scenario.harmful
    if any(cause & harmless for cause in result.causes):
        broken.append("no false cause")
    lines = item_lines(result, [Item(index) for index in range(scenario.n)])
    for index in range(scenario.n):
        said = [line for line in lines if line.endswith(f"difference {index}")
                or f"difference {index}," in line or f"difference {index} " in line]
        if not any(line.startswith("no effect:") for line in said):
            continue
        within = result.within_noise(frozenset({index})) is not None
        planted = [size for cause, size in scenario.causes if cause == frozenset({index})]
        if not within or any(scenario.resolvable(size) for size in planted):
            broken.append("no effect only when measured")
    if result.whole_drop and any(scenario.resolvable(size) and
                                 not any(cause <= found for found in named)
                                 for cause, size in scenario.causes):
        broken.append("whole drop")
    return broken


def run(seeds: range) -> tuple[Counter[str], list[tuple[int, list[str]]]]:
    broken: Counter[str] = Counter()
    failed = []
    for seed in seeds:
        scenario = draw(seed)
        result = explain(scenario.n, benchmark(scenario))
        wrong = failures(scenario, result)
        broken.update(set(wrong))
        if wrong:
            failed.append((seed, wrong))
    return broken, failed


PROPERTIES = ("found", "size", "no false cause", "no effect only when measured", "whole drop")


def test_every_resolvable_cause_and_no_false_one() -> None:
    broken, failed = run(SEEDS)
    # a miss is a drawn scenario at the edge of the rule (drift and noise both near their
    # maximum); a false cause, or "no effect" of a cause, never
    assert broken["no false cause"] == 0, failed
    assert broken["no effect only when measured"] == 0, failed
    assert broken["whole drop"] == 0, failed
    assert broken["found"] + broken["size"] <= len(SEEDS) * 0.03, failed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=len(SEEDS))
    parser.add_argument("--first", type=int, default=0)
    args = parser.parse_args()
    seeds = range(args.first, args.first + args.seeds)
    broken, failed = run(seeds)
    lines = [f"{len(seeds)} scenarios"]
    lines += [f"  {name}: {len(seeds) - broken[name]} of {len(seeds)} pass"
              for name in PROPERTIES]
    lines += [f"  seed {seed}: {', '.join(wrong)}: {draw(seed)}" for seed, wrong in failed[:20]]
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
