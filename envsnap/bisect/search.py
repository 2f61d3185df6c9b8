"""The search inside a bisect, all pure: the line of commits, the next one to try, verdicts.

The line runs from the good commit (excluded) to the bad one (included), oldest first, and
each commit on it contains the one before it: once a regression is in, it stays in, so
halving the line is sound. On a linear history (docs/STORY.md's fast-forward pull) that is every
commit. Across merges it is the first-parent line (`git bisect --first-parent`): a regression
brought in by a merged branch shows as its merge commit, whose own branch can then be
bisected; where the good commit itself sits on a merged branch, the line takes the parent
that leads to it. Commits off the line are never tested, which keeps runs near log2(line).
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Callable, Union

from envsnap.bench import stats as benchstats
from envsnap.bench.between import (
    BETWEEN,
    LIKE_BAD,
    LIKE_GOOD,
    NO_DRIFT,
    UNPLACED,
    Drift,
    Placement,
    Timed,
    detrended,
    fit_drift_pooled,
    noise_of,
    place,
    threshold_for,
)
from envsnap.verdicts import (
    BAD,
    CANT_TELL,
    ENDS_UNDECIDED,
    FOUND,
    GOOD,
    IMPROVEMENT,
    NO_REGRESSION,
    ONLY_SKIPPED,
    REGRESSION,
    SAME,
    SKIP,
    BisectOutcome,
    Classification,
)

# A commit's classification: like the good endpoint, like the bad one, neither yet, or not
# measurable there (it does not build, the benchmark fails: git bisect's exit 125).
LOG_FORMAT = "%H %P%x09%s"      # what parse_log reads: sha, parents, a tab, the subject


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str = ""
    parents: tuple[str, ...] = ()

    @property
    def short(self) -> str:
        return self.sha[:12]


def parse_log(text: str) -> list[Commit]:
    """`git log --format=LOG_FORMAT` lines -> commits, in the order given."""
    commits = []
    for line in text.splitlines():
        ids, _, subject = line.partition("\t")
        shas = ids.split()
        if shas:
            commits.append(Commit(shas[0], subject, tuple(shas[1:])))
    return commits


def line_of_commits(ancestry: list[Commit], good: str, bad: str) -> list[Commit]:
    """From `bad` back to `good` through the ancestry-path set (descendants of good that are
    ancestors of bad), preferring first parents; returned oldest first, good left out."""
    by_sha = {commit.sha: commit for commit in ancestry}
    line, sha = [], bad
    while sha != good:
        commit = by_sha.get(sha)
        if commit is None:
            raise ValueError(f"{sha[:12]} is not between {good[:12]} and {bad[:12]}")
        line.append(commit)
        # Every commit in the set has a parent that is good or in the set: that is what
        # --ancestry-path means.
        sha = next(p for p in commit.parents if p == good or p in by_sha)
    return line[::-1]


@dataclass
class Search:
    """Indexes into the line: `good` is the newest known good (-1: the good endpoint),
    `bad` the oldest known bad (the bad endpoint at first)."""

    size: int
    good: int = -1
    bad: int = -1
    skipped: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        if self.bad < 0:
            self.bad = self.size - 1

    def untested(self) -> list[int]:
        return [i for i in range(self.good + 1, self.bad) if i not in self.skipped]

    def next(self) -> int | None:
        """The untested commit nearest the middle (a skipped one's neighbour, like git
        bisect's), or None when the answer is known or only skipped commits are left."""
        left = self.untested()
        if not left:
            return None
        middle = (self.good + self.bad) / 2
        return min(left, key=lambda index: (abs(index - middle), index))

    def record(self, index: int, verdict: Classification) -> None:
        if verdict == GOOD:
            self.good = index
        elif verdict == BAD:
            self.bad = index
        elif verdict == SKIP:
            self.skipped.add(index)
        else:
            raise ValueError(f"no search move for a {verdict!r} verdict")

    def suspects(self) -> list[int]:
        """Where the first bad commit can be: the skipped commits left in range, and `bad`."""
        return [i for i in range(self.good + 1, self.bad) if i in self.skipped] + [self.bad]

    def steps_left(self) -> int:
        """Benchmark steps still needed when nothing more is skipped: ceil(log2(n + 1))."""
        return math.ceil(math.log2(len(self.untested()) + 1))


# ---- verdicts -----------------------------------------------------------------------------

def endpoints_verdict(good: list[float], bad: list[float],
                      lower_is_better: bool) -> benchstats.Comparison:
    """benchstats.compare of the good endpoint against the bad one."""
    return benchstats.compare(good, bad, lower_is_better)


def classify(good: list[float], bad: list[float], samples: list[float],
             lower_is_better: bool) -> tuple[Classification, str]:
    """A trial's runs against both endpoints' runs, drift not considered (explain's trials):
    like good, like bad, or can't tell.

    Like bad: worse than good (a regression by the same test `envsnap bench` uses), even
    when also better than bad: a commit that is part way down is already past the first bad
    one. Like good: better than bad and not worse than good. Neither: can't tell yet."""
    vs_good = benchstats.compare(good, samples, lower_is_better)
    vs_bad = benchstats.compare(bad, samples, lower_is_better)
    if vs_good["verdict"] == REGRESSION:
        return BAD, f"worse than good ({change(vs_good)})"
    if vs_bad["verdict"] == IMPROVEMENT:
        return GOOD, f"better than bad ({change(vs_bad)})"
    return CANT_TELL, f"vs good, {vs_good['why']}; vs bad, {vs_bad['why']}"


def verdict_of(placement: Placement) -> Classification:
    """A commit's move in the search from where it fell: like good is good; like bad and
    between are bad (part of the drop is in by then: the first slow commit is at or
    before it); can't tell is can't tell."""
    if placement.place == LIKE_GOOD:
        return GOOD
    if placement.place in (LIKE_BAD, BETWEEN) or past_good(placement):
        return BAD
    return CANT_TELL


def past_good(placement: Placement) -> bool:
    """Worse than good beyond the noise, and not yet told apart from bad: like bad or
    between, either way past the first slow commit."""
    return placement.place == UNPLACED and placement.vs_good["verdict"] == REGRESSION \
        and placement.vs_bad["verdict"] != IMPROVEMENT


def placement_why(placement: Placement) -> str:
    """"like good (3% of the way to bad)"; can't tell: what each side's test said."""
    if past_good(placement):
        return (f"worse than good ({change(placement.vs_good)}); vs bad, "
                f"{placement.vs_bad['why']}")
    if placement.place == UNPLACED or placement.share is None:
        return (f"vs good, {placement.vs_good['why']}; vs bad, {placement.vs_bad['why']}")
    way = f"{round(placement.share * 100)}% of the way to bad"   # never "-0%"
    if placement.place == BETWEEN:
        return (f"between good and bad ({way}: worse than good, {change(placement.vs_good)}; "
                f"better than bad, {change(placement.vs_bad)})")
    return f"like {placement.place} ({way})"


def change(verdict: benchstats.Comparison) -> str:
    """The change a regression or improvement verdict found (its ratio and p are set)."""
    ratio, p = verdict["ratio"], verdict["p_value"]
    if ratio is None or p is None:
        return verdict["why"]
    return f"{ratio - 1:+.1%}, p={p:.2g}"


# ---- the hunt: halving judged against both ends, drift taken out, culprits one by one --------
#
# Positions: 0 is the good commit, `size` (the line's length) the bad one, i the line's i-th
# commit. Every invocation of the benchmark gets the next place in time (`Timed.at`); GOOD
# and BAD are measured again between the steps, and the drift fitted on every state measured
# more than once (between.fit_drift_pooled) is taken out of every run before a state is
# placed. A step that lands between the ends, or that the noise cannot place, gets more runs
# (an end measured again before each) up to max_repeat. When the first slow commit is found
# part of the way down, the search goes on from it to BAD for the next one.

# What the benchmark gave at a position: its runs, or why it could not run there (a skip).
Measured = Union[Sequence[float], str]
# measure(position, count, role): role names the invocation ("good", "step 3", "bad again").
Measure = Callable[[int, int, str], Measured]

REMEASURE_EVERY = 2   # an end is measured again after this many step invocations
MAX_ROUNDS = 4        # slow commits looked for one after another, at most


@dataclass(frozen=True)
class Trial:
    """A step's decision: its runs as measured and brought back to the search's start."""

    number: int                       # 1, 2, ... in the order the steps ran
    position: int
    runs: tuple[float, ...]
    corrected: tuple[float, ...]
    verdict: Classification
    why: str
    placement: Placement | None       # None: skipped
    invocations: int
    left: int = 0                     # commits still untested in range after it
    steps_left: int = 0


@dataclass(frozen=True)
class Remeasure:
    """An end measured again during the search, and the drift fitted with it."""

    position: int
    role: str
    runs: tuple[float, ...]
    drift: Drift


@dataclass(frozen=True)
class Culprit:
    """A slow commit, its median against the good state it was found from (GOOD, or the
    slow commit before it), both with the drift taken out."""

    position: int
    before: int
    before_median: float
    median: float
    placement: Placement              # against that good state and BAD

    @property
    def change(self) -> float:
        """The fraction the metric moved at this commit (-0.25: a quarter lower)."""
        return self.median / self.before_median - 1 if self.before_median else 0.0


HuntEvent = Union[Trial, Remeasure]


@dataclass
class HuntResult:
    outcome: BisectOutcome
    ends: benchstats.Comparison       # GOOD against BAD, as first measured
    culprits: list[Culprit] = field(default_factory=list)
    suspects: list[int] = field(default_factory=list)    # positions, when not found
    undecided: Trial | None = None
    drift: Drift = NO_DRIFT
    remeasures: int = 0
    end_invocations: int = 0
    step_invocations: int = 0
    good_median: float = 0.0          # both ends, drift taken out
    bad_median: float = 0.0

    @property
    def whole_drop(self) -> bool:
        """The last culprit found is like BAD: together they make the whole drop."""
        return bool(self.culprits) and self.culprits[-1].placement.place != BETWEEN


class Hunt:
    """`Hunt(size, measure, ...).run()`: the search over positions 0..size, all decisions
    pure; `measure` runs the benchmark (or, in tests, draws from a model)."""

    def __init__(self, size: int, measure: Measure, *, repeat: int, max_repeat: int,
                 lower_is_better: bool = False, good_runs: Sequence[float] | None = None,
                 on_event: Callable[[HuntEvent], None] | None = None,
                 remeasure_every: int = REMEASURE_EVERY, max_rounds: int = MAX_ROUNDS) -> None:
        self.size, self.measure = size, measure
        self.repeat, self.max_repeat = repeat, max_repeat
        self.lower_is_better = lower_is_better
        self.fixed_good = tuple(good_runs) if good_runs else None   # GOOD not measured here
        self.on_event = on_event or (lambda _: None)
        self.every, self.max_rounds = remeasure_every, max_rounds
        self.series: dict[int, list[Timed]] = {}
        self.at = 0
        self.steps = 0
        self.since = 0       # step invocations since an end was last measured
        self.turn = 0        # which end is measured again next
        self.result = HuntResult(CANT_TELL, endpoints_verdict([], [], lower_is_better))

    # ---- measuring ----

    def take(self, position: int, count: int, role: str) -> str | None:
        """Runs at a position, in time order; why not, when it could not run there."""
        got = self.measure(position, count, role)
        if isinstance(got, str):
            return got
        self.series.setdefault(position, []).append(Timed(self.at, tuple(got)))
        self.at += 1
        return None

    def runs_at(self, position: int) -> list[float]:
        if position == 0 and self.fixed_good is not None:
            return list(self.fixed_good)
        return [value for timed in self.series.get(position, []) for value in timed.values]

    def drift(self) -> Drift:
        """Fitted over every state measured more than once, GOOD first (its `seen`)."""
        order = sorted(self.series, key=lambda position: (position != 0, position != self.size))
        return fit_drift_pooled([self.series[position] for position in order],
                                self.lower_is_better)

    def corrected(self, position: int, drift: Drift | None = None) -> list[float]:
        if position == 0 and self.fixed_good is not None:
            return list(self.fixed_good)
        return detrended(self.series.get(position, []), drift or self.drift())

    def place_at(self, position: int, good: int, widened: bool = True) -> Placement:
        """Against the round's good state and BAD, the drift taken out; each threshold
        widened (unless not `widened`) by how far the drift's error carries between the two
        states' times."""
        drift = self.drift()
        allowance = tuple(2 * drift.error * abs(self.when(position) - self.when(end))
                          if widened else 0.0 for end in (good, self.size))
        return place(self.corrected(good, drift), self.corrected(self.size, drift),
                     self.corrected(position, drift), self.lower_is_better,
                     threshold=self.threshold(), allowance=(allowance[0], allowance[1]))

    def threshold(self) -> float:
        """The threshold for "like" and "beyond": the default, wider on a noisy machine
        (between.threshold_for, the noise pooled within every invocation so far): at the
        default a state within the noise of a noisy machine is never like either end, and
        a search from a slow commit, with fewer runs at its good state, ends undecided."""
        return threshold_for(noise_of([timed for series in self.series.values()
                                       for timed in series]))

    def when(self, position: int) -> float:
        """The mean time of a state's runs (the fixed GOOD's: the search's start)."""
        timed = self.series.get(position, [])
        return statistics.fmean(t.at for t in timed) if timed else 0.0

    def remeasure(self, good: int) -> None:
        """The round's good state or BAD, in turn, measured again."""
        ends = [end for end in (good, self.size) if not (end == 0 and self.fixed_good)]
        position = ends[self.turn % len(ends)]
        self.turn += 1
        role = "good" if position == 0 else "bad" if position == self.size else "new good"
        if self.take(position, self.repeat, f"{role} again") is None:
            self.result.remeasures += 1
            self.on_event(Remeasure(position, role, tuple(self.series[position][-1].values),
                                    self.drift()))
        self.since = 0

    # ---- the ends ----

    def endpoints(self) -> benchstats.Comparison:
        """Runs at both ends; more on whichever has fewer while the verdict is can't tell."""
        for position, role in ((0, "good"), (self.size, "bad")):
            if not (position == 0 and self.fixed_good):
                self.take_end(position, self.repeat, role)
        verdict = endpoints_verdict(self.corrected(0), self.corrected(self.size),
                                    self.lower_is_better)
        while verdict["verdict"] == CANT_TELL:
            room = [end for end in (self.size, 0) if len(self.runs_at(end)) < self.max_repeat
                    and not (end == 0 and self.fixed_good)]
            if not room:
                break
            end = min(room, key=lambda position: len(self.runs_at(position)))
            self.take_end(end, min(self.repeat, self.max_repeat - len(self.runs_at(end))),
                          "good" if end == 0 else "bad")
            verdict = endpoints_verdict(self.corrected(0), self.corrected(self.size),
                                        self.lower_is_better)
        return verdict

    def take_end(self, position: int, count: int, role: str) -> None:
        why = self.take(position, count, role)
        if why is not None:     # the caller's measure raises for an end; a model never fails
            raise ValueError(f"the {role} end could not be measured: {why}")
        self.result.end_invocations += 1

    # ---- a step ----

    def trial(self, position: int, good: int, again: bool = False) -> Trial:
        """Runs at a commit until it is placed, or max_repeat runs could not place it.
        Runs it already has (an earlier round's) count; between is settled only after a
        second invocation with an end measured in between, when the drift is known.
        `again`: one more invocation first, an end measured before it, whatever it has."""
        self.steps += 1
        role = f"step {self.steps}"
        invocations = len(self.series.get(position, []))
        if again and len(self.runs_at(position)) < self.max_repeat:
            self.remeasure(good)
            if self.take(position, min(self.repeat, self.max_repeat -
                                       len(self.runs_at(position))), role) is None:
                self.result.step_invocations += 1
                self.since += 1
                invocations += 1
        if not invocations:
            if self.since >= self.every:
                self.remeasure(good)
            why = self.take(position, self.repeat, role)
            if why is not None:
                return Trial(self.steps, position, (), (), SKIP, why, None, 0)
            self.result.step_invocations += 1
            self.since += 1
            invocations = 1
        placement = self.place_at(position, good)
        while not (placement.place in (LIKE_GOOD, LIKE_BAD) or (
                invocations >= 2 and (placement.place == BETWEEN or past_good(placement)))):
            have = len(self.runs_at(position))
            if have >= self.max_repeat:
                break
            self.remeasure(good)
            why = self.take(position, min(self.repeat, self.max_repeat - have), role)
            if why is not None:
                break
            self.result.step_invocations += 1
            self.since += 1
            invocations += 1
            placement = self.place_at(position, good)
        return Trial(self.steps, position, tuple(self.runs_at(position)),
                     tuple(self.corrected(position)), verdict_of(placement),
                     placement_why(placement), placement, invocations)

    # ---- the search ----

    def run(self) -> HuntResult:
        """Both ends, then the search when they differ."""
        if self.start()["verdict"] != REGRESSION:
            return self.finish()
        return self.search()

    def start(self) -> benchstats.Comparison:
        """Both ends measured; the search stops here (result.outcome) unless they differ."""
        result = self.result
        result.ends = self.endpoints()
        if result.ends["verdict"] != REGRESSION:
            result.outcome = ENDS_UNDECIDED if result.ends["verdict"] == CANT_TELL \
                else NO_REGRESSION
        return result.ends

    def search(self) -> HuntResult:
        """Halving from GOOD, then from each slow commit found part of the way down."""
        result = self.result
        good = 0
        while len(result.culprits) < self.max_rounds:
            state = Search(self.size - good)       # index i is position good + 1 + i
            settled = self.halve(state, good)
            if settled is None:
                return self.finish()
            position, moved = settled
            if moved:         # the slow commit, told apart anew, was like good after all
                good = position
                continue
            drift = self.drift()
            placement = self.place_at(position, good)
            result.culprits.append(Culprit(
                position, good, statistics.median(self.corrected(good, drift)),
                statistics.median(self.corrected(position, drift)), placement))
            if position == self.size or placement.place != BETWEEN:
                break
            good = position
        result.outcome = FOUND
        return self.finish()

    def halve(self, state: Search, good: int) -> tuple[int, bool] | None:
        """One round's halving from `good` to BAD: the slow commit's position and whether
        it turned out like good (the search goes on from it); None when the search stops
        here (result.outcome says why). The commit before the one found is judged again
        under the drift known by then: like good, and apart from it (`boundary`), or the
        halving goes on to its left."""
        result = self.result
        goods: list[int] = []       # indexes judged good this round
        while True:
            index = state.next()
            while index is not None:
                trial = self.trial(good + 1 + index, good)
                if trial.verdict == CANT_TELL:
                    self.on_event(replace(trial, left=len(state.untested()),
                                          steps_left=state.steps_left()))
                    result.outcome, result.undecided = CANT_TELL, trial
                    result.suspects = list(range(good + 2 + state.good, good + 2 + state.bad))
                    return None
                state.record(index, trial.verdict)
                if trial.verdict == GOOD:
                    goods.append(index)
                self.on_event(replace(trial, left=len(state.untested()),
                                      steps_left=state.steps_left()))
                index = state.next()
            if state.suspects()[:-1]:
                result.outcome = ONLY_SKIPPED
                result.suspects = [good + 1 + index for index in state.suspects()]
                return None
            position = good + 1 + state.bad
            if position != self.size and verdict_of(self.place_at(position, good)) != BAD:
                # judged bad under a drift not yet known, and the drift seen since leaves it
                # unsure: more runs there; like good after all, the search goes on from it
                again = self.trial(position, good)
                self.on_event(again)
                if again.verdict == GOOD:
                    return position, True
                if again.verdict != BAD:
                    result.outcome, result.undecided = CANT_TELL, again
                    result.suspects = list(range(good + 1, position + 1))
                    return None
            before = position - 1
            if before == good or self.boundary(before, position, good):
                return position, False
            # the commit before it is past the slow commit too: the halving goes on left
            state.bad = before - good - 1
            goods = [index for index in goods if index < state.bad]
            state.good = max(goods, default=-1)

    def boundary(self, before: int, position: int, good: int) -> bool:
        """Whether the slow commit is at `position` and not before it: the commit before it
        (judged good, maybe early, under a drift not yet known) like the round's good state
        under the drift known now without the drift's allowance, given one more invocation
        where it is not, and not alike `position` itself. Without it, two slow commits a
        few commits apart, or a step judged like good within an allowance the drift seen
        since has narrowed, end the halving a commit or more too late; comparing the
        neighbours costs no runs."""
        if verdict_of(self.place_at(before, good, widened=False)) != GOOD:
            # like good only within the drift's allowance, or not like good now: one more
            # invocation there, the drift measured closer
            again = self.trial(before, good, again=True)
            self.on_event(again)
            if again.verdict == BAD:
                return False
            if again.verdict != GOOD:
                return True      # unsure either way: the halving's answer stands
        drift = self.drift()
        allowance = 2 * drift.error * abs(self.when(before) - self.when(position))
        alike = benchstats.compare(self.corrected(before, drift), self.corrected(position, drift),
                                   self.lower_is_better,
                                   self.threshold() + allowance)
        if alike["verdict"] not in (SAME, IMPROVEMENT):
            return True
        self.steps += 1
        self.on_event(Trial(self.steps, before, tuple(self.runs_at(before)),
                            tuple(self.corrected(before, drift)), BAD,
                            f"like the commit after it ({alike['why']}): the slow commit is "
                            "at or before it", self.place_at(before, good), 0))
        return False

    def finish(self) -> HuntResult:
        result, drift = self.result, self.drift()
        result.drift = drift
        good, bad = self.corrected(0, drift), self.corrected(self.size, drift)
        result.good_median = statistics.median(good) if good else 0.0
        result.bad_median = statistics.median(bad) if bad else 0.0
        return result
