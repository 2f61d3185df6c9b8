"""Benchmark statistics, all pure: the metric in a run's output, summaries, the verdict.

The verdict is asv-style and never one number against another: Welch's t-test on the log
of the values (benchmark noise is multiplicative, and a ratio is what a person reads; from 5
runs a side beside Yuen's test on 20%-trimmed means, each at alpha / 2, so one outlier run in
ten does not drown a clear change) says whether the runs differ at all and gives a confidence
interval of the ratio; a factor threshold on the ratio of medians says whether the difference
matters; the interval says whether "same" is actually known or the runs are too noisy to tell
(docs/STORY.md: 84-118 tok/s in one run). Unlike a rank test, which at 3 vs 3 runs can
never reach p < 0.05, it is conclusive at 2-3 runs a side when the gap dwarfs the noise
(296.8 vs 26.8 GB/s), and heavy tails or an outlier widen its interval rather than fake a
verdict:
tests/unit/bench/test_bench_calibration.py and bench/bench_calibration.py measure its false-positive
rate and power. The Mann-Whitney U test below is the verdict it replaced, kept for that
comparison. Exact distributions for the small samples benchmarks have, midranks for ties.
"""
from __future__ import annotations

import math
import re
import statistics
from typing import NamedTuple, TypedDict

from envsnap.agent.patterns import PatternRefused, PatternTimeout, checked
from envsnap.errors import UsageError
from envsnap.verdicts import CANT_TELL, IMPROVEMENT, REGRESSION, SAME, BenchVerdict

EXACT_MAX_N = 30           # both samples together; above this the normal approximation
DEFAULT_THRESHOLD = 0.05   # a change under 5% of the median is "same"
DEFAULT_ALPHA = 0.05

# How a new set of runs compares with a baseline; plain strings in --json and in snapshots.


class SummaryCount(TypedDict):
    n: int


class Summary(SummaryCount, total=False):
    """summarise() of a set of runs: only `n` when there are none."""

    median: float
    min: float
    max: float
    mean: float
    stdev: float
    spread: float | None   # (max - min) / median; None when the median is 0


class Comparison(TypedDict):
    """What compare() returns: a plain dict (JSON as it is), typed for mypy."""

    ratio: float | None                  # new median / baseline median
    p_value: float | None                # Welch's t-test (on logs when all values are > 0)
    shift_interval: list[float] | None   # 1 - alpha interval of new / baseline - 1 (fractions)
    test: str                            # "welch-log", or "welch" on values not all > 0
                                         # (with Yuen's beside it from 5 runs a side)
    df: float | None                     # Welch-Satterthwaite; None when no run varied
    baseline: Summary                    # of each side
    new: Summary
    lower_is_better: bool
    threshold: float
    alpha: float
    verdict: BenchVerdict
    why: str


def compile_metric(regex: str) -> re.Pattern[str]:
    """The --metric regex, or one line (exit 2): not a regex, or one that could backtrack
    catastrophically (agent/patterns.py; docs/guide/capture.md, "Patterns": what is allowed)."""
    try:
        return checked(regex)
    except (re.error, OverflowError, RecursionError) as exc:   # `\d{99999999999}`, `((((...`
        raise UsageError(f"invalid --metric regex {regex!r}: {exc}") from None
    except PatternRefused as exc:
        raise UsageError(f"--metric regex {regex!r} refused: {exc} "
                         "(see docs/guide/capture.md#patterns)") from None


def parse_metric(text: str, pattern: str | re.Pattern[str]) -> float | None:
    """The metric in a run's output: the last match wins (a final summary line follows the
    warm-up lines), its first group, or the whole match for a regex without groups.
    None when nothing matches; ValueError when the match is not a finite number;
    UsageError when the regex backtracks past its time budget on this output. The agent
    stops its runs on the same rule (agent/benchrun.py), so both read a run alike."""
    from envsnap.agent.benchrun import metric_number, metric_text

    compiled = compile_metric(pattern) if isinstance(pattern, str) else pattern
    try:
        raw = metric_text(text, compiled)
    except PatternTimeout as exc:
        raise UsageError(f"--metric regex {compiled.pattern!r} {exc} on a run's output: "
                         "make it more specific (see docs/guide/capture.md#patterns)"
                         ) from None
    return None if raw is None else metric_number(raw)


def summarise(values: list[float]) -> Summary:
    """n, median, min, max, mean, stdev and spread ((max - min) / median) of the runs."""
    if not values:
        return {"n": 0}
    median = statistics.median(values)
    return {"n": len(values), "median": median, "min": min(values), "max": max(values),
            "mean": statistics.fmean(values),
            "stdev": math.sqrt(sample_variance(values)) if len(values) > 1 else 0.0,
            "spread": (max(values) - min(values)) / abs(median) if median else None}


