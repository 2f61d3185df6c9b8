"""What a timeline is made of: typed events in time order, and the window they fall in.

An event is one change the host's evidence shows: when, what changed, the evidence it was
read from (a reflog line, a log line, a file and its mtime, a process's start time), how
exact that time is, and how to test or undo it. Exactness is said, never implied:

- "recorded": the tool that made the change wrote the time (git's reflog, dpkg, apt, rpm,
  conda, envsnap's own snapshots and bench records, the kernel's boot time);
- "file time": a file's mtime, which a later touch, copy or restore may have moved;
- "kernel clock": dmesg's seconds since boot, turned into a time by the boot time (a
  suspended host's clock drifts from it);
- "between records": no time was written at all, only two records that disagree (a package a
  snapshot recorded and the host no longer holds): the event stands at the first record's
  time and `until` is the later one; when within it happened is not known.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Literal

from envsnap.text import plural

Exactness = Literal["recorded", "file time", "kernel clock", "between records"]
RECORDED: Exactness = "recorded"
FILE_TIME: Exactness = "file time"
KERNEL_CLOCK: Exactness = "kernel clock"
BETWEEN_RECORDS: Exactness = "between records"
EXACTNESS_SAID: dict[Exactness, str] = {
    RECORDED: "recorded by the tool", FILE_TIME: "file time: a later touch may move it",
    KERNEL_CLOCK: "kernel clock: seconds since boot",
    BETWEEN_RECORDS: "between two records: when within them is not known"}

# What an event is, by the source it came from.
Kind = Literal["checkout", "stash", "python-package", "conda", "system-package", "file",
               "process-start", "boot", "kernel-module", "kernel-message", "snapshot",
               "bench"]


@dataclass(frozen=True)
class Event:
    time: float                      # epoch seconds
    kind: Kind
    subject: str                     # the checkout, package, file, pid... it is about
    what: str                        # one line: what changed
    evidence: str                    # where it was read, as read
    exactness: Exactness
    details: tuple[str, ...] = ()    # the commits a move brought in, a worker's env...
    test: str | None = None          # how to test or undo it; "none" said in words
    role: str | None = None          # "system: driver", "hot path"...: why it may matter
    metric: float | None = None      # a bench record's median
    digest: str | None = None        # a file's sha256 now
    argv: tuple[str, ...] = ()       # a started process's command line
    env: tuple[tuple[str, str], ...] = ()   # and its env now (name, value)
    undo_at: float | None = None     # a checkout move: a moment before it, for restore --at
    until: float | None = None       # "between records": the later bound of when it happened
    folded: int = 0                  # changes folded into this one (a pip run's packages),
                                     # each a line of `details`, which text lists with -v
    moved: tuple[str, ...] = ()      # a checkout move: (old, new) commit


def recorded_name(label: str, time: float, watched: bool) -> str:
    """How a text names what recorded something: a snapshot by its label, a record of the
    watched history by its time (its id is no label `restore` takes)."""
    if not watched:
        return f"snapshot {label}"
    return f"the watched record of {datetime.fromtimestamp(time, timezone.utc):%Y-%m-%d %H:%M:%S}"


class RecordNamed:
    """What a snapshot or a watched record is called in a text, and how to restore it: for
    the frozen dataclasses that carry these three fields (history.Stored, RecordedVersion)."""

    label: str
    time: float
    watched: bool

    @property
    def named(self) -> str:
        return recorded_name(self.label, self.time, self.watched)

    @property
    def restore(self) -> str:
        """"; envsnap restore L --pip" for a snapshot; a watched record is no label."""
        return "" if self.watched else f"; envsnap restore {self.label} --pip"


@dataclass(frozen=True)
class RecordedVersion(RecordNamed):
    """A package as the newest snapshot (or watched record) before a change recorded its
    interpreter: the version it held then, or None where that interpreter had no such
    package (a fresh install)."""

    label: str
    time: float
    version: str | None
    watched: bool = False            # a record of the watched history, not a snapshot


@dataclass(frozen=True)
class Window:
    since: float
    until: float
    since_text: str                  # as the user gave it, for the header
    until_text: str | None = None


@dataclass(frozen=True)
class RecordedStashes:
    """A checkout's stash list as a stored snapshot recorded it: what a stash reflog's later
    rewrite is compared with (a stash recorded then and gone now was popped or dropped)."""

    label: str
    time: float
    entries: tuple[tuple[str, str], ...]    # (stash commit, its message), newest first


@dataclass(frozen=True)
class LookedAt:
    """What the timeline read, and what it could not: said in its header, so that an empty
    timeline is never taken for "nothing changed" where nothing was looked at."""

    checkouts: int
    pythons: int
    workers: int
    found: str                  # where they came from: "as named", "found from ..."
    not_looked_at: tuple[str, ...] = ()
    repos: tuple[str, ...] = ()         # the checkouts, by path
    pythons_read: tuple[str, ...] = ()  # the interpreters besides the agent's own

    def lines(self) -> tuple[str, str]:
        """("looked at: ...", "not looked at: ..." or "")."""
        looked = (f"looked at: {plural(self.checkouts, 'checkout')} ({self.found}), "
                  f"{plural(self.pythons, 'python')}, "
                  f"{plural(self.workers, 'worker process', 'es')}")
        missed = f"not looked at: {'; '.join(self.not_looked_at)}" if self.not_looked_at else ""
        return looked, missed


@dataclass
class Timeline:
    host: str
    window: Window
    events: list[Event]                               # oldest first
    unreadable: list[str] = field(default_factory=list)  # "kernel: dmesg: not permitted"
    last_good: Event | None = None
    first_bad: Event | None = None
    looked_at: LookedAt | None = None                 # None: a saved timeline from before
    watched: str | None = None       # what the watched history covered, or that none did

    @property
    def between(self) -> list[Event]:
        """The changes after the last good benchmark and up to the first bad one."""
        if self.last_good is None or self.first_bad is None:
            return []
        start, end = self.last_good.time, self.first_bad.time
        return [event for event in self.events if start < event.time <= end
                and event.kind not in ("bench", "snapshot")]
