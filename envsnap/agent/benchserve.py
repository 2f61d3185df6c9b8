"""The managed server of bench mode: started before the runs, stopped after them, recorded.

A benchmark of an inference server measures the server as much as the client: its code, and
the environment it was started with. So the agent starts it itself (`--serve CMD`), in a
process group of its own, with the given env changes on top of the agent's environment;
waits until it is ready (a regex found in its output, or a URL that answers); reads the
environment it really runs with from /proc once ready, filtered and masked like a --proc
worker's (env.py); and after the runs stops the whole group: SIGTERM, a grace period, then
SIGKILL, and then every process still carrying the server's mark (reaper.py: a child that
left the group and session with setsid keeps it). Every way out (runs done, a run failed,
the server not ready in time or dead, the controller gone, Ctrl-C) goes through that stop:
nothing it started is left running; should the agent itself be killed with -9, the next
benchmark on the host stops what it left.

Config (bench mode's "serve"): {"cmd": str, "ready": regex or http(s):// URL,
                                "timeout": seconds to become ready, "env": [[name, value|null]]}
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import env as agent_env
from . import envnames, owners, reaper
from .patterns import PatternTimeout, checked, search_lines
from .util import escaped

DEFAULT_READY_TIMEOUT = 120.0
STOP_GRACE = 10.0             # seconds between SIGTERM and SIGKILL: a server flushes, unmaps
POLL = 0.1                    # seconds between readiness checks
TAIL_LINES = 12               # of the server's output, in an error
OUTPUT_BYTES = 64 * 1024      # of the server's output kept (the tail of a long log)
SCAN_BYTES = 256 * 1024       # of output not yet searched for the ready regex, at most
MATCHED = "envsnap --serve"   # a worker's "matched": started by envsnap, not found by --proc
Changes = Sequence[Sequence[Optional[str]]]


class ServeError(Exception):
    """The server could not be started or made ready; the message says why and shows its
    last output lines."""


def changed_env(base: Dict[str, str], changes: Changes) -> Dict[str, str]:
    """`base` with each (name, value) set and each (name, None) removed."""
    result = dict(base)
    for name, value in changes:
        if name is None:
            continue
        if value is None:
            result.pop(name, None)
        else:
            result[name] = value
    return result


def is_url(ready: str) -> bool:
    return ready.startswith(("http://", "https://"))


class Output:
    """The server's output (stdout and stderr together), read in a thread: a tail to show,
    and what was not yet searched for the ready regex."""

    def __init__(self, stream: Any) -> None:
        self.lock = threading.Lock()
        self.tail = bytearray()
        self.unsearched = bytearray()
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream: Any) -> None:
        for chunk in iter(lambda: stream.read1(OUTPUT_BYTES), b""):
            with self.lock:
                self.tail += chunk
                del self.tail[:-OUTPUT_BYTES]
                self.unsearched += chunk
                del self.unsearched[:-SCAN_BYTES]

    def take_lines(self) -> List[str]:
        """The lines not yet searched; an unfinished last line stays for the next look
        too, so a ready message split across reads is still found whole."""
        with self.lock:
            data = bytes(self.unsearched)
            done = data.rfind(b"\n") + 1
            del self.unsearched[:done]
        return escaped(data).splitlines()

    def last_lines(self) -> str:
        with self.lock:
            text = escaped(bytes(self.tail))
        lines = [line.rstrip() for line in text.splitlines() if line.strip()]
        return " | ".join(lines[-TAIL_LINES:]) or "(no output)"


def answers(url: str, timeout: float) -> bool:
    """The URL answers with a status below 500 (a 404 still means the server is up).
    No proxy: the server is on this host, and a proxy would answer for it."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=timeout) as response:
            return int(response.status) < 500
    except urllib.error.HTTPError as exc:
        return int(exc.code) < 500
    except (OSError, ValueError):   # refused, reset, timed out, not yet listening
        return False


