"""What the top-level handler does with an error that is envsnap's own fault (a bug): one
line for the person, the traceback in a crash log under the user's state dir for the bug
report. Nothing here may raise: it runs while another error is being handled."""
from __future__ import annotations

import os
import sys
from datetime import datetime, timezone
from pathlib import Path

from envsnap import __version__

CRASH_LOG_MODE = 0o600   # a traceback can hold hosts, paths and arguments: the user's only
MESSAGE_MAX = 300        # one line on a terminal, not a page of repr


def state_dir() -> Path:
    """$XDG_STATE_HOME/envsnap, else ~/.local/state/envsnap (the XDG base directory spec:
    a relative $XDG_STATE_HOME is invalid and ignored)."""
    base = os.environ.get("XDG_STATE_HOME", "")
    root = Path(base) if os.path.isabs(base) else Path.home() / ".local" / "state"
    return root / "envsnap"


def one_line(error: BaseException) -> str:
    """`ExceptionType: message`, the message folded onto one line."""
    message = " ".join(str(error).split())
    if len(message) > MESSAGE_MAX:
        message = message[:MESSAGE_MAX - 3] + "..."
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def write_crash_log(error: BaseException, argv: list[str]) -> Path:
    """The traceback and what ran, in a new file named by the time; raises OSError."""
    import traceback  # only a crash pays for it

    from envsnap.agent.redact import redact_argv  # a crash log may be attached to a bug report

    folder = state_dir()
    folder.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    path = folder / f"crash-{stamp}-{os.getpid()}.log"
    trace = traceback.format_exception(type(error), error, error.__traceback__)  # 3.9 form
    text = (f"envsnap {__version__}, python {sys.version.split()[0]}, {sys.platform}\n"
            f"argv: {redact_argv(argv)!r}\n\n" + "".join(trace))
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, CRASH_LOG_MODE)
    with os.fdopen(descriptor, "w", encoding="utf-8") as log:
        log.write(text)
    return path


def internal_error_line(error: BaseException, argv: list[str]) -> str:
    """The one line the user sees; the traceback goes to the crash log when it can."""
    try:
        where = f"details in {write_crash_log(error, argv)}"
    except OSError as exc:   # a read-only home must not turn one bug into two tracebacks
        where = f"no crash log: {exc.strerror or exc}; rerun with ENVSNAP_DEBUG=1 to see it"
    return f"envsnap: internal error: {one_line(error)} ({where})"
