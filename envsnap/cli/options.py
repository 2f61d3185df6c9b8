"""Options several commands share, the typed values they accept, and the epilogs (examples,
exit codes), declared once so every command reads, defaults and documents them the same way."""
from __future__ import annotations

import argparse
import os
import sys
import textwrap
from typing import TYPE_CHECKING, Callable

from envsnap.defaults import DEFAULT_CONNECT_TIMEOUT, DEFAULT_SERVE_TIMEOUT, DEFAULT_STORE
from envsnap.errors import DeclinedError, ExitCode, UsageError

if TYPE_CHECKING:   # bench loads when a command runs, not for the parser
    from envsnap.bench.run import ServeSpec
    from envsnap.hostops.gate import ForeignPlan
    from envsnap.hosts.inventory import Host, Inventory
    from envsnap.hosts.inventory_graph import Vars

    # What build_parser hands each command module's register(): the subcommands' action.
    Commands = argparse._SubParsersAction[argparse.ArgumentParser]

CodeMeaning = tuple[int, str]   # an exit code and what it means to this command
# What any command can end with, whatever it does: listed at the end of every epilog.
ALWAYS: tuple[CodeMeaning, ...] = (
    (ExitCode.INTERNAL, "internal error: a bug in envsnap (one line; the traceback is saved "
                        "under $XDG_STATE_HOME/envsnap or ~/.local/state/envsnap)"),
    (ExitCode.INTERRUPTED, "interrupted (Ctrl-C)"),
)
# The whole contract, for `envsnap --help`; each command's help lists only its own codes.
ALL_EXIT_CODES: tuple[CodeMeaning, ...] = (
    (ExitCode.OK, "ok / no drift (diff --fail-on regression: no benchmark regression)"),
    (ExitCode.DRIFT, "drift or regression found (diff --fail-on regression: only a benchmark "
                     "regression)"),
    (ExitCode.USAGE, "usage error (no command, bad argument, unknown label, bad inventory)"),
    (ExitCode.HOST, "host unreachable or partly failed, or a benchmark run failed"),
    (ExitCode.INVALID, "invalid snapshot or playbook"),
    (ExitCode.DECLINED, "declined: answered no, or no --yes / --trust-foreign without a "
                        "terminal; nothing was changed"),
    (ExitCode.PUT_BACK, "bisect, explain: answered, then the host not entirely put back (the "
                        "commands that finish it are printed)"),
)


def examples(*commands: str) -> str:
    """The start of an epilog: commands as typed, one per line (tests/cli/test_cli_help.py
    parses each with the real parser, so an example cannot outlive an option it uses)."""
    return "examples:\n" + "".join(f"  {command}\n" for command in commands) + "\n"


def exit_codes(*codes: CodeMeaning) -> str:
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
two_or_more = number_type(int, 1, False, "a whole number of at least 2")
positive_seconds = number_type(float, 0, False, "a number of seconds above 0")
non_negative_seconds = number_type(float, 0, True, "a number of seconds of at least 0")


# ---- options shared by several commands -------------------------------------------------------

def add_store_option(parser: argparse.ArgumentParser) -> None:
    # None: the Store picks $ENVSNAP_STORE, else ./snapshots, and says so in its messages
    parser.add_argument("--store", default=None,
                        help=f"snapshot folder (default: $ENVSNAP_STORE, else ./{DEFAULT_STORE})")


def add_others_checkouts_option(parser: argparse.ArgumentParser, command: str) -> None:
    """The one way to move a checkout of another user than the one envsnap runs as on the
    host (hostops/git.py): default refused, exit 2, before anything changes."""
    parser.add_argument("--as-root-in-others-checkouts", action="store_true",
                        help=f"let {command} move a checkout owned by another user than the "
                             "one envsnap runs as on the host (root in an ML user's tree), "
                             "with none of that checkout's configured git commands: no "
                             "hooks, no filters (LFS files stay pointers), no drivers; the "
                             "files written there are root's (default: refuse, exit 2; run "
                             "envsnap as the owner instead)")


def add_connection_options(parser: argparse.ArgumentParser) -> None:
    """How hosts are found and reached: the inventory, host keys, the connect timeout."""
    parser.add_argument("--inventory", default=os.environ.get("ENVSNAP_INVENTORY"),
                        help="an Ansible inventory: YAML, INI, TOML, the JSON of "
                             "ansible-inventory --list, a script, a plugin's config or a "
                             "folder (default: $ENVSNAP_INVENTORY, else none: hosts are named "
                             "on the command line)")
    parser.add_argument("--vault-password-file", action="append", default=[], metavar="FILE",
                        help="for an inventory encrypted with ansible-vault: passed to "
                             "ansible-inventory as to ansible (repeatable)")
    parser.add_argument("--vault-id", action="append", default=[], metavar="ID",
                        help="likewise, ansible's --vault-id (repeatable)")
    parser.add_argument("--accept-new-host-keys", action="store_true",
                        help="trust and record host keys not yet in known_hosts (default: "
                             "refuse them)")
    parser.add_argument("--connect-timeout", type=positive_seconds,
                        default=DEFAULT_CONNECT_TIMEOUT, metavar="S",
                        help=f"SSH connect timeout in seconds (default "
                             f"{DEFAULT_CONNECT_TIMEOUT:g})")
    # marks the commands that act on hosts (tests/cli/test_gate.py finds them by it)
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


