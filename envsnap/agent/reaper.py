"""Every process the agent starts on a host (a benchmark run, a --serve server) is marked,
so that none outlives it, even one that left its process group and session (`setsid`).

The mark is a variable in the environment, ENVSNAP_OWNER=<agent pid>:<its start time>:<role>,
which every process inherits from the one that started it and keeps when it starts a session
of its own; /proc/<pid>/environ shows it (for this user's processes, which is all the agent
starts). No cgroup is made: a user's cgroup cannot be made without systemd or root on most
hosts, and the mark needs neither. A process that clears its own environment loses the mark;
one that keeps the standard environment (every server and worker seen so far) is found.

Two reapers use it:
- the agent itself: once a run's group or the server's group is stopped, every process still
  marked with that run's or that server's mark is stopped too (`stop_marked`); this covers
  every way out the agent lives through: runs done, a failure, Ctrl-C, and the controller
  killed with -9 (the lifeline ends, benchrun.py), which is the agent's own watchdog;
- the next agent that runs a benchmark on the host: an agent killed with -9 itself (or its
  host's session torn down under it) leaves marked processes whose owner is gone; they are
  stopped before that benchmark starts (`reap_orphans`), so they neither linger past the
  next envsnap benchmark on that host nor skew its runs. An owner is gone when no process
  has its pid with its start time (a pid reused by another process is no owner).
"""
from __future__ import annotations

import os
import signal
import time
from typing import Callable, Dict, List, Optional

OWNER_VARIABLE = "ENVSNAP_OWNER"
_ENTRY = OWNER_VARIABLE.encode() + b"="
POLL = 0.05


def start_time(pid: int) -> Optional[str]:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat), or
    None when there is no such process."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2:].split()   # the name may hold spaces and ')'
    return fields[19].decode() if len(fields) > 19 else None


def own_mark(role: str) -> str:
    pid = os.getpid()
    return "%d:%s:%s" % (pid, start_time(pid), role)


def marked(env: Dict[str, str], mark: str) -> Dict[str, str]:
    return dict(env, **{OWNER_VARIABLE: mark})


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


def owner_alive(mark: str) -> bool:
    """The agent that marked it runs still: its pid, with its start time, and no zombie (a
    killed agent whose parent died too stays a zombie where pid 1 reaps nothing, as in some
    containers, with its pid and start time as they were)."""
    pid, _, rest = mark.partition(":")
    started = rest.partition(":")[0]
    return pid.isdigit() and start_time(int(pid)) == started and not ended(int(pid))


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


def stop_marked(mark: str, grace: float = 0.0) -> List[int]:
    """Stop every process still carrying `mark` (the agent's own run or server)."""
    return stop_while_found(lambda found: found == mark, grace)


def reap_orphans(grace: float = 0.0) -> List[int]:
    """Stop every marked process whose owning agent is gone."""
    return stop_while_found(lambda found: not owner_alive(found), grace)


def stop_while_found(chosen: Callable[[str], bool], grace: float) -> List[int]:
    stopped: List[int] = []
    quiet = 0
    for _ in range(ROUNDS + 1):
        pids = [pid for pid, found in marks().items() if chosen(found) and not ended(pid)]
        if pids:
            quiet = 0
            stopped += stop(pids, grace)
            continue
        quiet += 1
        if quiet == 2:
            break
        time.sleep(SETTLE)
    return stopped
