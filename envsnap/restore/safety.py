"""The safety net around a restore: a lock on the host and a journal beside the store.

The lock is a folder on the host (`mkdir` is atomic there, whatever the filesystem), so two
controllers can't restore one host at once. The journal is a small JSON file in the store:
it survives a Ctrl-C, a lost connection or kill -9 of the controller, and tells the next
run that a restore was interrupted, what it was restoring and where the rollback point is.
"""
from __future__ import annotations

import json
import os
import shlex
import socket
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from envsnap.errors import HostError, StoreError, UsageError
from envsnap.hosts.inventory import Host
from envsnap.hosts.transport import Transport
from envsnap.snapshot.store import Store, atomic_write, label_from_name

LOCK_DIR = ".cache/envsnap/restore.lock"
JOURNAL_DIR = ".journal"

# How a new restore relates to an interrupted one (check_pending).
Pending = Literal["resume", "rollback"]
# Where a restore was when its journal was last written (plain strings in the JSON).
JournalState = Literal["planning", "applying", "verifying"]


def owner_text() -> str:
    return f"{socket.gethostname()} {os.getpid()}"


def owner_is_dead(owner: str) -> bool:
    """A lock left by a killed envsnap on this very machine may be taken over."""
    parts = owner.split()
    if len(parts) != 2 or parts[0] != socket.gethostname() or not parts[1].isdigit():
        return False
    try:
        os.kill(int(parts[1]), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


class HostLock:
    """`with HostLock(transport, host):` holds the host's restore lock or raises HostError."""

    def __init__(self, transport: Transport, host: Host) -> None:
        self.transport = transport
        self.host = host
        self.path = f'"$HOME"/{LOCK_DIR}'

    def __enter__(self) -> HostLock:
        if not self.try_take():
            owner = self.owner()
            if not owner_is_dead(owner):
                raise HostError(f"{self.host.name}: another restore holds the lock ({owner}); "
                                f"wait for it, or remove ~/{LOCK_DIR} on the host if it is stale")
            self.release()
            if not self.try_take():
                raise HostError(f"{self.host.name}: could not take the restore lock")
        return self

    def try_take(self) -> bool:
        command = (f"mkdir -p \"$HOME\"/.cache/envsnap && mkdir {self.path} 2>/dev/null && "
                   f"echo {shlex.quote(owner_text())} > {self.path}/owner")
        return self.transport.run(command, timeout=30).exit_code == 0

    def holder(self) -> str | None:
        """Who holds the lock now ("host pid"), only read; None when nobody does."""
        result = self.transport.run(f"if [ -d {self.path} ]; then cat {self.path}/owner "
                                    "2>/dev/null || true; else exit 1; fi", timeout=30)
        if result.exit_code != 0:
            return None
        return result.stdout.strip() or "owner not written yet"

    def owner(self) -> str:
        return self.transport.run(f"cat {self.path}/owner", timeout=30).stdout.strip()

    def release(self) -> None:
        self.transport.run(f"rm -f {self.path}/owner && rmdir {self.path}", timeout=30)

    def __exit__(self, *_exc: object) -> None:
        try:
            self.release()
        except HostError:
            pass  # the host went away: the journal tells the next run what happened


@dataclass
class Journal:
    label: str               # the snapshot being restored
    host: str
    pre_restore: str         # the rollback point: `envsnap restore <pre_restore>`
    started: str
    state: JournalState = "planning"  # planning -> applying -> verifying; removed when done


class JournalBook:
    """One journal per host in the store's .journal folder."""

    def __init__(self, store: Store) -> None:
        self.folder = Path(store.root) / JOURNAL_DIR

    def path(self, host: str) -> Path:
        return self.folder / f"{label_from_name(host)}.json"

    def read(self, host: str) -> Journal | None:
        try:
            data: dict[str, Any] = json.loads(self.path(host).read_text(encoding="utf-8"))
            return Journal(**data)
        except FileNotFoundError:
            return None
        except OSError as exc:   # a folder of that name, or one we may not read
            raise UsageError(f"restore journal {self.path(host)} is unreadable "
                             f"({exc.strerror}); look at it, then delete it") from None
        except (ValueError, TypeError) as exc:
            raise UsageError(f"restore journal {self.path(host)} is unreadable ({exc}); "
                             "look at it, then delete it") from None

    def write(self, journal: Journal) -> None:
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            atomic_write(self.path(journal.host), json.dumps(asdict(journal), indent=2) + "\n")
        except OSError as exc:
            raise StoreError(f"cannot write restore journal {self.path(journal.host)}: "
                             f"{exc.strerror}") from None

    def clear(self, host: str) -> None:
        self.path(host).unlink(missing_ok=True)


def check_pending(journal: Journal | None, label: str) -> Pending | None:
    """How a new restore relates to an interrupted one: None (none pending), "resume" (the
    same snapshot again) or "rollback" (its pre-restore point); anything else is refused."""
    if journal is None:
        return None
    if label == journal.label:
        return "resume"
    if label == journal.pre_restore:
        return "rollback"
    raise UsageError(f"an interrupted restore of {journal.label!r} on {journal.host} "
                     f"(started {journal.started}, state {journal.state}) is pending: "
                     f"run `envsnap restore {journal.label}` to resume it or "
                     f"`envsnap restore {journal.pre_restore}` to roll back")