class Server:
    """One managed server: start(), wait_ready(), describe(), stop(). stop() is safe to
    call at any point, more than once."""

    def __init__(self, config: Dict[str, Any], cwd: str) -> None:
        self.cmd = str(config["cmd"])
        self.ready = str(config["ready"])
        self.timeout = float(config.get("timeout") or DEFAULT_READY_TIMEOUT)
        self.grace = float(config.get("grace") or STOP_GRACE)
        self.changes: Changes = config.get("env") or []
        self.cwd = cwd
        self.proc: Optional["subprocess.Popen[bytes]"] = None
        self.output: Optional[Output] = None
        self.started = 0.0
        self.stopped: Optional[str] = None
        self.owner: Optional[owners.Owner] = None   # its mark, made as it starts

    def start(self) -> None:
        self.started = time.monotonic()
        self.owner = reaper.own_mark("server")
        try:
            self.proc = subprocess.Popen(
                ["sh", "-c", self.cmd], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, cwd=self.cwd, start_new_session=True,
                env=reaper.marked(changed_env(dict(os.environ), self.changes), self.owner))
        except OSError:
            reaper.stop_marked(self.owner)   # nothing started: its record goes
            raise
        self.output = Output(self.proc.stdout)

    @property
    def group(self) -> Optional[int]:
        return self.proc.pid if self.proc is not None else None

    def failure(self, why: str) -> ServeError:
        shown = self.output.last_lines() if self.output is not None else "(no output)"
        return ServeError("the server %s; its last output: %s" % (why, shown))

    def wait_ready(self, lost: threading.Event) -> float:
        """Seconds it took to become ready; ServeError if it exits first, takes longer than
        the timeout or the controller goes away (`lost`)."""
        assert self.proc is not None and self.output is not None
        pattern = None if is_url(self.ready) else checked(self.ready)
        deadline = self.started + self.timeout
        while True:
            if pattern is not None and self._found(pattern):
                break
            if pattern is None and answers(self.ready, max(0.2, min(2.0, deadline
                                                                  - time.monotonic()))):
                break
            self.check_alive("before it was ready")
            if lost.is_set():
                raise self.failure("was stopped: the controller went away")
            if time.monotonic() >= deadline:
                raise self.failure("was not ready after %gs (waiting for %s %r)" % (
                    self.timeout, "an answer from" if pattern is None else "output matching",
                    self.ready))
            time.sleep(POLL)
        return round(time.monotonic() - self.started, 3)

    def check_alive(self, when: str) -> None:
        """ServeError if the server has exited (it was to serve until stopped)."""
        code = self.proc.poll() if self.proc is not None else None
        if code is not None:
            if self.output is not None:
                self.output.thread.join(1.0)
            raise self.failure("exited %d %s" % (code, when))

    def _found(self, pattern: "re.Pattern[str]") -> bool:
        assert self.output is not None
        lines = self.output.take_lines()
        if not lines:
            return False
        try:
            return bool(search_lines([pattern], lines)[0])
        except PatternTimeout as exc:
            raise self.failure("could not be checked: the --ready regex %s" % exc) from None

    def main_pid(self, table: agent_env.ProcTable) -> int:
        """The server process: the group leader, or, when the shell did not exec the
        command, the one process each `sh -c CMD` started (its env is the server's)."""
        assert self.proc is not None
        pid = self.proc.pid
        children = table.children()
        while table.argv.get(pid) == ["sh", "-c", self.cmd] and len(children.get(pid, [])) == 1:
            pid = children[pid][0]
        return pid

    def describe(self) -> Tuple[int, Dict[str, Dict[str, Any]]]:
        """(the server's pid, {pid: worker facts}) for it and its descendants, the same facts
        a --proc worker has (env.py), with "role": "server"."""
        table = agent_env.ProcTable()
        main = self.main_pid(table)
        selector: envnames.Selector = (envnames.DEFAULT_PREFIXES, envnames.DEFAULT_NAMES)
        booted = agent_env.boot_epoch()
        tree = table.children()
        chosen = [(main, MATCHED)]
        for parent, _ in chosen:
            if len(chosen) >= agent_env.MAX_PROCESSES:
                break
            chosen += [(child, "child of %d" % parent) for child in tree.get(parent, [])]
        workers: Dict[str, Dict[str, Any]] = {}
        for pid, matched in chosen[:agent_env.MAX_PROCESSES]:
            if pid not in table.stat:
                continue   # gone since the scan
            worker = agent_env.describe_process(pid, table, selector, booted)
            worker.update(matched=matched, role="server")
            workers[str(pid)] = worker
        return main, workers

    def stop(self) -> Optional[str]:
        """SIGTERM to the group, up to `grace` seconds for all of it to end, then SIGKILL:
        "term" or "kill" (None if it never started)."""
        if self.proc is None or self.stopped is not None:
            return self.stopped
        group = self.proc.pid
        self.stopped = "kill"
        try:
            signal_group(group, signal.SIGTERM)
            deadline = time.monotonic() + self.grace
            while time.monotonic() < deadline:
                self.proc.poll()   # a zombie leader would keep the group alive
                if not group_alive(group):
                    self.stopped = "term"
                    break
                time.sleep(0.05)
        finally:   # a second Ctrl-C during the grace period still leaves nothing behind
            if self.stopped == "kill":
                signal_group(group, signal.SIGKILL)
            # what left the group (setsid) but kept the mark: a moment to end, as the group had
            if self.owner is not None:
                reaper.stop_marked(self.owner, grace=min(self.grace, 2.0))
            self.proc.wait()
            if self.output is not None:
                self.output.thread.join(1.0)
        return self.stopped


def signal_group(group: int, signum: int) -> None:
    try:
        os.killpg(group, signum)
    except (ProcessLookupError, PermissionError):
        pass   # already gone


def group_alive(group: int) -> bool:
    """A process of the group still runs. kill(0) alone would count a zombie as alive: a
    server forked by `sh -c` and orphaned when sh ends is reaped by pid 1 only, late (2 s
    here) or never (a container without an init), and the stop would wait out its grace
    and then report "kill" for a server that ended at once on SIGTERM."""
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not reaper.group_ended(group)


def record(server: Server, ready_after: float) -> Dict[str, Any]:
    """What the bench record keeps of the server (its env as the worker's: filtered,
    masked); "stopped" is filled in once it is stopped."""
    main, workers = server.describe()
    worker = workers.get(str(main)) or {}
    return {"command": server.cmd, "argv": worker.get("cmdline") or [], "pid": main,
            "ready_after_s": ready_after, "env": worker.get("env") or {}, "stopped": None,
            "workers": workers}


def check_ready(ready: str) -> Optional[str]:
    """Why a --ready value cannot be used, or None (the controller checks it first)."""
    if is_url(ready):
        return None
    try:
        checked(ready)
    except (re.error, OverflowError, RecursionError, ValueError) as exc:
        return "the --ready regex %r is refused: %s" % (ready, exc)
    return None
