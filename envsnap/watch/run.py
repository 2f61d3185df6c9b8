"""The watcher's loop: a capture of each host at start and every period; on this machine
also a capture once a new process matching a --proc pattern has settled (its env is read
at its start: a worker restarted with another env leaves both on record). Each capture is
handed to the sink with its reason; one that fails (the host unreachable, the store full)
is counted and said in the status, and the host is captured again at the next period: a
failure never ends the watcher. It ends at `stop` (the CLI sets it on SIGTERM), after
--for, or after one round with --once.

It reads processes, never acts on one: no worker is signalled, restarted or touched.
"""
from __future__ import annotations

import os
import resource
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from envsnap.errors import EnvsnapError
from envsnap.hosts.agentconfig import CaptureOptions
from envsnap.hosts.capture import snapshot_document
from envsnap.hosts.connect import open_transport
from envsnap.hosts.inventory import Host
from envsnap.snapshot.records import Snapshot
from envsnap.snapshot.store import label_from_name
from envsnap.text import name_stamp, now_utc
from envsnap.watch.period import period_text
from envsnap.watch.procstarts import ProcessStarts
from envsnap.watch.status import CaptureRun, WatchStatus, watcher_name

Sink = Callable[[Snapshot, str], object]          # the document and why it was made
Capture = Callable[[Host], Snapshot]
STARTED = "watch started"
SETTLE_SECONDS = 1.0   # a worker's start to its capture: its launcher may still set its env
POLL_SECONDS = 1.0     # how often the kernel's last pid is looked at: with the settle, a
                       # worker is captured 1 to 2 s after its start


@dataclass(frozen=True)
class WatchPlan:
    hosts: tuple[Host, ...]
    every: float                      # seconds between scheduled captures
    once: bool = False                # one round of captures, then end
    reason: str = STARTED             # the first round's reason (--once --reason: a job's)
    duration: float | None = None     # --for: end after this many seconds
    settle: float = SETTLE_SECONDS
    poll: float = POLL_SECONDS

    @property
    def name(self) -> str:
        return watcher_name([host.name for host in self.hosts])

    @property
    def local(self) -> Host | None:
        """The watched host that is this machine, whose process starts are watched."""
        return next((host for host in self.hosts if host.is_local), None)

    def patterns(self) -> list[str]:
        local = self.local
        return local.list_var("procs") if local is not None else []


def cpu_now() -> tuple[float, float]:
    """(this process's CPU seconds, its waited-for children's), user and system together:
    getrusage's microseconds, not os.times()'s clock ticks (a hundredth of a second is more
    than an idle watcher spends in a minute)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@dataclass
class Watcher:
    """The loop's state, and the status it writes after each capture (`on_status`)."""

    plan: WatchPlan
    capture: Capture
    sink: Sink
    on_status: Callable[[WatchStatus], None]
    stop: threading.Event = field(default_factory=threading.Event)
    clock: Callable[[], float] = time.monotonic
    started_at: float = field(default_factory=time.time)
    started_cpu: tuple[float, float] = field(default_factory=cpu_now)
    started_clock: float = 0.0
    captures: int = 0
    failures: int = 0
    capture_cpu: float = 0.0
    last: CaptureRun | None = None
    last_failure: CaptureRun | None = None
    starts: ProcessStarts | None = None

    def status(self, running: bool = True) -> WatchStatus:
        own, children = cpu_now()
        return WatchStatus(
            name=self.plan.name, hosts=tuple(host.name for host in self.plan.hosts),
            pid=os.getpid(), every=self.plan.every, started_at=self.started_at,
            updated_at=time.time(), running=running, captures=self.captures,
            failures=self.failures, last=self.last, last_failure=self.last_failure,
            wall_seconds=self.clock() - self.started_clock,
            cpu_seconds=own - self.started_cpu[0],
            children_cpu_seconds=children - self.started_cpu[1],
            capture_cpu_seconds=self.capture_cpu,
            new_processes=self.starts.examined if self.starts is not None else 0)

    def capture_one(self, host: Host, reason: str) -> CaptureRun:
        """Capture `host` and hand it to the sink; a failure is returned, never raised."""
        at, began, cpu_before = time.time(), self.clock(), sum(cpu_now())
        error = None
        try:
            self.sink(self.capture(host), reason)
        except EnvsnapError as exc:
            error = str(exc)
        except Exception as exc:   # a surprise in one capture must not end a day's watch
            error = f"{host.name}: {type(exc).__name__}: {exc}"
        cpu = sum(cpu_now()) - cpu_before
        run = CaptureRun(host=host.name, reason=reason, at=at, seconds=self.clock() - began,
                         cpu_seconds=cpu, error=error)
        self.captures += 1
        self.capture_cpu += cpu
        self.last = run
        if error is not None:
            self.failures += 1
            self.last_failure = run
        self.on_status(self.status())
        return run

    def capture_all(self, reason: str) -> list[CaptureRun]:
        return [self.capture_one(host, reason) for host in self.plan.hosts
                if not self.stop.is_set()]

    def run(self) -> list[CaptureRun]:
        """Watch until stopped, --for has passed or --once has captured; every capture made."""
        plan = self.plan
        self.started_clock = self.clock()
        starts = self.starts = ProcessStarts(plan.patterns()) \
            if plan.local and plan.patterns() and not plan.once else None
        end = self.started_clock + plan.duration if plan.duration is not None else None
        runs = self.capture_all(plan.reason)
        due = self.started_clock + plan.every
        pending: dict[int, float] = {}   # new workers -> when they were seen
        try:
            while not plan.once and not self.stop.is_set():
                now = self.clock()
                if end is not None and now >= end:
                    break
                if now >= due:
                    runs += self.capture_all(f"every {period_text(plan.every)}")
                    due = max(due + plan.every, self.clock())
                if starts is not None:
                    for started in starts.poll():
                        pending.setdefault(started.pid, now)
                    if pending and now >= min(pending.values()) + plan.settle:
                        assert plan.local is not None
                        runs.append(self.capture_one(plan.local, started_reason(pending)))
                        pending.clear()
                self.stop.wait(self.wait_seconds(due, end, pending))
        finally:
            self.on_status(self.status(running=False))
            if starts is not None:
                starts.close()
        return runs

    def wait_seconds(self, due: float, end: float | None, pending: dict[int, float]) -> float:
        now = self.clock()
        moments = [due] + ([end] if end is not None else []) + \
            ([min(pending.values()) + self.plan.settle] if pending else [])
        nearest = max(0.0, min(moments) - now)
        if self.plan.local is not None and self.plan.patterns():
            return min(nearest, self.plan.poll)
        return nearest


def started_reason(pending: dict[int, float]) -> str:
    pids = sorted(pending)
    if len(pids) == 1:
        return f"process {pids[0]} started"
    return f"processes {', '.join(str(pid) for pid in pids)} started"


def capture_document(host: Host, options: CaptureOptions) -> Snapshot:
    """One capture of `host` as a document, not saved in the store's labelled snapshots
    (the sink keeps it): the capture path every command takes (hosts/capture.py)."""
    label = f"watch-{label_from_name(host.name)}-{name_stamp(now_utc())}"
    with open_transport(host, options.connect_timeout,
                        options.accept_new_host_keys) as transport:
        return snapshot_document(transport, host, label, options)

