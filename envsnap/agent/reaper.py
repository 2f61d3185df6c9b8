"""Every process the agent starts on a host (a benchmark run, a --serve server) is marked,
so that none outlives it, even one that left its process group and session (`setsid`).

The mark is a variable in the environment, ENVSNAP_OWNER (owners.py says what it holds and
why), which every process inherits from the one that started it and keeps when it starts a
session of its own; /proc/<pid>/environ shows it. No cgroup is made: a user's cgroup cannot
be made without systemd or root on most hosts, and the mark needs neither. A process that
clears its own environment loses the mark; one that keeps the standard environment (every
server and worker seen so far) is found.

Two reapers use it, and both stop only what the agent itself started (owners.py: the same
boot, PID namespace and uid as the mark and the reaper, a record of the mark, and a marked
process hanging from the agent or one of its ancestors): never a container's process, one
of another uid, or a process a launcher (srun, sbatch, mpirun -x, ssh) gave a copy of the
mark.
- the agent itself: once a run's group or the server's group is stopped, every process still
  marked with that run's or that server's mark is stopped too (`stop_marked`), and the
  mark's record removed; this covers every way out the agent lives through: runs done, a
  failure, Ctrl-C, and the controller killed with -9 (the lifeline ends, benchrun.py), which
  is the agent's own watchdog;
- the next agent that runs a benchmark on the host: an agent killed with -9 itself (or its
  host's session torn down under it) leaves marked processes whose owner is gone, and
  their record; they are stopped before that benchmark starts (`reap_orphans`), so they
  neither linger past the next envsnap benchmark on that host nor skew its runs. An owner
  is gone when no process has its pid with its start time (a pid reused by another process
  is no owner).
"""
from __future__ import annotations

import os
import signal
import socket
import time
from typing import Callable, Dict, List, Optional, Tuple

from . import owners
from .owners import OWNER_VARIABLE, Identity, Mark, Owner, start_time

_ENTRY = OWNER_VARIABLE.encode() + b"="
POLL = 0.05


def own_mark(role: str) -> Owner:
    """A mark of this agent for one run or server, and its record."""
    return owners.new_owner(role)


def marked(env: Dict[str, str], owner: Owner) -> Dict[str, str]:
    return dict(env, **{OWNER_VARIABLE: owner.mark.text()})


def mark_of(pid: int) -> Optional[str]:
    """The mark in the process's environment, or None (unmarked, gone, or not ours)."""
    try:
        with open("/proc/%d/environ" % pid, "rb") as handle:
            environ = handle.read()
    except OSError:
        return None
    for entry in environ.split(b"\0"):
        if entry.startswith(_ENTRY):
            return entry[len(_ENTRY):].decode("utf-8", "replace")
    return None


def marks() -> Dict[int, str]:
    """{pid: mark} of every marked process this user can see, the agent itself left out."""
    found = {}
    me = os.getpid()
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != me:
            mark = mark_of(int(name))
            if mark is not None:
                found[int(name)] = mark
    return found


def owner_alive(mark: Mark) -> bool:
    """The agent that marked it runs still: its pid, with its start time, and no zombie (a
    killed agent whose parent died too stays a zombie where pid 1 reaps nothing, as in some
    containers, with its pid and start time as they were)."""
    return start_time(mark.pid) == mark.started and not ended(mark.pid)


def anchor(pid: int, text: str) -> Optional[Tuple[int, str]]:
    """(pid, start time) of the parent of the topmost process above `pid` that carries the
    same mark `text`: the process its marked subtree hangs from (owners.py). None when the
    chain breaks (a process gone meanwhile: the next round looks again)."""
    for _ in range(owners.MAX_DEPTH):
        above = owners.parent(pid)
        if above is None or above == 0:
            return None
        if mark_of(above) != text:
            started = start_time(above)
            return None if started is None else (above, started)
        pid = above
    return None


def belongs(pid: int, text: str, owner: Owner) -> bool:
    """The process carrying `text`, the owner's mark, is one the owner started: in the
    mark's namespace, of its uid, and hanging from the owner or one of its ancestors."""
    mine = owner.mark.identity   # a namespace /proc does not show is 0 there, None here
    return (text == owner.mark.text()
            and owners.pid_namespace(str(pid)) == (mine.pid_namespace or None)
            and owners.real_uid(pid) == mine.uid and anchor(pid, text) in owner.lineage)


