"""The processes of this machine started since the last look whose command line matches a
--proc pattern: what makes the watcher capture a worker's env at its start.

Cheap by construction, since it runs all day: the kernel's last allocated pid
(/proc/loadavg's last field) is read at each poll, and /proc is listed only when it moved;
then only pids not seen before are read (their command line), so an idle host costs one
small read per poll. envsnap's own processes never count: the watcher's descendants (its
captures' agents) and any envsnap command line (agent/env.py's rule), whatever the pattern:
the watcher's own command line holds the pattern it was given.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from envsnap.agent.env import (
    compile_patterns,
    is_envsnap_command,
    matching_pattern,
    parse_cmdline,
    parse_stat,
)
from envsnap.errors import UsageError

if TYPE_CHECKING:
    from envsnap.agent.env import Matcher

MAX_DEPTH = 4096   # the deepest parent chain followed (a loop is no chain)


@dataclass(frozen=True)
class Started:
    """A new process that matched: its pid, command line and the pattern it matched."""

    pid: int
    argv: tuple[str, ...]
    pattern: str


def matchers_of(patterns: list[str]) -> list[Matcher]:
    """The --proc patterns compiled as a capture compiles them; one refused is a UsageError."""
    try:
        return compile_patterns(patterns)
    except ValueError as exc:   # agent.patterns.PatternRefused
        raise UsageError(str(exc)) from None


class ProcessStarts:
    """Polled by the watcher: each poll returns the matching processes started since the
    previous one (the first look, at construction, only takes note of what runs)."""

    def __init__(self, patterns: list[str], own_pid: int | None = None,
                 root: str = "/proc") -> None:
        self.matchers = matchers_of(patterns)
        self.own_pid = os.getpid() if own_pid is None else own_pid
        self.root = Path(root)
        self.examined = 0   # new pids read: what polling cost grows with on a busy host
        try:   # kept open: each poll is one pread, no open or close
            self.loadavg: int | None = os.open(self.root / "loadavg", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            self.loadavg = None
        self.last_pid = self.read_last_pid()
        self.seen = self.pids()

    def close(self) -> None:
        if self.loadavg is not None:
            os.close(self.loadavg)
            self.loadavg = None

    def read_last_pid(self) -> bytes:
        """The kernel's most recently allocated pid, as bytes (only compared); b"" when
        /proc/loadavg cannot be read, which makes every poll list /proc."""
        if self.loadavg is None:
            return b""
        try:
            return os.pread(self.loadavg, 256, 0).rsplit(None, 1)[-1]
        except (OSError, IndexError):
            return b""

    def pids(self) -> set[int]:
        try:
            return {int(name) for name in os.listdir(self.root) if name.isdigit()}
        except OSError:
            return set()

    def poll(self) -> list[Started]:
        last_pid = self.read_last_pid()
        if last_pid and last_pid == self.last_pid:
            return []
        self.last_pid = last_pid
        running = self.pids()
        new = sorted(running - self.seen)
        self.examined += len(new)
        self.seen = running   # gone pids are forgotten: a pid reused later is a new process
        return [started for pid in new if (started := self.matching(pid)) is not None]

    def matching(self, pid: int) -> Started | None:
        argv = self.argv(pid)
        if not argv or is_envsnap_command(argv):   # a kernel thread, gone, or envsnap's
            return None
        pattern = matching_pattern(argv, self.matchers)
        if pattern is None or self.descends_from_self(pid):
            return None
        return Started(pid, tuple(argv), pattern)

    def argv(self, pid: int) -> list[str]:
        try:
            descriptor = os.open(f"{self.root}/{pid}/cmdline", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return []
        try:   # a command line longer than this is cut: what a pattern looks for comes early
            return parse_cmdline(os.read(descriptor, 1 << 16))
        except OSError:
            return []
        finally:
            os.close(descriptor)

    def parent(self, pid: int) -> int:
        try:
            text = (self.root / str(pid) / "stat").read_bytes().decode("utf-8", "replace")
            return parse_stat(text)[0]
        except (OSError, ValueError, IndexError):
            return 0

    def descends_from_self(self, pid: int) -> bool:
        for _ in range(MAX_DEPTH):
            if pid == self.own_pid:
                return True
            if pid <= 1:
                return False
            pid = self.parent(pid)
        return False
