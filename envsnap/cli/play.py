"""`envsnap play`: its arguments and its command (part of the CLI, so it may print). The
playbook code and the inventory load when the command runs, not when the parser is built."""
from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from envsnap.cli.options import (
    add_connection_options,
    add_trust_foreign_option,
    examples,
    exit_codes,
    inventory_from,
    positive_int,
    review_foreign,
)
from envsnap.defaults import DEFAULT_FORKS
from envsnap.errors import ExitCode

if TYPE_CHECKING:
    from envsnap.cli.options import Commands

EPILOG = examples(
    "envsnap play playbooks/restore.yml -e snapshot=good -l gpu1 --check --diff",
    "envsnap play playbooks/capture.yml -e label=good -l gpu --inventory hosts.yml",
) + exit_codes(
    (ExitCode.OK, "every task ok or changed"),
    (ExitCode.DRIFT, "only assert/verify tasks found drift (assert_facts, git verify, a bench "
                     "regression)"),
    (ExitCode.USAGE, "usage error: bad argument, bad -e value, bad inventory"),
    (ExitCode.HOST, "a task or a host failed"),
    (ExitCode.INVALID, "invalid playbook (YAML error, unknown module or argument, undefined "
                       "variable: one line, file:line:) or snapshot"),
    (ExitCode.DECLINED, "declined: a foreign -e snapshot= without --check or --trust-foreign "
                        "(or its label typed at a terminal); nothing was changed"),
)


def register(commands: Commands) -> None:
    play = commands.add_parser("play", help="run an Ansible-style playbook on hosts",
                               epilog=EPILOG)
    play.add_argument("playbook", metavar="PLAYBOOK", help="YAML playbook (playbooks/*.yml)")
    play.add_argument("-e", "--extra-vars", action="append", default=[], metavar="KEY=VALUE",
                      help="variable for every task, highest precedence; also {...} or @file "
                           "(repeatable); -e snapshot=LABEL loads that snapshot")
    play.add_argument("-l", "--limit", action="append", default=[], metavar="HOST_PATTERN",
                      help="only these hosts (inventory names or groups, [user@]host[:port], "
                           "local; repeatable or comma-separated; default: the play's hosts)")
    play.add_argument("--check", action="store_true",
                      help="report what would change, change nothing (default: apply)")
    play.add_argument("--diff", action="store_true",
                      help="show file and repo changes as diffs (default: one line each)")
    add_trust_foreign_option(play, "apply (a -e snapshot= or a host var naming one)")
    play.add_argument("--forks", type=positive_int, default=DEFAULT_FORKS,
                      help=f"hosts worked on at once (default {DEFAULT_FORKS})")
    add_connection_options(play)
    play.set_defaults(run=cmd_play)


def cmd_play(args: argparse.Namespace) -> int:
    from envsnap.playbook.load import load, parse_extra_vars
    from envsnap.playbook.render import render_event, render_recap
    from envsnap.playbook.run import PLAY_EXIT_CODES, Event, RunOptions, run_playbook
    from envsnap.snapshot.store import Store

    options = RunOptions(extra_vars=parse_extra_vars(args.extra_vars), limit=tuple(args.limit),
                         check=args.check, diff=args.diff, forks=args.forks,
                         connect_timeout=args.connect_timeout,
                         accept_new_host_keys=args.accept_new_host_keys,
                         trust_foreign=args.trust_foreign, review=review_foreign)

    def show(event: Event) -> None:
        sys.stdout.write(render_event(event, args.diff))
        sys.stdout.flush()

    result = run_playbook(load(args.playbook), inventory_from(args),
                          Store(args.store), options, show)
    sys.stdout.write(render_recap(result, args.check))
    return PLAY_EXIT_CODES[result.outcome]
