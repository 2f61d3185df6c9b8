"""Who owns a marked process: the mark the agent puts in the environment of what it starts,
and the record it keeps of each mark on the host (reaper.py stops what carries one).

A mark is ENVSNAP_OWNER=<agent pid>:<its start time>:<role>:v2:<boot id>:<pid
namespace>:<uid>:<nonce>. It begins as the marks before these rules did, so that an older
agent on the same host (another user's envsnap) still sees its owner alive while it is,
and leaves it alone. An environment variable is copied by whoever starts a process with
the environment it was given: `srun` and `sbatch` (which export it by default), `mpirun -x`,
ssh with SendEnv, a container started with `-e`. So the mark alone proves nothing about who
started a process, and a reaper that believed it stopped other people's work: a benchmark
in a container (its owner's pid means nothing on the host), a process of another uid (as
root), the ranks and jobs a benchmark launched through Slurm. Each part of the mark, and
the record, answers one of those:

- the boot id: a mark copied to another host (ssh, a multi-node job) names another boot;
- the PID namespace (the inode of /proc/self/ns/pid) and the uid: a process is looked at
  only when its own namespace and real uid, read from /proc/PID, are the mark's and the
  reaper's, so no reaper crosses a namespace or a uid, root included. An owner's pid is
  looked up in the one namespace where it means something;
- the nonce, and the record: the agent writes, for each mark, a file named by the nonce in
  ~/.cache/envsnap/owners/ (a folder of this uid only, 0700; the file 0600, created with
  O_EXCL and O_NOFOLLOW, read only when it is a regular file of this uid): the mark, and
  the lineage of the agent when it marked (its own pid and start time, and each of its
  ancestors' up to pid 1). A mark whose record is absent or names another mark is not
  ours. The agent removes the record once it has stopped what carries the mark itself, so
  a copy that outlives a run that ended normally is never acted on, whatever its parent;
- the lineage: a copy made on this host, in this namespace, by this uid (a job step of
  `srun` started by slurmstepd, a job of `sbatch`) still names a record, while its agent
  was killed with -9. What tells it apart is its parent. A process the agent started
  descends from the agent as long as the agent lives; once the agent or one of its parents
  between is gone, the kernel hands the orphan to the nearest living ancestor that reaps
  orphans (a PR_SET_CHILD_SUBREAPER: systemd --user, a container's init) or to pid 1 of its
  namespace, all of them the agent's own ancestors. So the marked process's topmost
  marked ancestor (the process whose parent carries another mark or none) hangs from the
  agent or from one of the ancestors recorded; a copy hangs from whatever copied the
  variable: slurmstepd, orted, sshd, a process that is no ancestor of the agent. Walking
  down from the agent is no answer: orphans are reparented, which is why they are orphans.
  The lineage is recorded when the mark is made: the ancestors an orphan can be handed to
  later are among them, as reparenting only ever goes up that chain.

What no rule here can tell: a copy started by an ancestor of the agent itself (pid 1, or a
subreaper above it, starting a process with the variable set by hand) while a record of a
killed agent is left. Nothing a Slurm or MPI launcher does is that. Old marks
(<pid>:<start>:<role>, before these rules) have no record: they are never acted on.

A record that cannot be written (a read-only home, a folder of another uid) leaves the mark
without one: the agent still stops what carries it itself, and no later agent acts on it.
"""
from __future__ import annotations

import json
import os
import socket
import stat
from typing import FrozenSet, List, NamedTuple, Optional, Set, Tuple

OWNER_VARIABLE = "ENVSNAP_OWNER"
VERSION = "v2"
RECORDS_DIR = "~/.cache/envsnap/owners"
NONCE_BYTES = 16
MAX_RECORD_BYTES = 256 * 1024   # a lineage is tens of processes; anything larger is not ours
MAX_DEPTH = 4096                # the deepest process chain followed (a loop is no chain)


class Identity(NamedTuple):
    """Where a process runs and as whom: what a mark must share with the process carrying it
    and with the reaper that reads it."""
    boot_id: str
    pid_namespace: int
    uid: int

    @property
    def known(self) -> bool:
        return bool(self.boot_id) and self.pid_namespace != 0


class Mark(NamedTuple):
    identity: Identity
    pid: int                 # the agent that marked
    started: str             # its start time (clock ticks since boot: /proc/PID/stat)
    role: str                # "run", "server"
    nonce: str               # names the record

    def text(self) -> str:
        return ":".join([str(self.pid), self.started, self.role, VERSION,
                         self.identity.boot_id, str(self.identity.pid_namespace),
                         str(self.identity.uid), self.nonce])


Lineage = FrozenSet[Tuple[int, str]]   # (pid, start time) of the agent and its ancestors


class Owner(NamedTuple):
    """A mark and what its record keeps: the lineage its processes may hang from."""
    mark: Mark
    lineage: Lineage


def read_stat(pid: int) -> Optional[List[bytes]]:
    """The fields of /proc/PID/stat after the name (state, ppid, pgrp, ...), or None."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    return raw[raw.rfind(b")") + 2:].split()   # the name may hold spaces and ')'


def start_time(pid: int) -> Optional[str]:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat), or
    None when there is no such process."""
    fields = read_stat(pid)
    return fields[19].decode() if fields is not None and len(fields) > 19 else None


def parent(pid: int) -> Optional[int]:
    """Its parent's pid (0 for pid 1 and for a process whose parent is outside its
    namespace), or None when it is gone."""
    fields = read_stat(pid)
    return int(fields[1]) if fields is not None and len(fields) > 1 else None


