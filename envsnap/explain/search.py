"""Which of n differences turn a good state into a bad one, by experiment, all pure.

The differences are numbered 0..n-1. A trial applies a set of them on top of the good state
(the rest stay as in good) and runs the benchmark there; its runs are judged against both
endpoints with bisect's noise-aware verdicts (good, bad, or can't tell), bad needing also a
real share of the endpoints' drop (MIN_SHARE). The search is adaptive group testing in the
style of Zeller's isolating delta debugging:

- find one cause among candidates that are bad together: try the first half alone, then the
  second; recurse into a half that is bad alone. If neither half is bad alone but both
  together are, the cause is an interaction (once the whole is measured again and still
  bad): find the part of the first half that is needed with all of the second applied,
  then the part of the second needed with that part.
- after each cause, apply everything but the causes found: still bad means more remain.

It assumes what makes a state bad keeps it bad when more differences are added (monotony);
where that fails, a cause's check alone catches it and the set is reported unexplained
instead of as a cause.

Budget, for k differences that are part of a cause (a lone cause counts 1, an interacting
pair 2) among n, with D = ceil(log2 n): 2 endpoint invocations, at most 2 per halving level
(2*D for a lone cause; for a pair 2*D per part, less the level they share, plus the whole
measured again) and one to learn whether more remain after each cause: 2*k*D + k + 2
(worst_case_invocations). Every cause's own set alone is among the trials (its effect, for
the report) at no extra cost: a lone cause's last halving step, a pair's too. Noise adds:
a trial that can't tell is measured again up to MAX_REMEASURES more times (the endpoints up
to ENDPOINT_REMEASURES more), its runs pooled; `max_invocations` caps it all, and what it
leaves undecided is unexplained. bench/bench_explain.py measures runs used and answers.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from envsnap.bench import stats as benchstats
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
# A set is bad when it shows at least this share of the endpoints' change (on the log of the
# medians) besides being a regression from good: a lucky 3-run good endpoint can make a
# harmless set significantly slower. Two fifths keeps two causes that each bring half the
# drop; at 10% noise it halves the wrong answers of 0.25 (bench/bench_explain.py --sigma 0.1).
MIN_SHARE: Final = 0.4


@dataclass(frozen=True)
class Trial:
    """One benchmark invocation. A set measured again appears again, with the runs of all
    its invocations so far in `values` and the verdict on them."""

    applied: frozenset[int]
    values: list[float]
    verdict: TrialVerdict


@dataclass(frozen=True)
class Explanation:
    outcome: ExplainOutcome
    # Minimal sets: a singleton is one difference that alone turns good into bad; a larger
    # set an interaction (only together). "found" may still leave some unexplained.
    causes: list[frozenset[int]]
    unexplained: frozenset[int]     # differences the noise (or the budget) left undecided
    trials: list[Trial]             # in order; [0] the good endpoint, [1] the bad one
    good: list[float]               # the endpoints' runs, pooled over their invocations
    bad: list[float]

    def alone(self, cause: frozenset[int]) -> Trial | None:
        """The last trial that applied exactly `cause`: its measured effect on its own.
        Every cause has one (its last halving step, or the check of it alone)."""
        return next((t for t in reversed(self.trials) if t.applied == cause), None)


def worst_case_invocations(n: int, k: int) -> int:
    """Benchmark invocations the search needs at most for k differences that are part of a
    cause among n, when no trial is measured again (module docstring: 2*k*D + k + 2)."""
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


@dataclass
class _Search:
    n: int
    measure: Measure
    lower_is_better: bool
    max_invocations: int | None
    trials: list[Trial] = field(default_factory=list)
    good: list[float] = field(default_factory=list)
    bad: list[float] = field(default_factory=list)
    runs: dict[frozenset[int], list[float]] = field(default_factory=dict)   # pooled, per set
    causes: list[frozenset[int]] = field(default_factory=list)
    unexplained: set[int] = field(default_factory=set)

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
        # Bad is a regression, yet nothing in the differences alone reproduces it: something
        # outside them (or noise on the endpoints) made the drop, and saying so is the answer.
        return self.explanation(FOUND if self.causes else CANT_TELL, frozenset(self.unexplained))

    def search_causes(self) -> None:
        """One cause at a time, while what is left (everything at first) is still bad."""
        rest, known_bad = self.everything, True
        while rest:
            if not known_bad:
                verdict = self.judge(rest)
                if verdict == GOOD:
                    return
                if verdict == CANT_TELL:
                    self.unexplained |= rest
                    return
            undecided_before = len(self.unexplained)
            cause = self.find_one(sorted(rest), frozenset())
            if cause is None and len(self.unexplained) == undecided_before:
                return     # measured again, what was left is good after all
            if cause is not None and self.bad_alone(cause):
                self.causes.append(cause)
            elif cause is not None:
                self.unexplained |= cause
            rest = self.everything - self.explained() - self.unexplained
            known_bad = False

    def explained(self) -> frozenset[int]:
        return frozenset().union(*self.causes)

    def explanation(self, outcome: ExplainOutcome, unexplained: frozenset[int]) -> Explanation:
        return Explanation(outcome, list(self.causes), unexplained, list(self.trials),
                           list(self.good), list(self.bad))

    def invoke(self, applied: frozenset[int]) -> list[float]:
        if self.max_invocations is not None and len(self.trials) >= self.max_invocations:
            raise _OutOfBudget
        return list(self.measure(applied))

    def measure_endpoints(self) -> BenchVerdict:
        """Both endpoints, measured again (pooled) while their comparison can't tell."""
        verdict: BenchVerdict = CANT_TELL
        for _ in range(1 + ENDPOINT_REMEASURES):
            self.good = self.good + self.invoke(frozenset())
            self.trials.append(Trial(frozenset(), self.good, GOOD))
            self.bad = self.bad + self.invoke(self.everything)
            comparison = bisectsearch.endpoints_verdict(self.good, self.bad,
                                                        self.lower_is_better)
            verdict = comparison["verdict"]
            self.trials.append(Trial(self.everything, self.bad,
                                     endpoint_trial_verdict(verdict)))
            if verdict != CANT_TELL:
                break
        return verdict

    def judge(self, applied: frozenset[int]) -> TrialVerdict:
        """Good, bad or can't tell for this set, its runs pooled with any earlier ones and
        measured again while undecided."""
        values = self.runs.get(applied, [])
        verdict: TrialVerdict = CANT_TELL
        for _ in range(1 + MAX_REMEASURES):
            values = values + self.invoke(applied)
            self.runs[applied] = values
            verdict = self.verdict_of(values)
            self.trials.append(Trial(applied, values, verdict))
            if verdict != CANT_TELL:
                break
        return verdict

    def verdict_of(self, values: list[float]) -> TrialVerdict:
        """bisect's classification, with one more condition for bad: the runs must show a
        real share of the drop (MIN_SHARE). A set 6% slower than a lucky good endpoint is
        significantly worse, yet it is not what turned 94 into 61."""
        classified, _why = bisectsearch.classify(self.good, self.bad, values,
                                                 self.lower_is_better)
        if classified == GOOD:
            return GOOD
        if classified != BAD:
            return CANT_TELL
        if share_of_drop(self.good, self.bad, values) >= MIN_SHARE:
            return BAD
        vs_bad = benchstats.compare(self.bad, values, self.lower_is_better)["verdict"]
        return GOOD if vs_bad == IMPROVEMENT else CANT_TELL

    def bad_alone(self, cause: frozenset[int]) -> bool:
        """Whether `cause` by itself is bad: a trial of exactly it says so (a lone cause's
        last halving step, mostly an interaction's too), or one more invocation."""
        earlier = next((t for t in reversed(self.trials) if t.applied == cause), None)
        if earlier is not None:
            return earlier.verdict == BAD
        return self.judge(cause) == BAD

    def find_one(self, candidates: list[int], base: frozenset[int]) -> frozenset[int] | None:
        """A minimal part of `candidates` that is bad on top of `base`, given that base is
        good and base with all candidates is bad; None where the noise forbids going on (the
        undecided ones marked unexplained), or where, measured again, base with all
        candidates is good after all (at the top, base empty: nothing marked)."""
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
        # part), the whole is measured again: one lucky "bad" must not start a hunt for an
        # interaction that is not there. A pair's own set is then tried by its last halving
        # step, so this run takes the place of its closing check in the budget.
        whole = base | frozenset(candidates)
        if whole != self.everything:
            again = self.judge(whole)
            if again != BAD:
                if again == CANT_TELL or base:
                    self.unexplained |= set(candidates)
                return None
        from_first = self.find_one(first, base | frozenset(second))
        if from_first is None:
            return None
        from_second = self.find_one(second, base | from_first)
        if from_second is None:
            return None
        return from_first | from_second


def share_of_drop(good: list[float], bad: list[float], values: list[float]) -> float:
    """How much of the endpoints' change these runs show, on the log of the medians (1: all
    of it); 1 where a median is not positive and no ratio exists."""
    medians = [statistics.median(side) for side in (good, bad, values)]
    if min(medians) <= 0 or medians[0] == medians[1]:
        return 1.0
    good_median, bad_median, median = medians
    return math.log(median / good_median) / math.log(bad_median / good_median)


def endpoint_trial_verdict(comparison: BenchVerdict) -> TrialVerdict:
    """The bad endpoint's trial verdict from its comparison with good."""
    if comparison == REGRESSION:
        return BAD
    if comparison == CANT_TELL:
        return CANT_TELL
    return GOOD
