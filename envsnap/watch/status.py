"""The watcher's status file, `<store>/watch/<name>.json`: written (whole, beside and
renamed: snapshot/entries.py) after each capture and when the watcher ends; read by
`envsnap watch --status`. It says what a person asks of a process that runs all day: is it
alive, when did it last capture and how long did that take, what failed, and what it costs
(its own CPU seconds over its wall time, getrusage; its captures' agents apart).

Also here: the lock that keeps one watcher per store and set of hosts
(`<store>/watch/<name>.lock`, held with flock for the watcher's life; the kernel drops it
when the process ends, however it ends).
"""
from __future__ import annotations

import fcntl
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from envsnap.agent.env import is_envsnap_command, parse_cmdline
from envsnap.errors import StoreError, UsageError
from envsnap.shape import is_object
from envsnap.snapshot.entries import write_entry
from envsnap.snapshot.store import label_from_name

FOLDER = "watch"


@dataclass(frozen=True)
class CaptureRun:
    """One capture the watcher made (or tried)."""

    host: str
    reason: str          # "every 10m", "process 1917 started"
    at: float            # epoch seconds at its start
    seconds: float       # wall time it took, the sink's write included
    cpu_seconds: float   # CPU it took: the watcher's and its agent's
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class WatchStatus:
    name: str                    # watcher_name(hosts): names its files
    hosts: tuple[str, ...]
    pid: int
    every: float                 # the period, seconds
    started_at: float            # epoch seconds
    updated_at: float
    running: bool                # False once it has ended (written last)
    captures: int                # made, failed ones included
    failures: int
    last: CaptureRun | None
    last_failure: CaptureRun | None
    wall_seconds: float          # since it started
    cpu_seconds: float           # the watcher's own (user + system)
    children_cpu_seconds: float  # its captures' agents (processes it started and waited for)
    capture_cpu_seconds: float   # of all that, what the captures took (both sides)
    new_processes: int           # new pids read, to find workers' starts (this machine's)

    @property
    def cpu_share(self) -> float:
        """Its own CPU as a share of one core over its life."""
        return self.cpu_seconds / self.wall_seconds if self.wall_seconds > 0 else 0.0

    @property
    def total_cpu_share(self) -> float:
        """Its own and its agents' CPU as a share of one core."""
        total = self.cpu_seconds + self.children_cpu_seconds
        return total / self.wall_seconds if self.wall_seconds > 0 else 0.0


def watcher_name(hosts: list[str]) -> str:
    """The name of a watcher of these hosts: their labels joined (`local`, `gpu1+gpu2`)."""
    return "+".join(label_from_name(host) for host in hosts)


def folder_of(store_root: Path) -> Path:
    return store_root / FOLDER


def status_path(store_root: Path, name: str) -> Path:
    return folder_of(store_root) / f"{name}.json"


def write_status(store_root: Path, status: WatchStatus) -> None:
    path = status_path(store_root, status.name)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_entry(path, json.dumps(asdict(status), indent=1) + "\n", mode=0o644)
    except OSError as exc:
        raise StoreError(f"cannot write {path}: {exc.strerror or exc}") from None


def read_statuses(store_root: Path) -> list[WatchStatus | StoreError]:
    """Every watcher's status in the store, by name; one that cannot be read is its
    StoreError in its place (the others are still shown)."""
    folder = folder_of(store_root)
    try:
        paths = sorted(path for path in folder.iterdir() if path.suffix == ".json")
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise StoreError(f"cannot list {folder}: {exc.strerror or exc}") from None
    return [read_status(path) for path in paths]


def read_status(path: Path) -> WatchStatus | StoreError:
    try:
        with open(path, "rb") as handle:   # a status file is a few hundred bytes
            data = json.loads(handle.read(1 << 20))
        return status_of(data)
    except OSError as exc:
        return StoreError(f"cannot read {path}: {exc.strerror or exc}")
    except (ValueError, TypeError, KeyError):
        return StoreError(f"{path}: not a watcher's status file")


def number(data: dict[str, object], key: str) -> float:
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{key} is a number")
    return float(value)


def whole(data: dict[str, object], key: str) -> int:
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{key} is a whole number")
    return value


def run_of(data: object) -> CaptureRun | None:
    if data is None:
        return None
    if not is_object(data):
        raise TypeError("a capture is a mapping")
    error = data["error"]
    return CaptureRun(host=str(data["host"]), reason=str(data["reason"]),
                      at=number(data, "at"), seconds=number(data, "seconds"),
                      cpu_seconds=number(data, "cpu_seconds"),
                      error=None if error is None else str(error))


def status_of(data: object) -> WatchStatus:
    """The status a watcher wrote; TypeError, ValueError or KeyError for anything else."""
    if not is_object(data) or not isinstance(data["hosts"], list):
        raise TypeError("a status is a mapping with a list of hosts")
    return WatchStatus(
        name=str(data["name"]), hosts=tuple(str(host) for host in data["hosts"]),
        pid=whole(data, "pid"), every=number(data, "every"),
        started_at=number(data, "started_at"), updated_at=number(data, "updated_at"),
        running=data["running"] is True, captures=whole(data, "captures"),
        failures=whole(data, "failures"), last=run_of(data["last"]),
        last_failure=run_of(data["last_failure"]),
        wall_seconds=number(data, "wall_seconds"), cpu_seconds=number(data, "cpu_seconds"),
        children_cpu_seconds=number(data, "children_cpu_seconds"),
        capture_cpu_seconds=number(data, "capture_cpu_seconds"),
        new_processes=whole(data, "new_processes"))


def is_alive(status: WatchStatus, proc: str = "/proc") -> bool:
    """Whether the watcher that wrote `status` still runs: said running, and its pid is an
    envsnap command now (read from /proc; a pid reused by something else is not it)."""
    if not status.running:
        return False
    try:
        with open(f"{proc}/{status.pid}/cmdline", "rb") as handle:
            return is_envsnap_command(parse_cmdline(handle.read()))
    except OSError:
        return False


def watcher_runs(store_root: Path, name: str) -> bool:
    """Whether a watcher named `name` runs now with this store (its status says so and its
    pid is an envsnap command)."""
    status = read_status(status_path(store_root, name))
    return isinstance(status, WatchStatus) and is_alive(status)


class WatcherLock:
    """One watcher per store and name: an exclusive flock on `<store>/watch/<name>.lock`,
    held until release() or the process's end. Taken, or a UsageError naming the holder."""

    def __init__(self, store_root: Path, name: str) -> None:
        self.path = folder_of(store_root) / f"{name}.lock"
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.descriptor = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW
                                      | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise StoreError(f"cannot open {self.path}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(self.descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(self.descriptor, 32, 0).decode("ascii", "replace").strip()
            os.close(self.descriptor)
            raise UsageError(f"another envsnap watch of {name} runs with this store "
                             f"(pid {holder or '?'}; {self.path}): one is enough") from None
        os.ftruncate(self.descriptor, 0)
        os.pwrite(self.descriptor, f"{os.getpid()}\n".encode(), 0)

    def release(self) -> None:
        os.close(self.descriptor)
