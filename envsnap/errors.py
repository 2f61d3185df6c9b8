"""One small error hierarchy and the exit codes, defined here once; the CLI's top-level
handler (envsnap/cli/main.py) maps each error class to its code.

Exit codes (the CLI contract, the README's "Exit codes" table):
  0   ok / no drift
  1   drift or regression found (not an error: a result)
  2   usage error: bad arguments, bad label, existing label, store not writable
  3   host unreachable, refused, or partly failed (some collectors or hosts failed);
      a benchmark run that failed or printed no metric
  4   invalid snapshot or playbook
  70  internal error: a bug in envsnap (one line; the traceback goes to a crash log)
  130 interrupted (Ctrl-C), as a shell reports a process ended by SIGINT
"""
from __future__ import annotations

EXIT_OK = 0
EXIT_DRIFT = 1
EXIT_USAGE = 2
EXIT_HOST = 3
EXIT_INVALID = 4
EXIT_INTERNAL = 70       # sysexits.h's EX_SOFTWARE: an error that is envsnap's own fault
EXIT_INTERRUPTED = 130   # 128 + SIGINT, what a shell shows for a process ended by Ctrl-C


class EnvsnapError(Exception):
    """Base of every error envsnap reports; the message is one line for a person."""

    exit_code = EXIT_USAGE


class UsageError(EnvsnapError):
    exit_code = EXIT_USAGE


class StoreError(EnvsnapError):
    """The snapshot store cannot be read or written as asked."""

    exit_code = EXIT_USAGE


class HostError(EnvsnapError):
    """A host could not be reached or could not run the agent."""

    exit_code = EXIT_HOST


class BenchError(HostError):
    """A benchmark run failed on the host: non-zero exit, timed out, or no metric printed.

    EXIT_HOST like any failure found on the host: EXIT_USAGE is kept for what is refused
    before anything runs (a bad --metric regex, a bad label)."""


class SnapshotError(EnvsnapError):
    """A snapshot (or playbook) file is missing, corrupt, or of an unknown schema."""

    exit_code = EXIT_INVALID


class PlaybookError(SnapshotError):
    """A playbook that cannot run: YAML error, unknown module or argument, undefined variable.

    The message starts with `file:line:` so an editor can jump to it.
    """


class ArgError(PlaybookError):
    """A task module (or the host operation under it) was given arguments it cannot use; the
    playbook engine adds the playbook's file:line."""


class YamlError(EnvsnapError):
    """A YAML file envsnap will not read (envsnap/yamlread.py): `line` where it was met, or
    None, and a one-line `reason`. Each reader words it and raises its own class."""

    def __init__(self, line: int | None, reason: str) -> None:
        super().__init__(f"{line}: {reason}" if line else reason)
        self.line, self.reason = line, reason
