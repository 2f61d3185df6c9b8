"""The CLI's one way to the terminal: every character written to stdout and stderr goes
through text.visible, so a control character that came from a snapshot, a host or a
repository (a commit subject, an env value, a recorded command, an agent's error) is shown as
its escape and never acts (a carriage return and erase-line rewriting a review, a window
title, an OSC 52 clipboard write). main() wraps both streams for the whole command, so no
command, renderer or error line can forget it.

What envsnap writes itself to steer the terminal passes by name: diff's colour codes (a fixed
set, `OWN_COLOURS`: they colour text, never hide or move it), and the status line's
rewrite-in-place, which goes through `control()` and is never data.

`columns()` is the width every text for a person is folded to (envsnap/fold.py), decided
here once and handed down: the library never asks the terminal.
"""
from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from envsnap.fold import DEFAULT_WIDTH
from envsnap.text import visible

OWN_COLOURS = re.compile(r"\x1b\[(?:0|1|2|31|33)m")   # diff/render_text.py's RED ... RESET
# Narrower, a table's first columns leave a value no room: COLUMNS=20 gets 40.
MIN_COLUMNS = 40


def columns() -> int:
    """The width to fold to: COLUMNS when it is a positive number (as
    shutil.get_terminal_size reads it), else the terminal's when stdout is one, else 80 (a
    pipe, a file, a test). stdout itself is asked, not the process's first one
    (sys.__stdout__, shutil's): a command's output captured is not a terminal's."""
    try:
        asked = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        asked = 0
    if asked <= 0:
        try:
            asked = (os.get_terminal_size(sys.stdout.fileno()).columns or DEFAULT_WIDTH) \
                if sys.stdout.isatty() else DEFAULT_WIDTH
        except (AttributeError, ValueError, OSError):   # no file behind it: a capture
            asked = DEFAULT_WIDTH
    return max(asked, MIN_COLUMNS)


class VisibleStream:
    """A text stream that writes what it is given with its control characters escaped."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(visible(text, OWN_COLOURS))
        return len(text)

    def control(self, sequence: str) -> None:
        """envsnap's own terminal control (\\r, erase line): written as it is."""
        self.stream.write(sequence)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()

    def __getattr__(self, name: str) -> Any:   # encoding, buffer, errors: the stream's own
        return getattr(self.stream, name)


def control(stream: TextIO, sequence: str) -> None:
    """Write envsnap's own control sequence to `stream` as it is (wrapped or not)."""
    if isinstance(stream, VisibleStream):
        stream.control(sequence)
    else:
        stream.write(sequence)


@contextmanager
def visible_output() -> Iterator[None]:
    """sys.stdout and sys.stderr wrapped for the command's run, put back after."""
    saved = sys.stdout, sys.stderr
    sys.stdout = VisibleStream(saved[0])
    sys.stderr = VisibleStream(saved[1])
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
