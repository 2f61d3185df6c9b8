"""The safety net around a restore: a lock per checkout on the host and a journal beside
the store.

A lock is a folder on the host (`mkdir` is atomic there, whatever the filesystem), one per
checkout the restore touches, so two controllers can't restore one checkout at once while
restores of different checkouts of a host run side by side. Its `owner` file names the
holder: controller, pid, command, start time. The journal is a small JSON file in the
store, one per host and set of checkouts: it survives a Ctrl-C, a lost connection or kill -9
of the controller, and tells the next run that touches those checkouts that a restore was
interrupted, what it was restoring and where the rollback point is.
"""
from __future__ import annotations

import hashlib
import json
import os
import shlex
import socket
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Literal

from envsnap.agent.redact import redact_argv
from envsnap.errors import HostError, StoreError, UsageError
from envsnap.hosts.inventory import Host
from envsnap.hosts.transport import Transport
from envsnap.snapshot import document as snap
from envsnap.snapshot.store import Store, atomic_write, label_from_name

if TYPE_CHECKING:
    from envsnap.snapshot.records import Snapshot

LOCKS_DIR = ".cache/envsnap/locks"
JOURNAL_DIR = ".journal"
WAIT_POLL_SECONDS = 0.5

# How a new restore relates to an interrupted one (check_pending).
Pending = Literal["resume", "rollback"]
# Where a restore was when its journal was last written (plain strings in the JSON).
JournalState = Literal["planning", "applying", "verifying"]


def touched_by(document: Snapshot, only: list[str] | None = None) -> list[str]:
    """The checkouts a restore of `document` writes (`only` those when it restores some),
    as recorded: its lock and journal names. sitecustomize takes no lock of its own: every
    system python of Debian and Ubuntu has one, so a lock on it would serialise all restores
    of a host again; two restores that both rewrite it differently are told by verify."""
    return sorted(path for path, repo in snap.repos(document).items()
                  if isinstance(repo, dict) and isinstance(repo.get("head"), str)
                  and (only is None or path in only))


@dataclass(frozen=True)
class LockHolder:
    """Who holds a lock, as its owner file says."""

    controller: str
    pid: int | None
    command: str = ""
    started: str = ""

    @classmethod
    def parse(cls, text: str) -> LockHolder:
        text = text.strip()
        try:
            data = json.loads(text)
            pid = data.get("pid")
            return cls(controller=str(data.get("controller", "?")),
                       pid=pid if isinstance(pid, int) else None,
                       command=str(data.get("command", "")), started=str(data.get("started", "")))
        except (ValueError, AttributeError):
            parts = text.split()   # "controller pid", as envsnap before per-checkout locks
            if len(parts) == 2 and parts[1].isdigit():
                return cls(controller=parts[0], pid=int(parts[1]))
            return cls(controller=text or "?", pid=None)

    @classmethod
    def this_process(cls) -> LockHolder:
        # The owner file is readable on the host: a secret on the command line is masked.
        command = shlex.join(["envsnap", *redact_argv(sys.argv[1:])])
        return cls(controller=socket.gethostname(), pid=os.getpid(), command=command[:300],
                   started=datetime.now(timezone.utc).isoformat(timespec="seconds"))

    def text(self) -> str:
        return json.dumps(asdict(self))

    def describe(self) -> str:
        if self.pid is None and self.controller == "?":
            return "owner not written yet"
        said = f"pid {self.pid} on {self.controller}" if self.pid is not None \
            else self.controller
        if self.command:
            said += f", {self.command!r}"
        if self.started:
            said += f", since {self.started}"
        return said

    def is_dead(self) -> bool:
        """A lock left by a killed envsnap on this very machine may be taken over."""
        if self.pid is None or self.controller != socket.gethostname():
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False


@dataclass
class Lock:
    """One checkout's lock on the host: `name` as the restore knows it, `folder` its path
    under ~ (named by the checkout's real path, so two spellings of it share one lock)."""

    name: str
    folder: str

    @property
    def path(self) -> str:
        return f'"$HOME"/{shlex.quote(self.folder)}'


