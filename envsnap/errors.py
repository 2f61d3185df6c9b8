"""One small error hierarchy; cli.py maps each class to an exit code in one place.

Exit codes (the CLI contract, DESIGN.md section 2):
  0  ok / no drift
  1  drift or regression found (not an error: a result)
  2  usage error: bad arguments, bad label, existing label, store not writable
  3  host unreachable, refused, or partly failed (some collectors or hosts failed);
     a benchmark run that failed or printed no metric
  4  invalid snapshot or playbook
"""


class EnvsnapError(Exception):
    """Base of every error envsnap reports; the message is one line for a person."""

    exit_code = 2


class UsageError(EnvsnapError):
    exit_code = 2


class StoreError(EnvsnapError):
    """The snapshot store cannot be read or written as asked."""

    exit_code = 2


class HostError(EnvsnapError):
    """A host could not be reached or could not run the agent."""

    exit_code = 3


class BenchError(HostError):
    """A benchmark run failed on the host: non-zero exit, timed out, or no metric printed.

    Exit 3 like any failure found on the host: exit 2 is kept for what is refused before
    anything runs (a bad --metric regex, a bad label)."""


class SnapshotError(EnvsnapError):
    """A snapshot (or playbook) file is missing, corrupt, or of an unknown schema."""

    exit_code = 4


class PlaybookError(SnapshotError):
    """A playbook that cannot run: YAML error, unknown module or argument, undefined variable.

    The message starts with `file:line:` so an editor can jump to it.
    """


EXIT_OK = 0
EXIT_DRIFT = 1
EXIT_USAGE = UsageError.exit_code
EXIT_HOST = HostError.exit_code
EXIT_INVALID = SnapshotError.exit_code
