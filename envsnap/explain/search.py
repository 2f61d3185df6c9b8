"""Which of n differences turn a good state into a bad one, by experiment, all pure.

The differences are numbered 0..n-1. A trial applies a set of them on top of the good state
(the rest stay as in good) and runs the benchmark there. Each trial is placed between the
two ends (bench/between.py) against the base it is searched from: a set holds a cause when
its state is worse than the base beyond the threshold (between the base and BAD, or like
BAD), so a cause of a sixth of the drop counts as much as one of all of it; it holds none
when its interval rules out a slowdown of RESOLVABLE thresholds (like the base, or better:
a set that may be far faster but not slower holds no cause of the drop). The
threshold widens with the noise of the two ends' runs (between.threshold_for): a cause is
resolvable when it is at least 10%, or four times the noise of one run.

The search is adaptive group testing in the style of Zeller's isolating delta debugging,
in rounds, each from a base state (GOOD's at first):

- find one cause among candidates that are bad together on the base: try the first half on
  the base, then the second; recurse into a half that is bad. If neither half is bad but
  both together are, the cause is an interaction (once the whole is measured again and
  still bad, and neither half's runs, judged again with the drift known by then, is bad):
  find the part of the first half that is needed with all of the second
  applied, then the part of the second needed with that part. A part that is bad by
  itself on the base is the cause instead; a whole worse by less than a resolvable cause
  is left undecided, not called an interaction. A path that ends undecided leaves the
  other candidates to be searched still.
- the cause's state is confirmed with GOOD measured right after it (drift, below); a cause
  that does not hold up sends the round back to its start (MAX_RESTARTS).
- a cause found on a base of earlier causes is measured alone on GOOD, for its size; one
  that does not hurt alone only hurts together with them (an interaction), once the base
  and its state, measured afresh, still say so.
- GOOD plus every cause found so far is then judged against BAD: the same (no change of a
  resolvable size) means the whole drop is explained; resolvably better means more
  remains, and the next round searches the other differences from that state, the new
  base; can't tell leaves the rest undecided.
- at the end, each lone cause's runs alone are judged again with the drift of the whole
  search taken out: one no longer worse than GOOD is dropped (undecided if it can't tell).

Drift: GOOD is measured again every REMEASURE_EVERY invocations (every half of that until
it has been measured three times, and more often once the machine is seen drifting:
DRIFT_STEP), and right after every cause's state is confirmed. A line fitted through
GOOD's invocations (between.fit_drift) gives the rate; where GOOD's later invocations
differ from its earlier ones beyond the noise (drift detected), every invocation's runs
are brought back to the search's start (between.detrended) before any verdict. Those
measurements of GOOD are counted apart from the search's own (`Explanation.remeasured`).

Budget, for k differences that are part of a cause (a lone cause counts 1, an interacting
pair 2) among n, with D = ceil(log2 n), when no trial can't tell: 2 endpoint invocations,
at most 2 per halving level (2*D for a lone cause; for a pair 2*D per part, less the level
they share, plus the whole measured again and its parts alone) and one per cause for its
size alone when it was found on a base of earlier causes (the first cause's last halving
step is its size alone, and every round's last halving step is the state its remainder is
judged on): 2*k*D + k + 2 (worst_case_invocations). Noise adds: a trial that can't tell
is measured again up to MAX_REMEASURES more times, its runs pooled (or its base's, or
BAD's, where those are the side with fewer runs; the endpoints, and the causes' state
against BAD, up to ENDPOINT_REMEASURES more), a set that one invocation places just past
its base (NEAR_BASE) is measured once more before it counts as bad, and the steps of a
round the noise misled (one that ends with no cause: not confirmed, or undecided) are
searched again or left undecided: those are counted apart (`Explanation.noise_asked`);
drift adds GOOD's measurements. `max_invocations` caps it all, and what it leaves
undecided is unexplained.
bench/bench_explain.py measures invocations used and answers.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Final, Literal, NamedTuple

from envsnap.bench import between
from envsnap.bench import stats as benchstats
from envsnap.bench.between import NO_DRIFT, Drift, Timed
from envsnap.bisect import search as bisectsearch
from envsnap.verdicts import (
    BAD,
    CANT_TELL,
    FOUND,
    GOOD,
    IMPROVEMENT,
    NO_REGRESSION,
    REGRESSION,
    SAME,
    BenchVerdict,
    ExplainOutcome,
    TrialVerdict,
)

# Runs the benchmark on GOOD's state plus the differences with these indices taken from the
# current (bad) state; returns the metric values of its runs.
Measure = Callable[[frozenset[int]], list[float]]

# A trial that can't tell is measured again this many times at most, its runs pooled: more
# runs narrow the interval, but noise that never settles must not eat the budget.
MAX_REMEASURES: Final = 2
# The endpoints more: every verdict of the search is judged against their runs, and whether
# there is a regression to explain at all is the first answer (bisect's endpoints, too, take
# up to 20 runs; 5 invocations of 3 runs is 15). bench/bench_explain.py: "none" at 3% noise.
ENDPOINT_REMEASURES: Final = 4
# GOOD is measured again after this many other invocations while no drift is seen: a
# quarter more invocations buys a drift that is seen before it can pass for a cause.
REMEASURE_EVERY: Final = 4
# Once drift is seen, GOOD is measured often enough that the machine moves at most this
# much (on the log of the metric) between two of its measurements: well inside the
# smallest threshold, so what the fitted line misses stays inside it too.
DRIFT_STEP: Final = 0.02
# A cause is resolvable when it is this many thresholds large (between.threshold_for: 10%,
# or four times the noise of one run): a state is like its base when its interval rules
# out a change that large, and worse than it when it is beyond one threshold.
RESOLVABLE: Final = 2.0
# A set that one invocation places this near its base (a share of the drop from the base to
# BAD) is measured once more before it counts as bad: from one invocation, noise of a few
# per cent reads as a small cause and sends the halving down the wrong half.
NEAR_BASE: Final = 0.25
# A round whose cause did not hold up when confirmed starts again, this many times at most
# in a search: the trials that misled it are pooled with new ones, not thrown away.
MAX_RESTARTS: Final = 2

Purpose = Literal["endpoint", "search", "drift", "size", "again"]
ENDPOINT: Final = "endpoint"    # GOOD and BAD at the start, until they can be compared
SEARCH: Final = "search"        # the halving steps and the remainder's checks
DRIFT: Final = "drift"          # GOOD measured again to follow the machine
SIZE: Final = "size"            # a cause found on earlier causes, measured alone on GOOD
AGAIN: Final = "again"          # a set measured again because its verdict could not tell


@dataclass(frozen=True)
class Trial:
    """One benchmark invocation: the set applied, its own runs, what it was for, and the
    verdict on that set's runs so far (pooled with its earlier invocations)."""

    applied: frozenset[int]
    values: list[float]
    verdict: TrialVerdict
    purpose: Purpose = SEARCH