@dataclass
class CheckoutLocks:
    """`with CheckoutLocks(transport, host, touched, wait):` holds the lock of every checkout
    a restore touches, or raises HostError naming the holder of one that stays taken after
    `wait` seconds (0: at once). Nothing is held while waiting: two restores that each want
    what the other has never deadlock."""

    transport: Transport
    host: Host
    touched: list[str]
    wait: float = 0.0
    sleep: Callable[[float], None] = time.sleep
    held: list[Lock] = field(default_factory=list)

    def __enter__(self) -> CheckoutLocks:
        locks = self.locks()
        deadline = time.monotonic() + self.wait
        me = LockHolder.this_process()
        while True:
            busy = self.take_all(locks, me)
            if busy is None:
                return self
            left = deadline - time.monotonic()
            if left <= 0:
                lock, holder = busy
                waited = f" (waited {self.wait:g} s)" if self.wait > 0 else ""
                raise HostError(f"{self.host.name}: another restore holds the lock on "
                                f"{lock.name} ({holder.describe()}){waited}; wait for it "
                                f"(--wait SECONDS), or remove ~/{lock.folder} on the host if "
                                "it is stale")
            self.sleep(min(WAIT_POLL_SECONDS, left))

    def __exit__(self, *_exc: object) -> None:
        self.release_all()

    def take_all(self, locks: list[Lock], me: LockHolder) -> tuple[Lock, LockHolder] | None:
        """Take each lock in order; on the first one taken by a live restore, give back
        those taken and say whose it is."""
        for lock in locks:
            if self.try_take(lock, me):
                self.held.append(lock)
                continue
            holder = self.holder(lock)
            if holder is None or holder.is_dead():   # released meanwhile, or left by the dead
                if holder is not None:
                    self.release(lock)
                if self.try_take(lock, me):
                    self.held.append(lock)
                    continue
                holder = self.holder(lock)
            self.release_all()
            if holder is None:   # no lock there, and mkdir still fails: no such restore
                raise HostError(f"{self.host.name}: cannot create the restore lock "
                                f"~/{lock.folder} on the host (is ~/.cache writable?)")
            return lock, holder
        return None

    def locks(self) -> list[Lock]:
        """Each checkout's real path on the host (`cd -P`: symlinks and `~` resolved; the
        path as recorded when it is not there), hashed into its lock's folder name."""
        script = ('for p in "$@"; do case $p in "~/"*) p="$HOME/${p#"~/"}";; esac; '
                  '(cd -P -- "$p" 2>/dev/null && pwd -P) || printf "%s\\n" "$p"; done')
        real: list[str] = []
        if self.touched:
            result = self.transport.run(f"sh -c {shlex.quote(script)} sh "
                                        + " ".join(shlex.quote(c) for c in self.touched), 30)
            real = result.stdout.splitlines()
        if len(real) != len(self.touched):   # a path with a newline: keep it as recorded
            real = list(self.touched)
        locks = []
        for name, key in zip(self.touched, real):
            digest = hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:16]
            base = label_from_name(os.path.basename(key.rstrip("/")) or "root")[:40]
            locks.append(Lock(name=name, folder=f"{LOCKS_DIR}/{base}-{digest}.lock"))
        return sorted(locks, key=lambda lock: lock.folder)

    def try_take(self, lock: Lock, me: LockHolder) -> bool:
        command = (f"mkdir -p \"$HOME\"/{LOCKS_DIR} && mkdir {lock.path} 2>/dev/null && "
                   f"printf '%s\\n' {shlex.quote(me.text())} > {lock.path}/owner")
        return self.transport.run(command, timeout=30).exit_code == 0

    def holder(self, lock: Lock) -> LockHolder | None:
        """Who holds `lock` now, only read; None when nobody does."""
        result = self.transport.run(f"if [ -d {lock.path} ]; then cat {lock.path}/owner "
                                    "2>/dev/null || true; else exit 1; fi", timeout=30)
        if result.exit_code != 0:
            return None
        return LockHolder.parse(result.stdout)

    def holders(self) -> list[tuple[str, LockHolder]]:
        """(what, who) for each lock of this restore that is held now: what --check, which
        takes none, says about them."""
        found = []
        for lock in self.locks():
            holder = self.holder(lock)
            if holder is not None:
                found.append((lock.name, holder))
        return found

    def release(self, lock: Lock) -> None:
        self.transport.run(f"rm -f {lock.path}/owner && rmdir {lock.path}", timeout=30)

    def release_all(self) -> None:
        while self.held:
            lock = self.held.pop()
            try:
                self.release(lock)
            except HostError:
                pass  # the host went away: the journal tells the next run what happened


