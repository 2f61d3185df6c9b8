"""Where a state's runs fall between the good end and the bad end, and how far the machine
drifted while a search ran; all pure.

bisect and explain ask the same thing of every trial: is it like GOOD, like BAD, part of
the way (one of several causes, one of two slow commits), or can the noise not tell yet?
Judged against GOOD alone, a machine that slows down during the search reads as a
regression: a value four times nearer GOOD than BAD was called bad. So a trial is placed
against both ends, with bench.stats.compare against each, on the log of the metric (noise
and drift multiply), and each run is first brought back to the search's start by the drift
that GOOD, measured again during the search, shows (`Timed`, `fit_drift`, `detrended`).

The drift model is one rate: log(metric) moves by `Drift.rate` per invocation, whatever the
state (a machine warming, a neighbour's job growing). Measured by least squares over GOOD's
invocations; with one of them there is nothing to fit, and the rate is 0.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Final, Literal, NamedTuple

from envsnap.bench import stats as benchstats
from envsnap.verdicts import CANT_TELL, IMPROVEMENT, REGRESSION, SAME, BenchVerdict

Place = Literal["good", "bad", "between", "can't tell"]
LIKE_GOOD: Final = "good"
LIKE_BAD: Final = "bad"
BETWEEN: Final = "between"     # resolvably worse than GOOD and better than BAD
UNPLACED: Final = "can't tell"


class Timed(NamedTuple):
    """One invocation's runs and its place in the search's order (0, 1, 2, ...)."""

    at: int
    values: tuple[float, ...]


class Drift(NamedTuple):
    rate: float                  # change of log(metric) per invocation; 0: none measured
    seen: BenchVerdict           # GOOD's later invocations against its earlier ones (pooled)
    measurements: int            # GOOD's invocations it was fitted on
    error: float = 0.0           # the rate's standard error (0: not estimated)

    @property
    def detected(self) -> bool:
        """GOOD measured later differs from GOOD measured earlier beyond the noise."""
        return self.seen in (REGRESSION, IMPROVEMENT)

    def over(self, invocations: int) -> float:
        """The fraction the metric moved over that many invocations (+: it rose)."""
        return math.expm1(self.rate * invocations)


NO_DRIFT: Final = Drift(0.0, SAME, 0)


def fit_drift(reference: Sequence[Timed], lower_is_better: bool = False) -> Drift:
    """The rate from GOOD's invocations: the least-squares slope of log(median) over their
    places; 0 with fewer than two places or a median that is not positive."""
    if len(reference) < 2 or len({timed.at for timed in reference}) < 2:
        return Drift(0.0, SAME, len(reference))
    # GOOD's earlier half of its invocations against its later half, pooled: more runs a
    # side than the first against the last, so a steady drift is seen sooner
    middle = (len(reference) + 1) // 2
    seen = benchstats.compare([value for timed in reference[:middle] for value in timed.values],
                              [value for timed in reference[middle:] for value in timed.values],
                              lower_is_better)["verdict"]
    medians = [statistics.median(timed.values) for timed in reference]
    if min(medians) <= 0:
        return Drift(0.0, seen, len(reference))
    places = [float(timed.at) for timed in reference]
    logs = [math.log(median) for median in medians]
    mean_at, mean_log = statistics.fmean(places), statistics.fmean(logs)
    spread = sum((at - mean_at) ** 2 for at in places)
    rate = sum((at - mean_at) * (value - mean_log) for at, value in zip(places, logs)) / spread
    return Drift(rate, seen, len(reference))


def fit_drift_pooled(series: Sequence[Sequence[Timed]],
                     lower_is_better: bool = False) -> Drift:
    """One rate from several states each measured more than once (GOOD, BAD, a commit given
    more runs): the least-squares slope of log(median) over the places, each state about its
    own mean, so a state's level never reads as drift. `seen` is the first state's latest
    runs against its first (GOOD's, in a bisect); 0 where no state was measured twice."""
    usable = [list(one) for one in series
              if len({timed.at for timed in one}) >= 2
              and min(statistics.median(timed.values) for timed in one) > 0]
    measurements = sum(len(one) for one in series)
    first = next((list(one) for one in series if len(one) >= 2), None)
    seen: BenchVerdict = SAME if first is None else benchstats.compare(
        list(first[0].values), list(first[-1].values), lower_is_better)["verdict"]
    spread = covariance = 0.0
    centred: list[tuple[float, float]] = []
    for one in usable:
        places = [float(timed.at) for timed in one]
        logs = [math.log(statistics.median(timed.values)) for timed in one]
        mean_at, mean_log = statistics.fmean(places), statistics.fmean(logs)
        centred += [(at - mean_at, value - mean_log) for at, value in zip(places, logs)]
        spread += sum((at - mean_at) ** 2 for at in places)
        covariance += sum((at - mean_at) * (value - mean_log)
                          for at, value in zip(places, logs))
    if not spread:
        return Drift(0.0, seen, measurements)
    rate = covariance / spread
    # the slope's standard error from the residuals; with no degree of freedom left (two
    # invocations of one state) the rate itself stands for it: it may be all noise
    freedom = len(centred) - len(usable) - 1
    error = (math.sqrt(sum((value - rate * at) ** 2 for at, value in centred)
                       / freedom / spread) if freedom > 0 else abs(rate))
    return Drift(rate, seen, measurements, error)


def detrended(invocations: Sequence[Timed], drift: Drift) -> list[float]:
    """Every run of these invocations as it would have read at the search's start."""
    if drift.rate == 0:
        return [value for timed in invocations for value in timed.values]
    return [value * math.exp(-drift.rate * timed.at)
            for timed in invocations for value in timed.values]


class Placement(NamedTuple):
    place: Place
    share: float | None                  # 0 at GOOD, 1 at BAD, on the log of the medians
    vs_good: benchstats.Comparison       # the runs against GOOD's
    vs_bad: benchstats.Comparison        # ... and against BAD's


def share_of_drop(good: Sequence[float], bad: Sequence[float],
                  values: Sequence[float]) -> float | None:
    """How much of GOOD -> BAD these runs show, on the log of the medians (0: none, 1: all);
    None where a median is not positive or the ends do not differ."""
    medians = [statistics.median(side) for side in (good, bad, values)]
    if min(medians) <= 0 or medians[0] == medians[1]:
        return None
    good_median, bad_median, median = medians
    return math.log(median / good_median) / math.log(bad_median / good_median)


def place(good: Sequence[float], bad: Sequence[float], values: Sequence[float],
          lower_is_better: bool = False,
          threshold: float = benchstats.DEFAULT_THRESHOLD,
          allowance: tuple[float, float] = (0.0, 0.0)) -> Placement:
    """Like GOOD (not worse than it, better than BAD), like BAD (worse than GOOD, not
    better than BAD), between (worse than GOOD and better than BAD, both beyond the noise)
    or can't tell (more runs may settle it). Each "than" is bench.stats.compare's verdict,
    so "like" needs its interval inside the threshold: an unsettled side stays unplaced.
    A noisy machine asks for a wider threshold (`threshold_for`), else nothing is ever
    "like" either end; `allowance` widens it further against GOOD and against BAD: how far
    a drift taken out may still be off."""
    vs_good = benchstats.compare(list(good), list(values), lower_is_better,
                                 threshold + allowance[0])
    vs_bad = benchstats.compare(list(bad), list(values), lower_is_better,
                                threshold + allowance[1])
    share = share_of_drop(good, bad, values)
    worse_than_good = vs_good["verdict"] == REGRESSION
    better_than_bad = vs_bad["verdict"] == IMPROVEMENT
    if worse_than_good and better_than_bad:
        where: Place = BETWEEN
    elif worse_than_good and not_better(vs_bad):
        where = LIKE_BAD
    elif better_than_bad and not_worse(vs_good):
        where = LIKE_GOOD
    else:
        where = UNPLACED
    return Placement(where, share, vs_good, vs_bad)


def noise_of(invocations: Sequence[Timed]) -> float:
    """The spread of one run, as the standard deviation of log(metric) within invocations
    (pooled over them): drift moves whole invocations, so it does not count as noise. 0
    with no invocation of two positive runs."""
    squares, freedom = 0.0, 0
    for timed in invocations:
        if len(timed.values) < 2 or min(timed.values) <= 0:
            continue
        logs = [math.log(value) for value in timed.values]
        mean = statistics.fmean(logs)
        squares += sum((value - mean) ** 2 for value in logs)
        freedom += len(logs) - 1
    return math.sqrt(squares / freedom) if freedom else 0.0


# A change must be this many times the noise of one run to count: two standard deviations
# of one run, so a state within the noise is "like" an end (its interval fits inside) while
# a change of four of them is still beyond it from a handful of runs.
NOISE_WIDTHS: Final = 2.0


def threshold_for(noise: float) -> float:
    """The threshold for compare and place on a machine with this noise: the default, or
    NOISE_WIDTHS standard deviations of one run where that is wider."""
    return max(benchstats.DEFAULT_THRESHOLD, math.expm1(NOISE_WIDTHS * noise))
def not_worse(comparison: benchstats.Comparison) -> bool:
    """Same or better, or can't tell with every worse change the interval allows inside
    the threshold."""
    return one_sided(comparison, worse=True)


def not_better(comparison: benchstats.Comparison) -> bool:
    """Same or worse, or can't tell with every better change inside the threshold."""
    return one_sided(comparison, worse=False)


def one_sided(comparison: benchstats.Comparison, worse: bool) -> bool:
    verdict = comparison["verdict"]
    if verdict == SAME or verdict == (IMPROVEMENT if worse else REGRESSION):
        return True
    interval, ratio = comparison["shift_interval"], comparison["ratio"]
    if verdict != CANT_TELL or interval is None or ratio is None:
        return False
    threshold = comparison["threshold"]
    # shift_interval is new / baseline - 1: a rise is worse when lower is better
    rise_is_the_side = worse == comparison["lower_is_better"]
    if rise_is_the_side:
        return interval[1] <= threshold and ratio - 1 <= threshold
    return interval[0] >= -threshold and ratio - 1 >= -threshold