class Effect(NamedTuple):
    """A state's runs against GOOD's, drift taken out: the two medians and the comparison
    (its interval, its verdict at the search's threshold)."""

    before: float
    after: float
    comparison: benchstats.Comparison


@dataclass(frozen=True)
class Explanation:
    outcome: ExplainOutcome
    # Minimal sets: a singleton is one difference that alone makes it worse; a larger set
    # an interaction (only together). "found" may still leave some unexplained.
    causes: list[frozenset[int]]
    unexplained: frozenset[int]     # differences the noise (or the budget) left undecided
    trials: list[Trial]             # in order; [0] the good endpoint, [1] the bad one
    n: int                          # the differences searched
    lower_is_better: bool = False
    drift: Drift = NO_DRIFT         # fitted on GOOD's invocations at the end
    threshold: float = benchstats.DEFAULT_THRESHOLD   # of every comparison, for the noise
    # GOOD + every cause against BAD at the end: same (or regression) is the whole drop;
    # None where no cause was found
    remainder: BenchVerdict | None = None

    @property
    def corrected(self) -> bool:
        """Whether the runs were brought back to the search's start: drift detected and a
        rate fitted (a median that is not positive has none)."""
        return self.drift.detected and self.drift.rate != 0

    @property
    def good(self) -> list[float]:
        """GOOD's runs, all its invocations pooled, drift taken out where detected."""
        return end_runs(self.trials, self.n, False, self.drift if self.corrected else NO_DRIFT)

    @property
    def bad(self) -> list[float]:
        return end_runs(self.trials, self.n, True, self.drift if self.corrected else NO_DRIFT)

    @property
    def together(self) -> frozenset[int]:
        return frozenset().union(*self.causes)

    def runs(self, applied: frozenset[int]) -> list[float]:
        return detrended_runs(self.trials, applied, self.drift if self.corrected else NO_DRIFT)

    def alone(self, cause: frozenset[int]) -> Trial | None:
        """The last trial that applied exactly `cause` on GOOD's state."""
        return next((t for t in reversed(self.trials) if t.applied == cause), None)

    def effect(self, applied: frozenset[int]) -> Effect | None:
        """The state with these differences on GOOD's, against GOOD; None if never run."""
        values, good = self.runs(applied), self.good
        if not values or not good:
            return None
        return Effect(statistics.median(good), statistics.median(values),
                      benchstats.compare(good, values, self.lower_is_better, self.threshold))

    def within_noise(self, applied: frozenset[int]) -> benchstats.Comparison | None:
        """The comparison with GOOD of a state measured with nothing resolvable to show: not
        worse beyond the threshold, and its interval inside a resolvable cause's size (the
        search's "like"); None where it was not measured, or shows more."""
        values, good = self.runs(applied), self.good
        if not values or not good:
            return None
        worse = benchstats.compare(good, values, self.lower_is_better, self.threshold)
        like = benchstats.compare(good, values, self.lower_is_better,
                                  RESOLVABLE * self.threshold)
        if worse["verdict"] == REGRESSION or like["verdict"] != SAME:
            return None
        return like

    def faster(self, applied: frozenset[int]) -> bool:
        """This state, measured, is resolvably better than GOOD (beyond the threshold)."""
        values, good = self.runs(applied), self.good
        return bool(values and good) and benchstats.compare(
            good, values, self.lower_is_better, self.threshold)["verdict"] == IMPROVEMENT

    def count(self, *purposes: Purpose) -> int:
        return sum(trial.purpose in purposes for trial in self.trials)

    @property
    def remeasured(self) -> int:
        """GOOD's invocations that drift asked for, apart from the search's own."""
        return self.count(DRIFT)

    @property
    def noise_asked(self) -> int:
        """The invocations the noise asked for: a set (or the endpoints, beyond their first
        pair) measured again because its verdict could not tell. Apart from these and
        GOOD's for the drift, the search keeps within worst_case_invocations."""
        return self.count(AGAIN) + max(0, self.count(ENDPOINT) - 2)

    @property
    def whole_drop(self) -> bool:
        return self.remainder in (SAME, REGRESSION)