def add_serve_options(parser: argparse.ArgumentParser) -> None:
    """A server started on the host before the benchmark runs and stopped after them."""
    parser.add_argument("--serve", metavar="CMD", type=utf8_text,
                        help="start this server (through sh -c, in its own process group) "
                             "before the runs, stop it after them; its env and argv are "
                             "recorded as a worker (default: no server)")
    parser.add_argument("--ready", metavar="REGEX|URL", type=utf8_text,
                        help="with --serve: the server is ready once its output matches "
                             "REGEX, or once the http(s) URL answers with a status below 500")
    parser.add_argument("--serve-timeout", type=positive_seconds, metavar="S",
                        help="with --serve: seconds it may take to become ready (default "
                             f"{DEFAULT_SERVE_TIMEOUT:g})")


def serve_spec(args: argparse.Namespace) -> ServeSpec | None:
    """--serve, --ready and --serve-timeout as one ServeSpec (None without --serve); one
    line (exit 2) when they do not go together, before any host is contacted."""
    from envsnap.bench.run import ServeSpec

    if args.serve is None:
        for given, flag in ((args.ready, "--ready"), (args.serve_timeout, "--serve-timeout")):
            if given is not None:
                raise UsageError(f"{flag} is about a --serve server: give --serve CMD too")
        return None
    if args.ready is None:
        raise UsageError("--serve needs --ready REGEX|URL: how to tell the server is up")
    spec = ServeSpec(cmd=args.serve, ready=args.ready,
                     timeout=args.serve_timeout or DEFAULT_SERVE_TIMEOUT)
    spec.check()
    return spec


def ask(question: str) -> str | None:
    """A person's answer at the terminal; None when nobody is there to ask (no terminal on
    stdin) or they end the input (Ctrl-D): no answer is never a yes."""
    if not sys.stdin.isatty():
        return None
    sys.stdout.write(question)
    sys.stdout.flush()
    line = typed_line()
    if line is None:   # Ctrl-D
        sys.stdout.write("\n")
        return None
    return line.strip()


def typed_line() -> str | None:
    """The line typed at the terminal, or None at its end. A Ctrl-C that lands after the
    question is out but before the read begins finds no read to interrupt: `input()` then
    waited for a line while the KeyboardInterrupt sat pending. Waiting in short turns
    (the interpreter raises a pending signal between two) ends on it at once."""
    import select

    while not select.select([sys.stdin], [], [], 0.2)[0]:
        pass
    line = sys.stdin.readline()
    return line or None


def said_yes(answer: str | None) -> bool:
    return answer is not None and answer.lower() in ("y", "yes")


def approved(yes: bool, question: str, unchanged: str, without_terminal: str) -> bool:
    """--yes, or a person at a terminal says so; else declined (ExitCode.DECLINED), the one
    line saying what was left `unchanged`, and, for a script, `without_terminal`: how to say
    yes without a terminal."""
    if yes:
        return True
    if not sys.stdin.isatty():
        raise DeclinedError(f"{unchanged}: {without_terminal}")
    if not said_yes(ask(question)):
        raise DeclinedError(unchanged)
    return True


def inventory_from(args: argparse.Namespace) -> Inventory:
    """The inventory a command was given (--inventory, $ENVSNAP_INVENTORY), read with the
    user's vault options."""
    from envsnap.hosts.inventory import load_inventory

    return load_inventory(args.inventory, vault_args(args))


def add_limit_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-l", "--limit", metavar="PATTERN",
                        help="only the hosts this Ansible host pattern selects: n2, "
                             "'gpu:!n3', 'gpu:&rack1', 'gpu[0:3]', 'node0*', '~regex', "
                             "@retry-file (docs/guide/fleets.md#--limit)")


def selected_hosts(args: argparse.Namespace, patterns: list[str], overrides: Vars) -> list[Host]:
    """The hosts named on the command line, in the inventory, kept by --limit; a --limit
    pattern that matches no host is a warning, as Ansible gives it."""
    from envsnap.hosts.inventory import limit_hosts, no_host_left, resolve_hosts

    inventory = inventory_from(args)
    hosts = resolve_hosts(patterns, inventory, overrides)
    if getattr(args, "limit", None) is None:
        return hosts
    hosts, unmatched = limit_hosts(hosts, inventory, args.limit)
    if not hosts:
        raise no_host_left(args.limit, unmatched)
    from envsnap.hosts.patterns import unmatched_said

    for said in unmatched_said(unmatched):
        sys.stderr.write(f"warning: --limit: no host matches {said}, ignoring it\n")
    return hosts


def vault_args(args: argparse.Namespace) -> list[str]:
    """The user's vault options, as ansible-inventory takes them."""
    return [*(arg for path in args.vault_password_file
              for arg in ("--vault-password-file", path)),
            *(arg for vault_id in args.vault_id for arg in ("--vault-id", vault_id))]
def add_trust_foreign_option(parser: argparse.ArgumentParser, doing: str) -> None:
    """The one way past the gate (hostops/gate.py) from a script; `doing` says what with."""
    parser.add_argument("--trust-foreign", action="store_true",
                        help=f"{doing} a snapshot not signed with your key (a colleague's, a "
                             "bug report's, one edited by hand) after showing all it would "
                             "write and run (default: show that and refuse, or ask to type "
                             "its label at a terminal)")


def review_foreign(plan: ForeignPlan) -> bool:
    """The one review of a foreign snapshot, for every command that acts on a host from one:
    everything it would do is shown; when that is all that stands in the way, a person at a
    terminal may trust it by typing its label (a script passes --trust-foreign)."""
    from envsnap.hostops.gate import review_lines

    sys.stdout.write("".join(line + "\n" for line in review_lines(plan)))
    sys.stdout.flush()
    if not plan.needs_consent:
        return False
    return bool(ask(f"type the label ({plan.label}) to trust this snapshot: ") == plan.label)