# ---- Mann-Whitney U ----------------------------------------------------------------------

class RankTest(NamedTuple):
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


# ---- Welch's t-test, on trimmed means (Yuen) ------------------------------------------------

MIN_RUNS = 2   # per side: one run says nothing about the noise
TRIM = 0.2     # of the runs at each end, from 5 runs a side: an outlier run is set aside


class WelchTest(NamedTuple):
    difference: float   # trimmed mean of the second sample - trimmed mean of the first
    p_value: float      # two-sided
    df: float           # Welch-Satterthwaite; inf when neither sample varies
    interval: tuple[float, float]   # 1 - alpha confidence interval of the difference


def welch(first: list[float], second: list[float], alpha: float,
          trim: float = TRIM) -> WelchTest:
    """Yuen's test: Welch's unequal-variance t-test on the `trim`-trimmed means, with
    winsorized variances, two-sided, and its 1 - alpha interval. Below 5 runs a side
    (trim 0.2) nothing is trimmed and it is Welch's test itself; from 5, one outlier run in
    ten no longer drowns a clear change. Samples that do not vary at all (a metric that is
    an integer count) differ for sure when their means do, and not at all when they do not."""
    if len(first) < MIN_RUNS or len(second) < MIN_RUNS:
        raise ValueError(f"Welch's test needs at least {MIN_RUNS} values on each side")
    (mean1, part1, kept1), (mean2, part2, kept2) = (trimmed(first, trim),
                                                    trimmed(second, trim))
    difference = mean2 - mean1
    error = math.sqrt(part1 + part2)
    if error == 0:
        return WelchTest(difference, 0.0 if difference else 1.0, math.inf,
                         (difference, difference))
    df = (part1 + part2) ** 2 / (part1 ** 2 / (kept1 - 1) + part2 ** 2 / (kept2 - 1))
    margin = t_quantile(alpha, df) * error
    return WelchTest(difference, t_two_sided_p(difference / error, df), df,
                     (difference - margin, difference + margin))


def trimmed(values: list[float], trim: float) -> tuple[float, float, int]:
    """(trimmed mean, its squared standard error from the winsorized variance, values kept)."""
    ordered = sorted(values)
    n = len(ordered)
    cut = math.floor(trim * n)
    kept = ordered[cut:n - cut]
    winsorized = [ordered[cut]] * cut + kept + [ordered[n - cut - 1]] * cut
    h = len(kept)
    return (math.fsum(kept) / h, (n - 1) * sample_variance(winsorized) / (h * (h - 1)), h)


def sample_variance(values: list[float]) -> float:
    """In floats, two-pass: statistics.variance is exact, in Fractions, and too slow for the
    thousands of comparisons the calibration makes."""
    mean = math.fsum(values) / len(values)
    return math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1)


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with df degrees of freedom (df may be fractional)."""
    if math.isinf(df):
        return math.erfc(abs(t) / math.sqrt(2))
    return regularized_beta(df / (df + t * t), df / 2, 0.5)


def t_quantile(alpha: float, df: float) -> float:
    """The t > 0 with t_two_sided_p(t, df) = alpha: Newton's method on log p against log t,
    which is nearly a line (p ~ t^-df in the tail), from the normal quantile."""
    z = statistics.NormalDist().inv_cdf(1 - alpha / 2)
    if math.isinf(df):
        return z
    log_t, log_alpha = math.log(z), math.log(alpha)
    for _ in range(100):
        t = math.exp(log_t)
        p = t_two_sided_p(t, df)
        slope = -2 * t_density(t, df) * t / p     # d log p / d log t
        step = (math.log(p) - log_alpha) / slope
        log_t -= max(-1.0, min(1.0, step))       # no leap past the tail on a bad start
        if abs(step) < 1e-12:
            break
    return math.exp(log_t)


def t_density(t: float, df: float) -> float:
    log_norm = (math.lgamma((df + 1) / 2) - math.lgamma(df / 2)
                - 0.5 * math.log(df * math.pi))
    return math.exp(log_norm - (df + 1) / 2 * math.log1p(t * t / df))


def regularized_beta(x: float, a: float, b: float) -> float:
    """I_x(a, b), by the continued fraction (Numerical Recipes, betacf) on the side where it
    converges fast."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                 + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return math.exp(log_front) * beta_fraction(x, a, b) / a
    return 1 - math.exp(log_front) * beta_fraction(1 - x, b, a) / b


def beta_fraction(x: float, a: float, b: float) -> float:
    tiny = 1e-300
    c, d = 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 300):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= c * d
        if abs(c * d - 1) < 1e-15:
            break
    return result


