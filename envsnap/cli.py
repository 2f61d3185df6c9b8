"""The command line: parse, call the library, render. The only module that prints or exits."""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Callable, Optional, TextIO

from . import __version__
from .capture import DEFAULT_COLLECTOR_TIMEOUT, DEFAULT_FORKS, CaptureOptions, Outcome, capture
from .errors import EXIT_HOST, EXIT_OK, EnvsnapError
from .inventory import load_inventory, resolve_hosts
from .store import DEFAULT_STORE, Store, dump_yaml
from .transport import DEFAULT_CONNECT_TIMEOUT

EPILOG = """exit codes: 0 ok / no drift, 1 drift or regression found, 2 usage error,
3 host unreachable or partly failed, 4 invalid snapshot or playbook"""


def add_store_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", default=os.environ.get("ENVSNAP_STORE", DEFAULT_STORE),
                        help="snapshot folder (default: $ENVSNAP_STORE or ./snapshots)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="envsnap", epilog=EPILOG,
                                     description="Capture, diff and restore GPU host environments.")
    parser.add_argument("--version", action="version", version=f"envsnap {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    cap = commands.add_parser("capture", help="snapshot one or more hosts", epilog=EPILOG)
    cap.add_argument("hosts", nargs="+", metavar="HOST",
                     help="inventory host or group, [user@]host[:port], or 'local'")
    cap.add_argument("--label", help="snapshot label (a fleet is stored as LABEL/<host>)")
    cap.add_argument("--repo", action="append", default=[], metavar="PATH",
                     help="git checkout to record (repeatable)")
    cap.add_argument("--python", help="interpreter on the host to run the agent with")
    cap.add_argument("--proc", action="append", default=[], metavar="PATTERN",
                     help="record env of running processes whose cmdline matches (repeatable)")
    cap.add_argument("--inventory", default=os.environ.get("ENVSNAP_INVENTORY"),
                     help="Ansible-style YAML inventory (default: $ENVSNAP_INVENTORY)")
    cap.add_argument("--force", action="store_true", help="replace an existing label")
    cap.add_argument("--forks", type=int, default=DEFAULT_FORKS,
                     help=f"hosts captured at once (default {DEFAULT_FORKS})")
    cap.add_argument("--accept-new-host-keys", action="store_true",
                     help="trust and record host keys not yet in known_hosts")
    cap.add_argument("--connect-timeout", type=float, default=DEFAULT_CONNECT_TIMEOUT)
    cap.add_argument("--collector-timeout", type=float, default=DEFAULT_COLLECTOR_TIMEOUT)
    cap.add_argument("--max-patch-bytes", type=int,
                     help="cap on each recorded git patch (default 1 MiB)")
    add_store_option(cap)
    cap.set_defaults(run=cmd_capture)

    lst = commands.add_parser("list", help="list stored snapshots")
    add_store_option(lst)
    lst.set_defaults(run=cmd_list)

    show = commands.add_parser("show", help="print one snapshot")
    show.add_argument("label", metavar="LABEL", help="a label in the store or a snapshot file")
    show.add_argument("--json", action="store_true", help="print JSON instead of YAML")
    add_store_option(show)
    show.set_defaults(run=cmd_show)
    return parser


class Progress:
    """A one-line counter on a terminal; a line per host otherwise (logs, CI)."""

    def __init__(self, total: int, stream: TextIO) -> None:
        self.total, self.done, self.failed = total, 0, 0
        self.stream = stream
        self.live = stream.isatty() and total > 1

    def __call__(self, outcome: Outcome) -> None:
        self.done += 1
        self.failed += not outcome.ok
        if self.live:
            self.stream.write(f"\r{self.done}/{self.total} hosts, {self.failed} failed")
            self.stream.write("\n" if self.done == self.total else "")
            self.stream.flush()


def render_outcome(outcome: Outcome, out: TextIO, err: TextIO) -> None:
    if outcome.error:
        err.write(f"error: {outcome.error}\n")
        return
    out.write(f"{outcome.host.name}: saved {outcome.label} -> {outcome.path} "
              f"({outcome.seconds:.2f}s)\n")
    for problem in outcome.problems:
        err.write(f"warning: {outcome.host.name}: {problem}\n")


def cmd_capture(args: argparse.Namespace) -> int:
    overrides: dict[str, Any] = {"repos": args.repo, "procs": args.proc, "python": args.python}
    hosts = resolve_hosts(args.hosts, load_inventory(args.inventory), overrides)
    options = CaptureOptions(label=args.label, force=args.force, forks=args.forks,
                             connect_timeout=args.connect_timeout,
                             collector_timeout=args.collector_timeout,
                             accept_new_host_keys=args.accept_new_host_keys,
                             max_patch_bytes=args.max_patch_bytes)
    outcomes = capture(hosts, Store(args.store), options, Progress(len(hosts), sys.stderr))
    for outcome in outcomes:
        render_outcome(outcome, sys.stdout, sys.stderr)
    failed = [o for o in outcomes if not o.ok]
    if failed and len(outcomes) > 1:
        sys.stderr.write(f"{len(failed)} of {len(outcomes)} hosts failed or partly failed\n")
    return EXIT_HOST if failed else EXIT_OK


def cmd_list(args: argparse.Namespace) -> int:
    entries = Store(args.store).entries()
    if not entries:
        print(f"no snapshots in {args.store}")
        return EXIT_OK
    width = max(len(entry.label) for entry in entries)
    for entry in entries:
        print(f"{entry.label:<{width}}  {entry.captured_at:<25}  {entry.host}")
    return EXIT_OK


def cmd_show(args: argparse.Namespace) -> int:
    document = Store(args.store).load(args.label)
    if args.json:
        print(json.dumps(document, indent=2, sort_keys=True))
    else:
        sys.stdout.write(dump_yaml(document))
    return EXIT_OK


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    command: Callable[[argparse.Namespace], int] = args.run
    try:
        return command(args)
    except EnvsnapError as exc:
        sys.stderr.write(f"envsnap: error: {exc}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("envsnap: interrupted\n")
        return 130
    except BrokenPipeError:
        return EXIT_OK




if __name__ == "__main__":
    sys.exit(main())
