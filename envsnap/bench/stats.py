"""Benchmark statistics, all pure: the metric in a run's output, summaries, the verdict.

The verdict is asv-style and never one number against another: a Mann-Whitney U rank test
over every run of both sides says whether the runs differ at all, a factor threshold says
whether the difference matters, and a Hodges-Lehmann interval of the shift says whether
"same" is actually known or the runs are too noisy to tell (docs/STORY.md: 84-118 tok/s in one
run). Exact distributions for the small samples benchmarks have, midranks for ties.
"""
from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass
from typing import Any, Final, Literal, TypedDict

from envsnap.errors import UsageError

EXACT_MAX_N = 30           # both samples together; above this the normal approximation
DEFAULT_THRESHOLD = 0.05   # a change under 5% of the median is "same"
DEFAULT_ALPHA = 0.05

# How a new set of runs compares with a baseline; plain strings in --json and in snapshots.
Verdict = Literal["regression", "improvement", "same", "can't tell"]
REGRESSION: Final = "regression"
IMPROVEMENT: Final = "improvement"
SAME: Final = "same"
CANT_TELL: Final = "can't tell"


class Comparison(TypedDict):
    """What compare() returns: a plain dict (JSON as it is), typed for mypy."""

    ratio: float | None                  # new median / baseline median
    p_value: float | None                # Mann-Whitney, two-sided
    shift_interval: list[float] | None   # of new - baseline, as fractions of the baseline median
    baseline: dict[str, Any]             # summarise() of each side
    new: dict[str, Any]
    lower_is_better: bool
    threshold: float
    alpha: float
    verdict: Verdict
    why: str


def compile_metric(regex: str) -> re.Pattern[str]:
    try:
        return re.compile(regex)
    except (re.error, OverflowError, RecursionError) as exc:   # `\d{99999999999}`, `((((...`
        raise UsageError(f"invalid --metric regex {regex!r}: {exc}") from None


def parse_metric(text: str, pattern: str | re.Pattern[str]) -> float | None:
    """The metric in a run's output: the last match wins (a final summary line follows the
    warm-up lines), its first group, or the whole match for a regex without groups.
    None when nothing matches; ValueError when the match is not a finite number. The agent
    stops its runs on the same rule (agent/benchrun.py), so both read a run alike."""
    from envsnap.agent.benchrun import metric_number, metric_text

    compiled = re.compile(pattern) if isinstance(pattern, str) else pattern
    raw = metric_text(text, compiled)
    return None if raw is None else metric_number(raw)


def summarise(values: list[float]) -> dict[str, Any]:
    """n, median, min, max, mean, stdev and spread ((max - min) / median) of the runs."""
    if not values:
        return {"n": 0}
    median = statistics.median(values)
    return {"n": len(values), "median": median, "min": min(values), "max": max(values),
            "mean": statistics.fmean(values),
            "stdev": statistics.stdev(values) if len(values) > 1 else 0.0,
            "spread": (max(values) - min(values)) / abs(median) if median else None}


# ---- Mann-Whitney U ----------------------------------------------------------------------

@dataclass(frozen=True)
class RankTest:
    u: float          # U of the first sample: how often one of its values beats the second's
    p_value: float    # two-sided
    exact: bool