def detrended_runs(trials: list[Trial], applied: frozenset[int], drift: Drift) -> list[float]:
    """Every run of the invocations of this set, as it would have read at the start."""
    return between.detrended([Timed(at, tuple(trial.values)) for at, trial in enumerate(trials)
                              if trial.applied == applied], drift)


def end_runs(trials: list[Trial], n: int, bad: bool, drift: Drift) -> list[float]:
    """GOOD's runs or BAD's. With nothing to search both are the same (empty) set of
    differences, told apart by their place: the two ends alternate."""
    if n:
        return detrended_runs(trials, frozenset(range(n)) if bad else frozenset(), drift)
    return between.detrended([Timed(at, tuple(trial.values)) for at, trial in enumerate(trials)
                              if trial.purpose == ENDPOINT and at % 2 == bad], drift)


def worst_case_invocations(n: int, k: int) -> int:
    """Benchmark invocations the search needs at most for k differences that are part of a
    cause among n, when no trial is measured again and the machine does not drift (module
    docstring: 2*k*D + k + 2)."""
    if n <= 0:
        return 2
    k = max(0, min(k, n))
    return 2 * k * math.ceil(math.log2(n)) + k + 2


def explain(n: int, measure: Measure, lower_is_better: bool = False,
            max_invocations: int | None = None) -> Explanation:
    """Measure both endpoints; if bad is a regression from good, search the causes."""
    return _Search(n, measure, lower_is_better, max_invocations).run()


class _OutOfBudget(Exception):
    """max_invocations reached: what is not decided yet stays unexplained."""


class _Undecided(Exception):
    """A cause that did not hold up as an interaction: its parts stay undecided."""

    def __init__(self, cause: frozenset[int]) -> None:
        super().__init__()
        self.cause = cause


class _NotConfirmed(Exception):
    """A cause's state, GOOD measured beside it, is not worse than its base after all."""