def welch_and_yuen(first: list[float], second: list[float], alpha: float) -> WelchTest:
    """Welch's test on means and Yuen's on trimmed means, each at alpha / 2 (Bonferroni):
    the first keeps its power on clean runs, the second when a run is an outlier. The
    interval is the intersection of their 1 - alpha/2 intervals: it covers the true change
    with probability >= 1 - alpha, and excludes 0 exactly when one of them rejects."""
    if max(len(first), len(second)) * TRIM < 1:
        return welch(first, second, alpha, trim=0)   # nothing to trim: one test
    plain, robust = welch(first, second, alpha / 2, 0), welch(first, second, alpha / 2)
    low = max(plain.interval[0], robust.interval[0])
    high = min(plain.interval[1], robust.interval[1])
    best = min(plain, robust, key=lambda test: test.p_value)
    if low > high:   # they contradict each other: no interval, no verdict
        low, high = min(plain.interval[0], robust.interval[0]), max(plain.interval[1],
                                                                    robust.interval[1])
    return WelchTest(best.difference, min(1.0, 2 * best.p_value), best.df, (low, high))


# ---- the verdict -------------------------------------------------------------------------

def compare(baseline: list[float], new: list[float], lower_is_better: bool = False,
            threshold: float = DEFAULT_THRESHOLD, alpha: float = DEFAULT_ALPHA) -> Comparison:
    """regression | improvement | same | can't tell, with the numbers and one line of why."""
    base, fresh = summarise(baseline), summarise(new)
    on_logs = all(v > 0 for v in list(baseline) + list(new))
    # verdict and why are decided last; set here so the keys keep their order in --json
    result = Comparison(ratio=None, p_value=None, shift_interval=None,
                        test="welch-log" if on_logs else "welch", df=None, baseline=base,
                        new=fresh, lower_is_better=lower_is_better, threshold=threshold,
                        alpha=alpha, verdict=CANT_TELL, why="")
    if base["n"] and base["median"]:
        result["ratio"] = fresh["median"] / base["median"] if fresh["n"] else None
    if base["n"] >= MIN_RUNS and fresh["n"] >= MIN_RUNS:
        if on_logs:
            test = welch_and_yuen([math.log(v) for v in baseline], [math.log(v) for v in new],
                                  alpha)
            result["shift_interval"] = [math.expm1(end) for end in test.interval]
        else:
            test = welch_and_yuen(baseline, new, alpha)
            if base["median"]:
                result["shift_interval"] = [end / abs(base["median"]) for end in test.interval]
        # runs that never vary have no finite df, and JSON has no Infinity
        result["p_value"] = test.p_value
        result["df"] = test.df if math.isfinite(test.df) else None
    result["verdict"], result["why"] = decide(result)
    return result


def decide(result: Comparison) -> tuple[BenchVerdict, str]:
    n1, n2 = result["baseline"]["n"], result["new"]["n"]
    if n1 < MIN_RUNS or n2 < MIN_RUNS:
        return CANT_TELL, (f"too few runs ({n1} vs {n2}) to know the noise: at least "
                           f"{MIN_RUNS} a side, 3 or more to tell changes near the threshold")
    ratio, p, interval = result["ratio"], result["p_value"], result["shift_interval"]
    if ratio is None or p is None or interval is None:   # p is set whenever both sides are
        return CANT_TELL, "the baseline median is 0: no ratio to compare"
    change, threshold = ratio - 1, result["threshold"]
    said = (f"median {result['baseline']['median']:g} -> {result['new']['median']:g} "
            f"({change:+.1%}), p={p:.2g}")
    significant = p < result["alpha"]
    # The medians and the interval (of the log means) must agree on the direction: a lone
    # outlier can pull the means one way while most runs moved the other.
    agrees = interval[0] > 0 if change > 0 else interval[1] < 0
    if significant and abs(change) > threshold and agrees:
        worse = change > 0 if result["lower_is_better"] else change < 0
        return (REGRESSION if worse else IMPROVEMENT,
                f"{said}: significant and beyond the {threshold:.0%} threshold")
    bounded = -threshold <= interval[0] and interval[1] <= threshold
    if bounded and abs(change) <= threshold:
        return SAME, (f"{said}: any change is within {format_interval(interval)}, "
                      f"inside the {threshold:.0%} threshold")
    if significant and abs(change) > threshold:
        return CANT_TELL, (f"{said}: the medians and the means disagree on the direction "
                           f"({format_interval(interval)}): an outlier run? more runs "
                           "would tell")
    if significant:
        return CANT_TELL, (f"{said}: a real but small change that could still exceed "
                           f"{threshold:.0%} ({format_interval(interval)}); "
                           "more runs would tell")
    return CANT_TELL, (f"{said}: too noisy to tell, the change could be anywhere in "
                       f"{format_interval(interval)}; more runs would tell")


def format_interval(interval: list[float] | None) -> str:
    if interval is None:
        return "an unbounded interval"
    return f"{interval[0]:+.1%}..{interval[1]:+.1%}"