def ended(pid: int) -> bool:
    """Gone, or a zombie (it has ended; only its parent's wait is missing)."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as handle:
            stat = handle.read()
    except OSError:
        return True
    return stat[stat.rfind(b")") + 2:][:1] == b"Z"


def group_ended(group: int) -> bool:
    """Every process of process group `group` has ended: none left, or only zombies (a
    pid 1 that reaps nothing, as in a container without an init, leaves an orphaned
    server's zombie there, and kill(0) still finds its group). False where /proc cannot
    tell (not Linux): the caller's signal probe decides."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return False
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as handle:
                stat = handle.read()
        except OSError:
            continue                     # gone meanwhile
        fields = stat[stat.rfind(b")") + 2:].split()   # state, ppid, pgrp, ...
        if len(fields) > 2 and fields[2] == str(group).encode() and fields[0] != b"Z":
            return False
    return True


def stop(pids: List[int], grace: float) -> List[int]:
    """SIGTERM, up to `grace` seconds for them to end, then SIGKILL; the pids signalled."""
    signalled = [pid for pid in pids if send(pid, signal.SIGTERM if grace > 0 else
                                             signal.SIGKILL)]
    deadline = time.monotonic() + grace
    while grace > 0 and time.monotonic() < deadline and not all(map(ended, signalled)):
        time.sleep(POLL)
    for pid in signalled:
        if not ended(pid):
            send(pid, signal.SIGKILL)
    return signalled


def send(pid: int, signum: int) -> bool:
    try:
        os.kill(pid, signum)
    except OSError:   # gone meanwhile, or not ours
        return False
    return True


ROUNDS = 5   # a marked process may start another while it is being stopped: look again
# A process in the middle of an exec (a `setsid cmd &` a run started as it ended) shows no
# environment for a moment, so no mark: nothing is taken as gone until two looks agree.
SETTLE = 0.02


def stop_marked(owner: Owner, grace: float = 0.0) -> List[int]:
    """Stop every process still carrying the owner's mark (the agent's own run or server)
    that the agent started, then remove the mark's record."""
    try:
        return stop_while_found(lambda pid, text: belongs(pid, text, owner), grace)
    finally:
        owners.forget(owner)


def reap_orphans(grace: float = 0.0) -> List[int]:
    """Stop every process the agent of a recorded mark started whose agent is gone, then
    remove the records of gone agents of this boot, namespace and uid."""
    here = owners.identity()
    if not here.known:
        return []
    known: Dict[str, Optional[Owner]] = {}   # nonce: its record's owner, read once

    def orphan(pid: int, text: str) -> bool:
        mark = owners.parse(text)
        if mark is None or mark.identity != here or owner_alive(mark):
            return False
        if mark.nonce not in known:
            found = owners.recorded(mark.nonce)
            known[mark.nonce] = found.owner if found is not None else None
        owner = known[mark.nonce]
        return owner is not None and owner.mark == mark and belongs(pid, text, owner)

    stopped = stop_while_found(orphan, grace)
    owners.remove_records(gone_records(here))
    return stopped


def gone_records(here: Identity) -> List[str]:
    """The records no process can be acted on for any more: those of this boot, namespace
    and uid whose agent is gone (what they cover was just stopped), and those this host
    left in an earlier boot. Another namespace's records are its own reapers' (its agents
    cannot be told from here); another host's (a home shared over NFS) are that host's."""
    hostname = socket.gethostname()
    gone = []
    for found in owners.all_records():
        mark = found.owner.mark
        if mark.identity == here and not owner_alive(mark):
            gone.append(mark.nonce)
        elif found.hostname == hostname and mark.identity.boot_id != here.boot_id:
            gone.append(mark.nonce)
    return gone


def stop_while_found(chosen: Callable[[int, str], bool], grace: float) -> List[int]:
    stopped: List[int] = []
    quiet = 0
    for _ in range(ROUNDS + 1):
        pids = [pid for pid, found in marks().items()
                if chosen(pid, found) and not ended(pid)]
        if pids:
            quiet = 0
            stopped += stop(pids, grace)
            continue
        quiet += 1
        if quiet == 2:
            break
        time.sleep(SETTLE)
    return stopped
