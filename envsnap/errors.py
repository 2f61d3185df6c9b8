"""One small error hierarchy and the exit codes (ExitCode), defined here once; the CLI's
top-level handler (envsnap/cli/main.py) maps each error class to its code.

Exit codes (the CLI contract, the "Exit codes" table of docs/guide/reference.md):
  0   ok / no drift
  1   drift or regression found (not an error: a result)
  2   usage error: bad arguments, bad label, existing label, store not writable
  3   host unreachable, refused, or partly failed (some collectors or hosts failed);
      a benchmark run that failed or printed no metric
  4   invalid snapshot or playbook
  5   declined: the person answered no at a question (apply, start, adopt, the label of a
      foreign snapshot), or a question needed an answer nobody was there to give (no
      terminal, no --yes or --trust-foreign); nothing was changed. Apart from 2 so a script
      tells "not now" from "wrong", as git's prompts end in a status of their own
  6   the answer was given, but the host could not be put back entirely (bisect, explain):
      the message says what is left and the commands that finish it; the user's work is safe
  70  internal error: a bug in envsnap (one line; the traceback goes to a crash log)
  130 interrupted (Ctrl-C), as a shell reports a process ended by SIGINT; in the middle of a
      restore, bisect or explain, with where the host stands and the one way on or back
"""
from __future__ import annotations

from enum import IntEnum

from envsnap.agent import exits as agent_exits


class ExitCode(IntEnum):
    """envsnap's exit statuses (the contract above), then those it reads from a host."""

    OK = 0
    DRIFT = 1
    USAGE = 2
    HOST = 3
    INVALID = 4
    DECLINED = 5         # a choice, not a fault: the one line says nothing changed
    PUT_BACK = 6         # answered, then the put-back stopped short: how to finish is said
    INTERNAL = 70        # sysexits.h's EX_SOFTWARE: an error that is envsnap's own fault
    INTERRUPTED = 130    # 128 + SIGINT, what a shell shows for a process ended by Ctrl-C
    # On the host, never envsnap's own status. The agent's are defined beside it
    # (agent/exits.py: it ships alone and cannot import this module); the others come from
    # the command that starts it (hosts/payload.py) and from the shell.
    AGENT_PYTHON_TOO_OLD = agent_exits.PYTHON_TOO_OLD
    AGENT_NOT_CACHED = 91        # the agent is not in the host's cache yet: ship it first
    COMMAND_NOT_FOUND = 127      # the shell's: no such interpreter on the host


# The names before ExitCode, kept for the tests that import them.
EXIT_OK, EXIT_DRIFT, EXIT_USAGE = ExitCode.OK, ExitCode.DRIFT, ExitCode.USAGE
EXIT_HOST, EXIT_INVALID = ExitCode.HOST, ExitCode.INVALID
EXIT_INTERNAL, EXIT_INTERRUPTED = ExitCode.INTERNAL, ExitCode.INTERRUPTED


class EnvsnapError(Exception):
    """Base of every error envsnap reports; the message is one line for a person."""

    exit_code: int = ExitCode.USAGE


class UsageError(EnvsnapError):
    exit_code = ExitCode.USAGE


class DeclinedError(EnvsnapError):
    """A question was answered no, or could not be asked: nothing was changed. The message
    says what was left alone and how to say yes from a script; the CLI prefixes `declined:`."""

    exit_code = ExitCode.DECLINED


class Interrupted(EnvsnapError):
    """Ctrl-C in the middle of a change to a host: the message says where the host stands and
    the one command that finishes or rolls back; the CLI prefixes `interrupted:`."""

    exit_code = ExitCode.INTERRUPTED


class StoreError(EnvsnapError):
    """The snapshot store cannot be read or written as asked."""

    exit_code = ExitCode.USAGE


class DamagedHistoryError(StoreError):
    """A record of the history (envsnap/history/) whose part or manifest is missing or is
    not what its name promises: corrupt data, as a damaged snapshot is."""

    exit_code = ExitCode.INVALID


class HostError(EnvsnapError):
    """A host could not be reached or could not run the agent."""

    exit_code = ExitCode.HOST


class PutBackError(HostError):
    """bisect or explain found its answer (printed first), then could not put the host back
    entirely; the message says what is left, where the answer is kept (the run's journal)
    and, last, the exact commands that finish it."""

    exit_code = ExitCode.PUT_BACK

    def __init__(self, what: str, finish: tuple[str, ...] = (), kept_in: str = "") -> None:
        self.what, self.finish, self.kept_in = what, finish, kept_in
        super().__init__(what + (f"; the answer and every trial are in {kept_in}" if kept_in
                                 else "")
                         + (f"; to finish: {' && '.join(finish)}" if finish else ""))


class BenchError(HostError):
    """A benchmark run failed on the host: non-zero exit, timed out, or no metric printed.

    ExitCode.HOST like any failure found on the host: USAGE is kept for what is refused
    before anything runs (a bad --metric regex, a bad label)."""


class SnapshotError(EnvsnapError):
    """A snapshot (or playbook) file is missing, corrupt, or of an unknown schema."""

    exit_code = ExitCode.INVALID


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
