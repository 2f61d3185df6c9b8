"""The agent's timeline evidence as types: what agent/timeline.py and agent/timelinelogs.py
print under "timeline", read by code_events, system_events and run.

As snapshot/records.py types a snapshot, these TypedDicts say for the type checker what the
agent writes; the agent itself stays untyped by them (it travels alone, imports nothing of
envsnap). A field a record always has is required; a field the agent writes only sometimes is
in a `total=False` class. Nothing is copied or converted:
run.build casts the agent's JSON once, where it enters the timeline.
"""
from __future__ import annotations

from typing import TypedDict


class MovedCommit(TypedDict):
    sha: str
    time: int
    subject: str
    files: list[str]


class MovedCommits(TypedDict, total=False):
    """The commits a move brought in (old..new, at most a few), how many in all, and how
    many it left behind."""

    added: list[MovedCommit]
    added_total: int
    removed: int


class ReflogRecord(TypedDict, total=False):
    """A line of HEAD's or the stash's reflog (agent/gitparse.py), with its checkout; or the
    stash reflog file's state (`state`): its mtime, whether that is after its newest line
    (`rewritten`: a pop, a drop, or a slow push), and the stash commits it lists now."""

    repo: str
    ref: str                  # "HEAD" or "stash"
    time: float
    old: str
    new: str
    tz: str
    message: str
    selector: str
    commits: MovedCommits
    state: bool
    rewritten: bool
    deleted: bool             # no stash reflog: `time` is its folder's mtime
    file: str
    left: int
    shas: list[str]


class DistRecord(TypedDict, total=False):
    """A Python distribution's install time: its RECORD's (or folder's) mtime; `interpreter`
    where it is not the agent's (one found running, or the store's)."""

    time: float
    folder: str
    name: str
    version: str
    installer: str | None
    has_record: bool
    interpreter: str


class CondaRecord(TypedDict):
    """A conda-meta/history block, with its time."""

    time: float
    file: str
    block: str


class FileRecord(TypedDict):
    """A watched file (a customize file, a config), written at its mtime."""

    time: float
    path: str
    size: int
    sha256: str | None
    backups: list[str]


class UnitRecord(TypedDict):
    """A worker's systemd unit file or drop-in."""

    time: float
    path: str
    size: int
    sha256: str | None
    unit: str
    pid: int


class ProcessRecord(TypedDict, total=False):
    """A matched process started (agent/env.py's process facts, with its pid and start)."""

    time: float
    pid: int
    cmdline: list[str]
    env: dict[str, str]        # or {"error": why}


class DpkgRecord(TypedDict):
    time: float
    file: str
    action: str
    package: str
    arch: str | None
    old: str | None
    new: str | None


class AptPackage(TypedDict):
    package: str
    arch: str | None
    versions: list[str]       # "(old, new)" for an upgrade, as apt writes them


class AptRecord(TypedDict, total=False):
    """A history.log block: the command that ran, who asked, each action's packages."""

    time: float
    end: float | None
    file: str
    commandline: str | None
    requested_by: str | None
    changes: dict[str, list[AptPackage]]     # "Upgrade" -> its packages


class RpmRecord(TypedDict):
    time: float
    package: str
    version: str


class KernelRecord(TypedDict, total=False):
    time: float
    file: str
    line: str
    message: str
    since_boot: bool


class NvidiaModule(TypedDict, total=False):
    loaded: bool
    sysfs_time: float | None
    version: str | None
    proc_version: str | None


class Source(TypedDict, total=False):
    """What every reader gives: why it could not read (all or some), or None."""

    error: str | None


class GitSource(Source, total=False):
    records: list[ReflogRecord]


class FileSource(Source, total=False):
    records: list[FileRecord]


class ProcessSource(Source, total=False):
    records: list[ProcessRecord]


class UnitSource(Source, total=False):
    records: list[UnitRecord]


class DpkgSource(Source, total=False):
    records: list[DpkgRecord]


class AptSource(Source, total=False):
    records: list[AptRecord]


class RpmSource(Source, total=False):
    records: list[RpmRecord]


class KernelSource(Source, total=False):
    records: list[KernelRecord]


class PythonSource(Source, total=False):
    records: list[DistRecord]
    conda: list[CondaRecord]
    interpreter: str
    held: dict[str, list[str]]    # each site folder read -> its distributions now (PEP 503)


class HostSource(Source, total=False):
    boot: float | None
    nvidia: NvidiaModule


class Sources(TypedDict, total=False):
    """Each reader's result by its name."""

    git: GitSource
    python: PythonSource
    files: FileSource
    procs: ProcessSource
    units: UnitSource
    dpkg: DpkgSource
    apt: AptSource
    rpm: RpmSource
    kernel: KernelSource
    host: HostSource


class LookedAt(TypedDict, total=False):
    """With nothing named, what the agent chose to read (agent/discover.py) and left out."""

    repos: list[str]
    repos_left: int
    repos_from_procs: int
    pythons: list[str]
    pythons_left: int
    pids: list[int]
    pids_left: int
    unreadable: int
    foreign_repos: int


class Evidence(TypedDict, total=False):
    """The agent's output in its timeline mode, under "timeline"."""

    now: float
    since: float
    until: float
    sources: Sources
    looked_at: LookedAt
