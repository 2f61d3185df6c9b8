"""A live status line for long commands (bench, bisect, explain): run i of N (explain: trial
i, invocations used of its bound), elapsed, ETA.

On a terminal the status sits on the last line of stderr and is rewritten in place (\\r) every
second and whenever a run ends; the lines a command prints for good (each run as it ends, a
bisect step) go above it. Anywhere else (a log, CI, a pipe) nothing is rewritten: only those
lines are written, as they were, one per line.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Callable, TextIO

from envsnap.cli.output import control

CLEAR = "\r\x1b[K"     # back to the start of the line and erase it
TICK_SECONDS = 1.0


def duration(seconds: float) -> str:
    """41s, 3m05s, 2h07m."""
    whole = max(0, int(round(seconds)))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


@dataclass(frozen=True)
class Tally:
    """Where the runs stand: `total` None while unknown, `estimated` when it may change."""

    done: int
    total: int | None
    estimated: bool
    elapsed: float          # seconds since the command started
    last_end: float         # seconds from the start to the end of the last run (0: none yet)


def eta_seconds(tally: Tally) -> float | None:
    """Time left at the pace of the runs so far; None before the first run ends."""
    if tally.done == 0 or tally.total is None:
        return None
    pace = tally.last_end / tally.done
    left = pace * max(tally.total - tally.done, 0) - (tally.elapsed - tally.last_end)
    return max(left, 0.0)


def status_text(tally: Tally) -> str:
    """"run 3 of 5, 1m02s elapsed, ETA ~41s"."""
    running = tally.done + 1 if tally.total is None or tally.done < tally.total else tally.done
    of = "" if tally.total is None else f" of {'~' if tally.estimated else ''}{tally.total}"
    eta = eta_seconds(tally)
    tail = "ETA after the first run" if eta is None and tally.total is not None else \
        "" if eta is None else f"ETA ~{duration(eta)}"
    return ", ".join(part for part in (f"run {running}{of}", f"{duration(tally.elapsed)} "
                                       "elapsed", tail) if part)


class StatusLine:
    """Counts runs and shows the status on a terminal; a context manager that stops its clock
    and erases the status when the command ends, whatever way it ends."""

    def __init__(self, stream: TextIO, prefix: str, total: int | None,
                 clock: Callable[[], float] = time.monotonic,
                 text: Callable[[Tally], str] = status_text) -> None:
        self.stream, self.prefix, self.clock, self.text = stream, prefix, clock, text
        self.live = stream.isatty()
        self.total, self.estimated = total, False
        self.started = clock()
        self.done, self.last_end = 0, 0.0
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.ticker: threading.Thread | None = None

    def __enter__(self) -> StatusLine:
        if self.live:
            self.ticker = threading.Thread(target=self.tick, name="status-line", daemon=True)
            self.ticker.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.stopped.set()
        if self.ticker is not None:
            self.ticker.join()
        if self.live:
            with self.lock:
                control(self.stream, CLEAR)
                self.stream.flush()

    def tally(self) -> Tally:
        return Tally(self.done, self.total, self.estimated, self.clock() - self.started,
                     self.last_end)

    def tick(self) -> None:
        while not self.stopped.wait(TICK_SECONDS):
            with self.lock:
                self.draw()

    def draw(self) -> None:
        """Under the lock."""
        if self.live:
            control(self.stream, CLEAR)
            self.stream.write(self.prefix + self.text(self.tally()))
            self.stream.flush()

    def say(self, line: str, stream: TextIO | None = None) -> None:
        """A line for good (on `stream`, stderr by default), above the status."""
        target = stream or self.stream
        with self.lock:
            if self.live:
                control(self.stream, CLEAR)
                self.stream.flush()
            target.write(line + "\n")
            target.flush()
            self.draw()

    def run_ended(self, line: str, stream: TextIO | None = None) -> None:
        """One more of what is counted (a run; explain: an invocation), and its line."""
        with self.lock:
            self.done += 1
            self.last_end = self.clock() - self.started
        self.say(line, stream)

    def expect(self, total: int, estimated: bool) -> None:
        with self.lock:
            self.total, self.estimated = total, estimated
