"""`restore --rerun` against both endpoints: the snapshot restored (good) and, when the store
knows it, the state the host was restored *from* (bad), so the verdict can say "back to
good: 297.6 vs good 296.8, bad 26.8" instead of only "same as good". Pure but for reading
the store.

The bad side is a stored snapshot that holds runs of the same benchmark on this host and
whose restorable state (HEADs, patches, untracked files, sitecustomize: what restore puts
back) is the state the host was in just before the restore: the rollback point itself when
it holds runs, else the newest such snapshot (typically the `envsnap bench HOST --label bad`
that showed the slowdown). None is guessed: without one, the rerun is compared with good
alone, as before.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from envsnap.bench import stats as benchstats
from envsnap.errors import SnapshotError, UsageError
from envsnap.snapshot import document as snap
from envsnap.snapshot.store import Store
from envsnap.verdicts import (
    BACK_TO_GOOD,
    CANT_TELL,
    IMPROVEMENT,
    PART_WAY,
    REGRESSION,
    SAME,
    STILL_BAD,
    BenchVerdict,
    RerunOutcome,
)

if TYPE_CHECKING:
    from envsnap.snapshot.records import Bench, Snapshot

# Where the rerun landed between the endpoints.

# Same restorable state: (a snapshot, a capture) -> whether restore would change nothing.
SameState = Callable[["Snapshot", "Snapshot"], bool]


@dataclass(frozen=True)
class BadSide:
    label: str
    values: list[float]
    verdict: benchstats.Comparison   # the rerun against the bad side's runs


@dataclass(frozen=True)
class Rerun:
    """The benchmark run again after a restore: its record, judged against the snapshot's
    runs (good) and, when the store knows it, against the state restored from (bad)."""

    record: Bench
    vs_good: benchstats.Comparison
    vs_bad: BadSide | None = None

    @property
    def verdict(self) -> BenchVerdict:
        """Against good: what the exit code and the one-line summary go by."""
        return self.vs_good["verdict"]


def same_benchmark(recorded: Bench | None, rerun: Bench) -> bool:
    """Runs of the same command and metric, read the same way, enough to know their noise."""
    return (recorded is not None and recorded.get("command") == rerun.get("command")
            and recorded.get("metric") == rerun.get("metric")
            and bool(recorded.get("lower_is_better")) == bool(rerun.get("lower_is_better"))
            and len(recorded["values"]) >= benchstats.MIN_RUNS)


def find_bad_side(store: Store, restored: Snapshot, rollback_label: str | None,
                  host: str, rerun: Bench, same_state: SameState) -> BadSide | None:
    """The bad endpoint for a rerun (module docstring), compared with it; None if unknown."""
    if rollback_label is None:
        return None      # nothing was restored: the host was already in the good state
    try:
        before = store.load(rollback_label)
    except (SnapshotError, UsageError):
        return None
    candidates = [(rollback_label, before)] + newest_first(store, host, rollback_label)
    restored_label = snap.label(restored)
    for label, document in candidates:
        record = snap.bench(document)
        if label == restored_label or not same_benchmark(record, rerun):
            continue
        if label == rollback_label or (same_state(document, before)
                                       and not same_state(restored, document)):
            assert record is not None   # same_benchmark said so
            values = [float(v) for v in record["values"]]
            return BadSide(label, values, benchstats.compare(
                values, rerun["values"], bool(rerun.get("lower_is_better"))))
    return None


def newest_first(store: Store, host: str, leave_out: str) -> list[tuple[str, Snapshot]]:
    found = []
    for entry in store.entries():
        if entry.host != host or entry.label == leave_out:
            continue
        try:
            found.append((entry.captured_at, entry.label, store.load(str(entry.path))))
        except (SnapshotError, UsageError):
            continue     # unreadable: entries() listed it as such
    return [(label, document) for _, label, document in sorted(found, reverse=True,
                                                                 key=lambda f: f[:2])]


def outcome(vs_good: benchstats.Comparison, vs_bad: benchstats.Comparison) -> RerunOutcome:
    """Back to good: not worse than good and better than bad. Still bad: worse than good
    and the same as bad. Part way back: worse than good, better than bad."""
    good_verdict, bad_verdict = vs_good["verdict"], vs_bad["verdict"]
    if good_verdict in (SAME, IMPROVEMENT) \
            and bad_verdict == IMPROVEMENT:
        return BACK_TO_GOOD
    if good_verdict == REGRESSION and bad_verdict == IMPROVEMENT:
        return PART_WAY
    if good_verdict == REGRESSION and bad_verdict in (SAME,
                                                                 REGRESSION):
        return STILL_BAD
    return CANT_TELL