def pid_namespace(pid: str) -> Optional[int]:
    """The inode of the process's PID namespace ("self" or a pid); None where /proc does not
    say (gone, or a process of another uid that a non-root reader may not inspect)."""
    try:
        return os.stat("/proc/%s/ns/pid" % pid).st_ino
    except OSError:
        return None


def real_uid(pid: int) -> Optional[int]:
    """The process's real uid (the first of the Uid line of /proc/PID/status), or None."""
    try:
        with open("/proc/%d/status" % pid, "rb") as handle:
            for line in handle:
                if line.startswith(b"Uid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def identity() -> Identity:
    """This process's; "" and 0 where /proc does not tell (not known: then no record is
    written and no other agent's mark is acted on; the agent still stops its own)."""
    try:
        with open("/proc/sys/kernel/random/boot_id", "rb") as handle:
            boot_id = handle.read().decode("ascii", "replace").strip()
    except OSError:
        boot_id = ""
    return Identity(boot_id, pid_namespace("self") or 0, os.getuid())


def lineage(pid: int) -> Lineage:
    """(pid, start time) of the process and of each of its ancestors up to pid 1."""
    chain: Set[Tuple[int, str]] = set()
    while pid > 0 and len(chain) < MAX_DEPTH:
        started = start_time(pid)
        above = parent(pid)
        if started is None or above is None:
            break
        chain.add((pid, started))
        pid = above
    return frozenset(chain)


def parse(text: str) -> Optional[Mark]:
    """The mark a process carries, or None: an old mark, a malformed one, one of no agent."""
    parts = text.split(":")
    if len(parts) != 8 or parts[3] != VERSION:
        return None
    pid, started, role, _, boot_id, namespace, uid, nonce = parts
    if not (namespace.isdigit() and uid.isdigit() and pid.isdigit() and started.isdigit()
            and boot_id and role and is_nonce(nonce)):
        return None
    return Mark(Identity(boot_id, int(namespace), int(uid)), int(pid), started, role, nonce)


def is_nonce(text: str) -> bool:
    return len(text) == 2 * NONCE_BYTES and all(c in "0123456789abcdef" for c in text)


def new_owner(role: str) -> Owner:
    """A fresh mark of this agent for one run or server, its record written (where it can
    be: see the module docstring)."""
    here = identity()
    pid = os.getpid()
    mark = Mark(here, pid, start_time(pid) or "", role, os.urandom(NONCE_BYTES).hex())
    owner = Owner(mark, lineage(pid))
    if here.known:
        write_record(owner)
    return owner


def records_dir(create: bool) -> Optional[int]:
    """An open descriptor of the records folder, or None when there is none, or it is a link,
    not this uid's, or open to anyone else (then no record is written there or believed)."""
    path = os.path.expanduser(RECORDS_DIR)
    if create:
        try:
            os.makedirs(path, mode=0o700, exist_ok=True)
        except OSError:
            return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return None
    info = os.fstat(fd)
    if info.st_uid != os.getuid() or info.st_mode & 0o077:
        os.close(fd)
        return None
    return fd


def write_record(owner: Owner) -> None:
    folder = records_dir(create=True)
    if folder is None:
        return
    body = json.dumps({"mark": owner.mark.text(), "hostname": socket.gethostname(),
                       "lineage": sorted(owner.lineage)}).encode()
    try:
        fd = os.open(owner.mark.nonce, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                     0o600, dir_fd=folder)
        try:
            os.write(fd, body)
        finally:
            os.close(fd)
    except OSError:
        pass   # no record: the agent still stops its own; no later one acts on this mark
    finally:
        os.close(folder)


def forget(owner: Owner) -> None:
    """Remove the record of a mark: nothing carrying it is acted on any more."""
    remove_records([owner.mark.nonce])


def remove_records(nonces: List[str]) -> None:
    folder = records_dir(create=False)
    if folder is None:
        return
    try:
        for nonce in nonces:
            try:
                os.unlink(nonce, dir_fd=folder)
            except OSError:
                pass   # removed meanwhile by another agent's reaper
    finally:
        os.close(folder)


class Recorded(NamedTuple):
    owner: Owner
    hostname: str


def read_record(folder: int, nonce: str) -> Optional[Recorded]:
    """The record named `nonce`: None unless it is a regular file of this uid, small, and
    well formed."""
    if not is_nonce(nonce):
        return None
    try:
        fd = os.open(nonce, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if (not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid()
                or info.st_size > MAX_RECORD_BYTES):
            return None
        data = os.read(fd, MAX_RECORD_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        record = json.loads(data)
        mark = parse(record["mark"])
        chain = frozenset((int(pid), str(started)) for pid, started in record["lineage"])
        hostname = str(record["hostname"])
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    if mark is None or mark.nonce != nonce:
        return None
    return Recorded(Owner(mark, chain), hostname)


def recorded(nonce: str) -> Optional[Recorded]:
    folder = records_dir(create=False)
    if folder is None:
        return None
    try:
        return read_record(folder, nonce)
    finally:
        os.close(folder)


def all_records() -> List[Recorded]:
    folder = records_dir(create=False)
    if folder is None:
        return []
    try:
        return [found for found in (read_record(folder, name) for name in os.listdir(folder))
                if found is not None]
    except OSError:
        return []
    finally:
        os.close(folder)
