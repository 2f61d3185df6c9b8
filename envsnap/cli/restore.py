"""`envsnap restore`: its arguments, the yes/no question, and the rendering of the report
(part of the CLI, so it may print and prompt)."""
from __future__ import annotations

import argparse
import sys
from typing import Any, Callable

from envsnap.cli.options import add_connection_options, exit_codes
from envsnap.errors import (
    EXIT_DRIFT,
    EXIT_HOST,
    EXIT_INVALID,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
)

EPILOG = exit_codes(
    (EXIT_OK, "nothing to do, or restored and verified"),
    (EXIT_DRIFT, "--check found drift, something still differs after restoring, or the "
                 "rerun is a regression"),
    (EXIT_USAGE, "usage error: bad argument, a snapshot of another host without "
                 "--force-host, no --yes without a terminal, another restore's journal "
                 "pending"),
    (EXIT_HOST, "a check failed before any change, the host is locked by another restore, "
                "or a step failed (the journal keeps it resumable)"),
    (EXIT_INVALID, "invalid snapshot"),
)


def register(commands: Any) -> None:
    res = commands.add_parser("restore", epilog=EPILOG,
                              help="bring a host's code and env back to a snapshot")
    res.add_argument("label", metavar="LABEL", help="the snapshot to restore")
    res.add_argument("--host", help="where to restore (default: the snapshot's host)")
    res.add_argument("--check", action="store_true",
                     help="show the plan, change nothing (default: plan, ask, apply)")
    res.add_argument("--yes", action="store_true",
                     help="apply without asking (default: ask at a terminal, else refuse)")
    res.add_argument("--rerun", action="store_true",
                     help="then rerun the snapshot's benchmark and give a verdict "
                          "(default: no rerun)")
    res.add_argument("--force-host", action="store_true",
                     help="restore a snapshot taken on another host (default: refuse)")
    res.add_argument("--pip", action="store_true",
                     help="also pin drifted packages back with the host's pip (default: "
                          "report them only)")
    res.add_argument("--python", metavar="PATH",
                     help="interpreter on the host to run the agent with (default: the "
                          "inventory's python, else the one the snapshot was captured with)")
    add_connection_options(res)
    res.set_defaults(run=cmd_restore)


def ask_to_apply(yes: bool) -> Callable[[Any], bool]:
    """--yes, or a person at a terminal says so; a script without --yes is refused."""
    def confirm(report: Any) -> bool:
        if yes:
            return True
        if not sys.stdin.isatty():
            raise UsageError(f"restore would change {report.host}: pass --yes "
                             "(or --check to only see the plan)")
        try:
            answer = input(f"apply these changes to {report.host}? [y/N] ")
        except EOFError:   # Ctrl-D: no answer is "no", as [y/N] says
            sys.stdout.write("\n")
            return False
        return answer.strip().lower() in ("y", "yes")
    return confirm


def cmd_restore(args: argparse.Namespace) -> int:
    from envsnap.hosts.capture import CaptureOptions
    from envsnap.hosts.inventory import load_inventory
    from envsnap.restore.render import outcome_lines, plan_lines
    from envsnap.restore.run import RestoreOptions, restore
    from envsnap.snapshot.store import Store

    options = RestoreOptions(label=args.label, host=args.host, check=args.check,
                             force_host=args.force_host, pip=args.pip, rerun=args.rerun,
                             python=args.python,
                             capture=CaptureOptions(connect_timeout=args.connect_timeout,
                                                    accept_new_host_keys=args.accept_new_host_keys))
    confirm = ask_to_apply(args.yes)

    def show_then_confirm(report: Any) -> bool:
        print("\n".join(plan_lines(report, check=False)))
        return confirm(report)

    report = restore(Store(args.store), load_inventory(args.inventory), options,
                     show_then_confirm)
    if report.applied is None:
        if args.check or report.plan.outcome != "ok" or not (report.planned or report.pip_pins):
            print("\n".join(plan_lines(report, check=args.check)))
    print("\n".join(outcome_lines(report)))
    return restore_exit(report)


def restore_exit(report: Any) -> int:
    if report.plan.outcome != "ok" or (report.applied and report.applied.outcome != "ok"):
        return EXIT_HOST
    if report.rerun and report.rerun[1]["verdict"] == "regression":
        return EXIT_DRIFT
    if report.applied is not None:
        return EXIT_DRIFT if report.mismatches or report.remaining else EXIT_OK
    return EXIT_DRIFT if report.drift else EXIT_OK
