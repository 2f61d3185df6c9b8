"""Options several commands share, the typed values they accept, and the exit-code epilogs,
declared once so every command reads, defaults and documents them the same way."""
from __future__ import annotations

import argparse
import os
import textwrap
from typing import Callable

from envsnap.defaults import DEFAULT_CONNECT_TIMEOUT
from envsnap.errors import (
    EXIT_DRIFT,
    EXIT_HOST,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_INVALID,
    EXIT_OK,
    EXIT_USAGE,
)
from envsnap.snapshot.store import DEFAULT_STORE

ExitCode = tuple[int, str]
# What any command can end with, whatever it does: listed at the end of every epilog.
ALWAYS: tuple[ExitCode, ...] = (
    (EXIT_INTERNAL, "internal error: a bug in envsnap (one line; the traceback is saved "
                    "under $XDG_STATE_HOME/envsnap or ~/.local/state/envsnap)"),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C)"),
)
# The whole contract, for `envsnap --help`; each command's help lists only its own codes.
ALL_EXIT_CODES: tuple[ExitCode, ...] = (
    (EXIT_OK, "ok / no drift (diff --fail-on regression: no benchmark regression)"),
    (EXIT_DRIFT, "drift or regression found (diff --fail-on regression: only a benchmark "
                 "regression)"),
    (EXIT_USAGE, "usage error (no command, bad argument, unknown label, bad inventory)"),
    (EXIT_HOST, "host unreachable or partly failed, or a benchmark run failed"),
    (EXIT_INVALID, "invalid snapshot or playbook"),
)


def exit_codes(*codes: ExitCode) -> str:
    """An epilog that lists a command's exit codes, one per line, long ones wrapped."""
    lines = ["exit codes:"]
    for code, meaning in codes + ALWAYS:
        lines += textwrap.wrap(meaning, 78, initial_indent=f"  {code:<4}",
                               subsequent_indent=" " * 6)
    return "\n".join(lines)


# ---- typed values: refused at parse time with one line, before any host is contacted --------

def number_type(convert: Callable[[str], float], minimum: float, inclusive: bool,
                wanted: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {wanted}") from None
        if value != value or value in (float("inf"), float("-inf")):  # NaN or infinite
            raise argparse.ArgumentTypeError(f"{text!r} is not {wanted}")
        if value < minimum or (value == minimum and not inclusive):
            raise argparse.ArgumentTypeError(f"{text!r} is not {wanted}")
        return value
    parse.__name__ = wanted   # argparse names the type in some messages
    return parse


def utf8_text(text: str) -> str:
    """A value that travels to the host or into a snapshot (JSON, YAML): bytes that are not
    UTF-8 reach Python as surrogates, which neither can encode, after the work is done."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise argparse.ArgumentTypeError(f"{text!r} is not UTF-8 text") from None
    return text


utf8_text.__name__ = "UTF-8 text"   # argparse names the type in some messages

positive_int = number_type(int, 0, False, "a whole number of at least 1")
non_negative_int = number_type(int, 0, True, "a whole number of at least 0")
positive_seconds = number_type(float, 0, False, "a number of seconds above 0")
non_negative_seconds = number_type(float, 0, True, "a number of seconds of at least 0")


# ---- options shared by several commands -------------------------------------------------------

def add_store_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", default=os.environ.get("ENVSNAP_STORE", DEFAULT_STORE),
                        help="snapshot folder (default: $ENVSNAP_STORE or ./snapshots)")


def add_connection_options(parser: argparse.ArgumentParser) -> None:
    """How hosts are found and reached: the inventory, host keys, the connect timeout."""
    parser.add_argument("--inventory", default=os.environ.get("ENVSNAP_INVENTORY"),
                        help="Ansible-style YAML inventory (default: $ENVSNAP_INVENTORY, "
                             "else none: hosts are named on the command line)")
    parser.add_argument("--accept-new-host-keys", action="store_true",
                        help="trust and record host keys not yet in known_hosts (default: "
                             "refuse them)")
    parser.add_argument("--connect-timeout", type=positive_seconds,
                        default=DEFAULT_CONNECT_TIMEOUT, metavar="S",
                        help=f"SSH connect timeout in seconds (default "
                             f"{DEFAULT_CONNECT_TIMEOUT:g})")
    # main() quiets paramiko's logger only for commands that may load it (`diff` need not
    # pay for importing logging).
    parser.set_defaults(reaches_hosts=True)
    add_store_option(parser)


def add_capture_options(parser: argparse.ArgumentParser) -> None:
    """What a snapshot records beyond the defaults: checkouts, interpreter, workers."""
    parser.add_argument("--repo", action="append", default=[], metavar="PATH", type=utf8_text,
                        help="git checkout to record (repeatable; default: the inventory's "
                             "repos, else none)")
    parser.add_argument("--python", type=utf8_text,
                        help="interpreter on the host to run the agent with (default: the "
                             "inventory's python, else python3 on the host's PATH)")
    parser.add_argument("--proc", action="append", default=[], metavar="PATTERN",
                        type=utf8_text,
                        help="record env of running processes whose cmdline matches "
                             "(repeatable; default: the inventory's procs, else none)")
    parser.add_argument("--force", action="store_true",
                        help="replace an existing label (default: refuse)")


def ask(question: str) -> str | None:
    """A person's answer at the terminal; None when nobody is there to ask (no terminal on
    stdin) or they end the input (Ctrl-D): no answer is never a yes."""
    import sys

    if not sys.stdin.isatty():
        return None
    try:
        return input(question).strip()
    except EOFError:
        sys.stdout.write("\n")
        return None


def said_yes(answer: str | None) -> bool:
    return answer is not None and answer.lower() in ("y", "yes")