@dataclass
class Journal:
    label: str               # the snapshot being restored
    host: str
    pre_restore: str         # the rollback point: `envsnap restore <pre_restore>`
    started: str
    state: JournalState = "planning"  # planning -> applying -> verifying; removed when done
    # What the restore writes (touched_by); empty in a journal from before per-checkout
    # locks, which then stands for the whole host.
    touched: list[str] = field(default_factory=list)

    def overlaps(self, touched: list[str]) -> bool:
        return not self.touched or not touched or bool(set(self.touched) & set(touched))


class JournalBook:
    """The store's .journal folder: .journal/<host>/<what it touches>.json, one per host and
    set of checkouts (.journal/<host>.json: a journal of the whole host, as written before)."""

    def __init__(self, store: Store) -> None:
        self.folder = Path(store.root) / JOURNAL_DIR

    def host_path(self, host: str) -> Path:
        return self.folder / f"{label_from_name(host)}.json"

    def path(self, journal: Journal) -> Path:
        if not journal.touched:
            return self.host_path(journal.host)
        digest = hashlib.sha256("\0".join(journal.touched).encode("utf-8", "surrogateescape"))
        return self.folder / label_from_name(journal.host) / f"{digest.hexdigest()[:16]}.json"

    def read(self, host: str, touched: list[str]) -> Journal | None:
        """The pending journal of `host` that touches any of `touched`, if there is one."""
        paths = [self.host_path(host)]
        folder = self.folder / label_from_name(host)
        if folder.is_dir():
            paths += sorted(folder.glob("*.json"))
        for path in paths:
            journal = self.read_one(path)
            if journal is not None and journal.overlaps(touched):
                return journal
        return None

    def read_one(self, path: Path) -> Journal | None:
        try:
            data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
            return Journal(**data)
        except FileNotFoundError:
            return None
        except OSError as exc:   # a folder of that name, or one we may not read
            raise UsageError(f"restore journal {path} is unreadable "
                             f"({exc.strerror}); look at it, then delete it") from None
        except (ValueError, TypeError) as exc:
            raise UsageError(f"restore journal {path} is unreadable ({exc}); "
                             "look at it, then delete it") from None

    def write(self, journal: Journal) -> None:
        path = self.path(journal)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, json.dumps(asdict(journal), indent=2) + "\n")
        except OSError as exc:
            raise StoreError(f"cannot write restore journal {path}: {exc.strerror}") from None

    def start(self, journal: Journal, replacing: Journal | None) -> None:
        """Write a new restore's journal; the interrupted one it rolls back (`replacing`) is
        removed once the new one is written, wherever it was kept."""
        self.write(journal)
        if replacing is not None and self.path(replacing) != self.path(journal):
            self.clear(replacing)

    def clear(self, journal: Journal) -> None:
        self.path(journal).unlink(missing_ok=True)

    def pending(self) -> list[Journal]:
        """Every journal in the store, of every host (what `restore --abort` looks through)."""
        if not self.folder.is_dir():
            return []
        paths = sorted(self.folder.glob("*.json")) + sorted(self.folder.glob("*/*.json"))
        return [journal for journal in map(self.read_one, paths) if journal is not None]


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
                     f"{way_out(journal)}")


def way_out(journal: Journal) -> str:
    """What the user types to get past a pending journal, said wherever one is left."""
    return (f"run `envsnap restore {journal.label}` to resume it, or "
            f"`envsnap restore --abort --host {journal.host}` to roll it back "
            f"(to {journal.pre_restore})")