def midranks(values: list[float]) -> list[float]:
    """1-based ranks; tied values share the mean of the ranks they span."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for position in range(start, end + 1):
            ranks[order[position]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def subset_sum_counts(weights: list[int], size: int) -> dict[int, int]:
    """sum -> how many subsets of `size` weights have it: the permutation null of a rank sum."""
    ways: list[dict[int, int]] = [{0: 1}] + [{} for _ in range(size)]
    for weight in weights:
        for taken in range(size, 0, -1):
            target = ways[taken]
            for total, count in ways[taken - 1].items():
                target[total + weight] = target.get(total + weight, 0) + count
    return ways[size]


def exact_p(ranks: list[float], n1: int) -> float:
    # Doubled midranks are integers, so ties keep an exact (conditional) distribution.
    doubled = [round(2 * rank) for rank in ranks]
    observed = sum(doubled[:n1])
    counts = subset_sum_counts(doubled, n1)
    total = sum(counts.values())
    below = sum(c for s, c in counts.items() if s <= observed)
    above = sum(c for s, c in counts.items() if s >= observed)
    return min(1.0, 2 * min(below, above) / total)


def normal_p(u: float, ranks: list[float], n1: int, n2: int) -> float:
    n = n1 + n2
    ties = sum(t ** 3 - t for t in tie_sizes(ranks))
    variance = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1)))
    if variance <= 0:
        return 1.0   # every value equal: nothing to tell apart
    z = max(0.0, abs(u - n1 * n2 / 2) - 0.5) / math.sqrt(variance)   # continuity-corrected
    return min(1.0, math.erfc(z / math.sqrt(2)))


def tie_sizes(ranks: list[float]) -> list[int]:
    counts: dict[float, int] = {}
    for rank in ranks:
        counts[rank] = counts.get(rank, 0) + 1
    return [count for count in counts.values() if count > 1]


def mann_whitney(first: list[float], second: list[float],
                 exact: bool | None = None) -> RankTest:
    """Two-sided Mann-Whitney U test; exact up to EXACT_MAX_N values unless told otherwise."""
    n1, n2 = len(first), len(second)
    if not n1 or not n2:
        raise ValueError("Mann-Whitney needs at least one value on each side")
    ranks = midranks(list(first) + list(second))
    u = sum(ranks[:n1]) - n1 * (n1 + 1) / 2
    use_exact = n1 + n2 <= EXACT_MAX_N if exact is None else exact
    p = exact_p(ranks, n1) if use_exact else normal_p(u, ranks, n1, n2)
    return RankTest(u=u, p_value=p, exact=use_exact)


def min_p_value(n1: int, n2: int) -> float:
    """The smallest two-sided p the exact test can give: all of one side above the other."""
    return min(1.0, 2 / math.comb(n1 + n2, n1))


def u_critical(n1: int, n2: int, alpha: float) -> int | None:
    """The largest u with P(U <= u) <= alpha/2 under the null (no ties); None if none is."""
    if n1 + n2 <= EXACT_MAX_N:
        counts = subset_sum_counts(list(range(1, n1 + n2 + 1)), n1)
        total, cumulative, found = math.comb(n1 + n2, n1), 0, None
        for rank_sum in sorted(counts):
            cumulative += counts[rank_sum]
            if cumulative / total > alpha / 2:
                break
            found = rank_sum - n1 * (n1 + 1) // 2
        return found
    z = statistics.NormalDist().inv_cdf(1 - alpha / 2)
    bound = math.floor(n1 * n2 / 2 - z * math.sqrt(n1 * n2 * (n1 + n2 + 1) / 12) - 0.5)
    return bound if bound >= 0 else None


def shift_interval(base: list[float], new: list[float],
                   alpha: float) -> tuple[float, float] | None:
    """A 1 - alpha confidence interval of the shift new - base (Hodges-Lehmann, from the
    sorted pairwise differences), or None when the samples are too small to bound it."""
    k = u_critical(len(base), len(new), alpha)
    if k is None:
        return None
    differences = sorted(b - a for a in base for b in new)
    return differences[k], differences[len(differences) - 1 - k]


# ---- the verdict -------------------------------------------------------------------------

def runs_needed(alpha: float) -> int:
    """Runs per side for the exact test to be able to reach p < alpha at all."""
    n = 2
    while min_p_value(n, n) > alpha:
        n += 1
    return n


def compare(baseline: list[float], new: list[float], lower_is_better: bool = False,
            threshold: float = DEFAULT_THRESHOLD, alpha: float = DEFAULT_ALPHA) -> Comparison:
    """regression | improvement | same | can't tell, with the numbers and one line of why."""
    base, fresh = summarise(baseline), summarise(new)
    # verdict and why are decided last; set here so the keys keep their order in --json
    result = Comparison(ratio=None, p_value=None, shift_interval=None, baseline=base, new=fresh,
                        lower_is_better=lower_is_better, threshold=threshold, alpha=alpha,
                        verdict=CANT_TELL, why="")
    if base["n"] and fresh["n"]:
        result["p_value"] = mann_whitney(baseline, new).p_value
    if base["n"] and base["median"]:
        result["ratio"] = fresh["median"] / base["median"]
        interval = shift_interval(baseline, new, alpha) if fresh["n"] else None
        if interval is not None:
            result["shift_interval"] = [v / abs(base["median"]) for v in interval]
    result["verdict"], result["why"] = decide(result)
    return result


def decide(result: Comparison) -> tuple[Verdict, str]:
    n1, n2 = result["baseline"]["n"], result["new"]["n"]
    if n1 < 2 or n2 < 2 or min_p_value(n1, n2) > result["alpha"]:
        return CANT_TELL, (f"too few runs ({n1} vs {n2}) for any difference to be "
                           f"significant; use --repeat {runs_needed(result['alpha'])} or more")
    ratio, p = result["ratio"], result["p_value"]
    if ratio is None or p is None:   # p is set whenever both sides have runs (above)
        return CANT_TELL, "the baseline median is 0: no ratio to compare"
    change, threshold = ratio - 1, result["threshold"]
    interval = result["shift_interval"]
    said = (f"median {result['baseline']['median']:g} -> {result['new']['median']:g} "
            f"({change:+.1%}), p={p:.2g}")
    if p < result["alpha"] and abs(change) > threshold:
        worse = change > 0 if result["lower_is_better"] else change < 0
        return (REGRESSION if worse else IMPROVEMENT,
                f"{said}: significant and beyond the {threshold:.0%} threshold")
    bounded = interval is not None and -threshold <= interval[0] and interval[1] <= threshold
    if bounded and abs(change) <= threshold:
        return SAME, (f"{said}: any shift is within {format_interval(interval)}, "
                      f"inside the {threshold:.0%} threshold")
    if p < result["alpha"]:
        return CANT_TELL, (f"{said}: a real but small change that could still exceed "
                           f"{threshold:.0%} ({format_interval(interval)}); "
                           "more runs would tell")
    return CANT_TELL, (f"{said}: too noisy to tell, the shift could be anywhere in "
                       f"{format_interval(interval)}; more runs would tell")


def format_interval(interval: list[float] | None) -> str:
    if interval is None:
        return "an unbounded interval"
    return f"{interval[0]:+.1%}..{interval[1]:+.1%}"
