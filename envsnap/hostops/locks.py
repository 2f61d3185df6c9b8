"""The lock on a checkout on the host, with its holder: what restore, bisect and explain take
before they move a checkout.

A lock is a folder on the host (`mkdir` is atomic there, whatever the filesystem), one per
checkout, so two controllers can't move one checkout at once while work on different
checkouts of a host runs side by side. Its folder is named by the checkout's real path, so
two spellings of one checkout share one lock. Its `owner` file names the holder:
controller, pid, command, start time; a lock left by a killed envsnap on this very machine
is taken over. Every message about a lock names its holder by its command (`envsnap bisect`
holds it, not "another restore": restore, bisect and explain all take these locks), and a
wait is told to `on_wait` once per holder, so the CLI can say who it waits for and how long.
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
from typing import Callable

from envsnap.agent.redact import redact_argv
from envsnap.errors import HostError
from envsnap.hosts.inventory import Host
from envsnap.hosts.transport import Transport
from envsnap.snapshot.store import label_from_name
from envsnap.text import timestamp

LOCKS_DIR = ".cache/envsnap/locks"
WAIT_POLL_SECONDS = 0.5


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
                   started=timestamp())

    def text(self) -> str:
        return json.dumps(asdict(self))

    def doing(self) -> str:
        """The holder's envsnap command (`envsnap bisect`, `envsnap restore --abort`), or
        "another envsnap" for an owner file that does not say (one an older envsnap wrote)."""
        try:
            words = shlex.split(self.command)
        except ValueError:
            words = self.command.split()
        if len(words) < 2 or words[0] != "envsnap" or not words[1].isalpha():
            return "another envsnap"
        return " ".join(words[:2] + (["--abort"] if "--abort" in words[2:] else []))

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


@dataclass(frozen=True)
class LockWait:
    """A lock is taken and the command waits for it: who holds it, for how long at most."""

    host: str
    checkout: str
    holder: LockHolder
    seconds: float


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
    on_wait: Callable[[LockWait], None] | None = None   # told once per holder waited for
    wait_hint: str = "--wait SECONDS"   # how this command waits; "" when it cannot

    def __enter__(self) -> CheckoutLocks:
        locks = self.locks()
        deadline: float | None = None   # counted from the first time a lock is found taken
        me = LockHolder.this_process()
        told: set[LockHolder] = set()
        while True:
            busy = self.take_all(locks, me)
            if busy is None:
                return self
            lock, holder = busy
            deadline = deadline or time.monotonic() + self.wait
            left = deadline - time.monotonic()
            if left <= 0:
                raise HostError(self.refusal(lock, holder))
            if self.on_wait is not None and holder not in told:
                told.add(holder)
                self.on_wait(LockWait(self.host.name, lock.name, holder, left))
            self.sleep(min(WAIT_POLL_SECONDS, left))

    def refusal(self, lock: Lock, holder: LockHolder) -> str:
        waited = f" (waited {self.wait:g} s)" if self.wait > 0 else ""
        how = f" ({self.wait_hint})" if self.wait_hint else " to end"
        return (f"{self.host.name}: {holder.doing()} holds the lock on {lock.name} "
                f"({holder.describe()}){waited}; wait for it{how}, or remove "
                f"~/{lock.folder} on the host if it is stale")

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
        # set -C: the owner file is made new (O_EXCL), never written through a link
        command = (f"mkdir -p \"$HOME\"/{LOCKS_DIR} && mkdir {lock.path} 2>/dev/null && "
                   f"(set -C; printf '%s\\n' {shlex.quote(me.text())} > {lock.path}/owner)")
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