@dataclass
class _Search:
    n: int
    measure: Measure
    lower_is_better: bool
    max_invocations: int | None
    trials: list[Trial] = field(default_factory=list)
    causes: list[frozenset[int]] = field(default_factory=list)
    unexplained: set[int] = field(default_factory=set)
    base: frozenset[int] = frozenset()     # the state each verdict is judged against
    since_good: int = 0                    # invocations since GOOD's last
    restarts: int = 0                      # rounds started again: a cause not confirmed
    # the invocations of the round that found each cause, [start, end): a cause the recheck
    # drops was a wrong turn of drift or noise, and so were they
    rounds: dict[frozenset[int], tuple[int, int]] = field(default_factory=dict)
    remainder: BenchVerdict | None = None

    @property
    def everything(self) -> frozenset[int]:
        return frozenset(range(self.n))

    def run(self) -> Explanation:
        try:
            endpoints = self.measure_endpoints()
        except _OutOfBudget:
            return self.explanation(CANT_TELL, self.everything)
        if endpoints in (SAME, IMPROVEMENT):
            return self.explanation(NO_REGRESSION, frozenset())
        if endpoints == CANT_TELL:
            return self.explanation(CANT_TELL, self.everything)
        try:
            self.search_causes()
        except _OutOfBudget:
            self.unexplained |= self.everything - self.explained()
        self.recheck()
        # Bad is a regression, yet nothing in the differences alone reproduces it: something
        # outside them (or noise on the endpoints) made the drop, and saying so is the answer.
        return self.explanation(FOUND if self.causes else CANT_TELL,
                                frozenset(self.unexplained - self.explained()))

    def explanation(self, outcome: ExplainOutcome, unexplained: frozenset[int]) -> Explanation:
        return Explanation(outcome, list(self.causes), unexplained, list(self.trials),
                           self.n, self.lower_is_better, self.drift(), self.threshold(),
                           self.remainder)

    # ---- the rounds -----------------------------------------------------------------------

    def search_causes(self) -> None:
        """Round after round, each from GOOD + the causes found so far, while the rest of the
        drop is resolvable."""
        while True:
            rest = self.everything - self.explained() - self.unexplained
            if not rest:
                return
            if self.base | rest != self.everything and self.judge(self.base | rest) != BAD:
                return     # what is still bad lies among the undecided ones
            undecided_before = len(self.unexplained)
            started = len(self.trials)
            cause = None
            try:
                cause = self.find_one(sorted(rest), self.base)
                if cause is None and len(self.unexplained) == undecided_before:
                    raise _NotConfirmed   # bad as a whole, good in every part measured
                if cause is None:
                    self.misled(started)
                    continue    # some left undecided: the others are searched still
                cause = self.sized(self.confirm(cause))
            except _Undecided as undecided:
                self.unexplained |= undecided.cause
                self.misled(started)
                continue
            except _NotConfirmed:
                self.misled(started)
                self.restarts += 1
                if self.restarts > MAX_RESTARTS:
                    self.unexplained |= rest if cause is None else cause
                    return
                continue
            self.causes.append(cause)
            self.rounds[cause] = (started, len(self.trials))
            self.base = self.explained()
            self.remainder = self.versus_bad(self.base)
            if self.remainder != IMPROVEMENT:
                if self.remainder == CANT_TELL:
                    self.unexplained |= self.everything - self.base
                return

    def misled(self, start: int, end: int | None = None) -> None:
        """A round that ended with no cause, or whose cause the recheck dropped, was led
        there by the noise or the drift (a reading sent a halving step the wrong way, or made
        the whole look bad): its steps are searched again or left undecided, so they count
        as what the noise asked for, apart from the search's own."""
        self.trials[start:end] = [
            replace(trial, purpose=AGAIN) if trial.purpose in (SEARCH, SIZE) else trial
            for trial in self.trials[start:end]]

    def recheck(self) -> None:
        """Each lone cause's runs alone, with the drift the whole search shows taken out
        (its fitted rate too, where that is not beyond the noise), measured again while it
        can't tell: one that is not worse than GOOD either way was a drift the search had
        not yet seen when it named it (no cause), or is too near the noise to say
        (undecided). Then GOOD + the causes left is judged against BAD again."""
        dropped = False
        for cause in list(self.causes):
            if len(cause) > 1 or not self.runs(cause):
                continue
            versus = self.alone_now(cause)
            for _ in range(MAX_REMEASURES):
                if versus != CANT_TELL:
                    break
                try:
                    self.size_alone_once(cause, again=True)
                except _OutOfBudget:
                    break
                versus = self.alone_now(cause)
            if versus != REGRESSION:
                self.causes.remove(cause)
                self.misled(*self.rounds[cause])
                dropped = True
                if versus == CANT_TELL:
                    self.unexplained |= cause
        if self.causes and (dropped or self.remainder is None):
            try:
                if not self.runs(self.explained()):
                    self.judge_once(self.explained())
                self.remainder = self.versus_bad(self.explained())
            except _OutOfBudget:
                self.remainder = self.compare_bad(self.explained())

    def alone_now(self, cause: frozenset[int]) -> BenchVerdict:
        """Regression only where the cause's runs alone are worse than GOOD's both with the
        detected drift taken out and with the fitted rate."""
        verdicts = {benchstats.compare(detrended_runs(self.trials, frozenset(), drift),
                                       detrended_runs(self.trials, cause, drift),
                                       self.lower_is_better, self.threshold())["verdict"]
                    for drift in (self.correction(), self.drift())}
        if verdicts == {REGRESSION}:
            return REGRESSION
        return CANT_TELL if verdicts & {CANT_TELL, REGRESSION} else SAME

    def explained(self) -> frozenset[int]:
        return frozenset().union(*self.causes)

    def confirm(self, cause: frozenset[int]) -> frozenset[int]:
        """The state a cause was found in, with GOOD measured next to it: still worse than
        the base once the drift GOOD shows is taken out, or the round was misled. An
        interaction's parts are judged again too: one that is bad by itself is the cause."""
        if self.since_good:
            self.measure_good()     # after the state: its drift is then fitted, not guessed
        state = self.base | cause
        if self.verdict_of(state) != BAD and self.judge(state) != BAD:
            raise _NotConfirmed
        if len(cause) > 1:   # each part on the base: one bad by itself is the cause
            for index in sorted(cause):
                part = self.base | {index}
                if (self.verdict_of(part) if self.runs(part) else self.judge(part)) == BAD:
                    return frozenset({index})
            # parts "like" the base within a resolvable change, the whole worse by less
            # than one: a small cause among them, not an interaction
            versus = benchstats.compare(self.runs(self.base), self.runs(state),
                                        self.lower_is_better, RESOLVABLE * self.threshold())
            if versus["verdict"] != REGRESSION:
                raise _Undecided(cause)
        return cause

    def sized(self, cause: frozenset[int]) -> frozenset[int]:
        """The cause as it is reported: found on earlier causes, it is measured alone on
        GOOD; one that does not hurt there only hurts together with them."""
        if not self.base:
            return cause
        verdict = self.size_alone(cause)
        if verdict == BAD:
            return cause
        # it hurts only on the earlier causes (or alone it can't tell): a claim that lucky
        # runs on a base measured long before must not make; both are measured afresh
        fresh = [self.invoke_now(state) for state in (self.base, self.base | cause)]
        versus = benchstats.compare(fresh[0], fresh[1], self.lower_is_better, self.threshold())
        if versus["verdict"] != REGRESSION:
            raise _Undecided(cause)
        return cause if verdict == CANT_TELL else cause | self.base

    def size_alone(self, cause: frozenset[int]) -> TrialVerdict:
        """The cause on GOOD's state, against GOOD, measured again while it can't tell."""
        verdict = self.size_alone_once(cause)
        for _ in range(MAX_REMEASURES):
            if verdict != CANT_TELL:
                break
            verdict = self.size_alone_once(cause, again=True)
        return verdict

    def size_alone_once(self, cause: frozenset[int], again: bool = False) -> TrialVerdict:
        self.follow_drift()
        self.since_good += 1
        values = self.invoke(cause)
        verdict = self.verdict_of(cause, frozenset(), values)
        self.trials.append(Trial(cause, values, verdict, AGAIN if again else SIZE))
        return verdict

    def versus_bad(self, state: frozenset[int]) -> BenchVerdict:
        """This state against BAD (measured again while it can't tell): improvement means
        part of the drop is still to be explained. Whether the causes found are the whole
        drop is the answer's last word, as whether there is a drop is its first: it is
        measured again as often as the endpoints are."""
        verdict = self.compare_bad(state)
        for _ in range(ENDPOINT_REMEASURES):
            if verdict != CANT_TELL:
                break
            # BAD too: measured at the start, its runs may be the fewer side by now
            fewer = len(self.runs(self.everything)) < len(self.runs(state))
            self.judge_once(self.everything if fewer else state, again=True)
            verdict = self.compare_bad(state)
        return verdict

    def compare_bad(self, state: frozenset[int]) -> BenchVerdict:
        values = self.runs(state)
        if not values:
            return CANT_TELL
        # a rest smaller than a resolvable cause is not searched: it is the same as BAD
        return benchstats.compare(self.runs(self.everything), values, self.lower_is_better,
                                  RESOLVABLE * self.threshold())["verdict"]

    # ---- invocations, drift and verdicts --------------------------------------------------

    def invoke(self, applied: frozenset[int]) -> list[float]:
        if self.max_invocations is not None and len(self.trials) >= self.max_invocations:
            raise _OutOfBudget
        return list(self.measure(applied))

    def measure_endpoints(self) -> BenchVerdict:
        """Both endpoints, measured again (pooled) while their comparison can't tell."""
        verdict: BenchVerdict = CANT_TELL
        for _ in range(1 + ENDPOINT_REMEASURES):
            self.trials.append(Trial(frozenset(), self.invoke(frozenset()), GOOD, ENDPOINT))
            bad = self.invoke(self.everything)
            self.trials.append(Trial(self.everything, bad, CANT_TELL, ENDPOINT))
            drift = self.correction()    # GOOD measured more than once: its drift known
            verdict = bisectsearch.endpoints_verdict(
                end_runs(self.trials, self.n, False, drift),
                end_runs(self.trials, self.n, True, drift), self.lower_is_better)["verdict"]
            self.trials[-1] = Trial(self.everything, bad, endpoint_trial_verdict(verdict),
                                    ENDPOINT)
            if verdict != CANT_TELL:
                break
        self.since_good = 1
        return verdict

    def measure_good(self) -> None:
        self.trials.append(Trial(frozenset(), self.invoke(frozenset()), GOOD, DRIFT))
        self.since_good = 0

    def follow_drift(self) -> None:
        """GOOD again when its last measurement is as far back as the drift allows."""
        drift = self.drift()
        # twice as often until GOOD's first measurements say whether the machine moves:
        # a drift missed at the start misleads the halving steps that follow
        every = REMEASURE_EVERY if drift.measurements >= 3 else REMEASURE_EVERY // 2
        if drift.detected and drift.rate != 0:
            every = max(1, min(REMEASURE_EVERY, int(DRIFT_STEP / abs(drift.rate))))
        if self.since_good >= every:
            self.measure_good()

    def drift(self) -> Drift:
        if not self.n:
            return NO_DRIFT
        reference = [Timed(at, tuple(trial.values)) for at, trial in enumerate(self.trials)
                     if not trial.applied]
        return between.fit_drift(reference, self.lower_is_better)

    def correction(self) -> Drift:
        drift = self.drift()
        return drift if drift.detected else NO_DRIFT

    def threshold(self) -> float:
        """From the noise of the two ends' runs: a state under search may be noisier (runs
        that never settle) and must not widen what counts as like its base."""
        ends: tuple[frozenset[int], ...] = (frozenset(), self.everything)
        return between.threshold_for(between.noise_of(
            [Timed(at, tuple(trial.values)) for at, trial in enumerate(self.trials)
             if trial.applied in ends]))

    def runs(self, applied: frozenset[int]) -> list[float]:
        return detrended_runs(self.trials, applied, self.correction())

    def verdict_of(self, applied: frozenset[int], base: frozenset[int] | None = None,
                   pending: list[float] | None = None) -> TrialVerdict:
        """Bad when the set's runs are resolvably worse than the base's (between the base
        and BAD, or like BAD), good when like the base; `pending`: runs not yet recorded."""
        base_runs = self.runs(self.base if base is None else base)
        values = self.runs(applied)
        if pending is not None:
            drift = self.correction()
            values += between.detrended([Timed(len(self.trials), tuple(pending))], drift)
        placed = between.place(base_runs, self.runs(self.everything), values,
                               self.lower_is_better, self.threshold())
        # between or like BAD, or worse than the base while BAD's side is not settled: a
        # state resolvably worse than its base holds a cause however near BAD it is
        if placed.place in (between.BETWEEN, between.LIKE_BAD) or \
                placed.vs_good["verdict"] == REGRESSION:
            return BAD
        # like the base, or better: no slowdown as large as a resolvable cause fits its
        # interval (one that may be far better but not worse holds no cause of the drop)
        like = benchstats.compare(base_runs, values, self.lower_is_better,
                                  RESOLVABLE * self.threshold())
        return GOOD if between.not_worse(like) else CANT_TELL

    def invoke_now(self, applied: frozenset[int]) -> list[float]:
        """One invocation of this set, its runs as they read at the search's start."""
        self.judge_once(applied)
        return between.detrended([Timed(len(self.trials) - 1, tuple(self.trials[-1].values))],
                                 self.correction())

    def judge_once(self, applied: frozenset[int], again: bool = False) -> TrialVerdict:
        self.follow_drift()
        self.since_good += 1
        values = self.invoke(applied)
        verdict = self.verdict_of(applied, pending=values)
        purpose: Purpose = DRIFT if not applied else AGAIN if again else SEARCH
        self.trials.append(Trial(applied, values, verdict, purpose))
        if not applied:
            self.since_good = 0
        return verdict

    def judge(self, applied: frozenset[int]) -> TrialVerdict:
        """Good, bad or can't tell for this set against the base, its runs pooled with any
        earlier ones and measured again while undecided."""
        verdict = self.judge_once(applied)
        if verdict == BAD and self.near_base_once(applied):
            verdict = self.judge_once(applied, again=True)
        for _ in range(MAX_REMEASURES):
            if verdict != CANT_TELL:
                break
            # the side with fewer runs is the one that narrows the interval: a base of
            # earlier causes starts with one invocation where the set may have three
            if self.base and len(self.runs(self.base)) < len(self.runs(applied)):
                self.judge_once(self.base, again=True)
                verdict = self.verdict_of(applied)
            else:
                verdict = self.judge_once(applied, again=True)
        return verdict

    def near_base_once(self, applied: frozenset[int]) -> bool:
        """Measured once, and placed within NEAR_BASE of the drop from its base."""
        if sum(trial.applied == applied for trial in self.trials) != 1:
            return False
        share = between.share_of_drop(self.runs(self.base), self.runs(self.everything),
                                      self.runs(applied))
        return share is not None and share < NEAR_BASE

    def find_one(self, candidates: list[int], base: frozenset[int]) -> frozenset[int] | None:
        """A minimal part of `candidates` that is bad on top of `base`, given that base is
        good and base with all candidates is bad; None where the noise forbids going on (the
        undecided ones marked unexplained), or where, measured again, base with all
        candidates is good after all (at the top: nothing marked)."""
        if len(candidates) == 1:
            return frozenset(candidates)
        middle = (len(candidates) + 1) // 2
        first, second = candidates[:middle], candidates[middle:]
        first_verdict = self.judge(base | frozenset(first))
        if first_verdict == BAD:
            return self.find_one(first, base)
        second_verdict = self.judge(base | frozenset(second))
        if second_verdict == BAD:
            if first_verdict == CANT_TELL:    # part of a cause there, or only noise
                self.unexplained |= set(first)
            return self.find_one(second, base)
        if first_verdict == CANT_TELL or second_verdict == CANT_TELL:
            self.unexplained |= set(candidates)
            return None
        # Neither half is bad alone. Before an interaction search (about 2*log2 runs per
        # part), the whole is measured again (BAD too: a machine that drifted between the
        # two ends made them differ): one lucky "bad" must not start a hunt for an
        # interaction that is not there.
        whole = base | frozenset(candidates)
        again = self.judge(whole)
        if again != BAD:
            if again == CANT_TELL or base != self.base:
                self.unexplained |= set(candidates)
            return None
        # each half's runs judged again with what GOOD has shown of the drift since (no new
        # invocation): on a machine speeding up, a half with a cause read as good before the
        # drift was seen, and an interaction search would follow a lone cause
        for half in (first, second):
            if self.verdict_of(base | frozenset(half)) == BAD:
                return self.find_one(half, base)
        from_first = self.find_one(first, base | frozenset(second))
        if from_first is None:
            return None
        from_second = self.find_one(second, base | from_first)
        if from_second is None:
            return None
        return from_first | from_second


def endpoint_trial_verdict(comparison: BenchVerdict) -> TrialVerdict:
    """The bad endpoint's trial verdict from its comparison with good."""
    if comparison == REGRESSION:
        return BAD
    if comparison == CANT_TELL:
        return CANT_TELL
    return GOOD
