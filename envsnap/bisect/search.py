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
from dataclasses import dataclass, field

from envsnap.bench import stats as benchstats
from envsnap.verdicts import BAD, CANT_TELL, GOOD, IMPROVEMENT, REGRESSION, SKIP, Classification

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
    """A commit's runs against both endpoints' runs: like good, like bad, or can't tell.

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


def change(verdict: benchstats.Comparison) -> str:
    """The change a regression or improvement verdict found (its ratio and p are set)."""
    ratio, p = verdict["ratio"], verdict["p_value"]
    if ratio is None or p is None:
        return verdict["why"]
    return f"{ratio - 1:+.1%}, p={p:.2g}"
