"""`envsnap timeline`: its arguments and its command (part of the CLI, so it may print).
The timeline library loads when the command runs: building the parser must not load SSH."""
from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from envsnap.cli.options import (
    add_connection_options,
    examples,
    exit_codes,
    positive_seconds,
    selected_hosts,
    utf8_text,
)
from envsnap.defaults import DEFAULT_COLLECTOR_TIMEOUT
from envsnap.errors import ExitCode
from envsnap.text import visible_line

if TYPE_CHECKING:
    from envsnap.cli.options import Commands
    from envsnap.hosts.inventory_graph import Vars

EPILOG = examples(
    "envsnap timeline local --since 2h",
    "envsnap timeline gpu1 --since before --repo ~/sglang --proc sglang",
    "envsnap timeline gpu1 --since 2026-12-01T13:50:00Z --json",
) + exit_codes(
    (ExitCode.OK, "the timeline was shown (a source the host could not read is named at its "
                  "end, and with --json on stderr)"),
    (ExitCode.USAGE, "usage error: bad argument or time, unknown host or label, bad "
                     "inventory, a --label in use"),
    (ExitCode.HOST, "the host unreachable, or the agent failed there"),
)


def register(commands: Commands) -> None:
    tim = commands.add_parser("timeline", epilog=EPILOG,
                              help="what changed on a host, and when, from the evidence on it")
    tim.add_argument("host", metavar="HOST",
                     help="inventory host, [user@]host[:port], or 'local'")
    tim.add_argument("--since", default="24h", type=utf8_text, metavar="TIME",
                     help="from when: 2h, 30m, 1d back from now, an ISO time (UTC unless it "
                          "says), or a snapshot label (its capture time) (default: 24h)")
    tim.add_argument("--until", type=utf8_text, metavar="TIME",
                     help="up to when, in the same forms (default: now)")
    tim.add_argument("--repo", action="append", default=[], metavar="PATH", type=utf8_text,
                     help="git checkout whose reflog is read (repeatable; default: the "
                          "inventory's repos; with no --repo, --proc or --python anywhere, "
                          "those the running Python processes, the store and the current "
                          "folder show)")
    tim.add_argument("--python", type=utf8_text,
                     help="interpreter whose packages and customize files are read, and "
                          "which runs the agent (default: the inventory's python, else python3, "
                          "and with nothing named, the running Python processes' too)")
    tim.add_argument("--proc", action="append", default=[], metavar="PATTERN", type=utf8_text,
                     help="workers whose start time and env are read (repeatable; default: "
                          "the inventory's procs; with nothing named, the running Python "
                          "processes and the store's --proc patterns)")
    tim.add_argument("--hot-path", action="append", default=[], metavar="GLOB", type=utf8_text,
                     help="code paths weighed hottest in the commits a move brought in, "
                          "above the diff's default table (repeatable; default: the "
                          "inventory's hot_paths, else the table alone)")
    tim.add_argument("-v", "--verbose", action="store_true",
                     help="list each package of a folded install run (default: its count)")
    tim.add_argument("--json", action="store_true",
                     help="the events as JSON for scripts (default: text for a person)")
    tim.add_argument("--label", metavar="L", type=utf8_text,
                     help="also keep the timeline in the store under L, signed like a "
                          "snapshot (`envsnap show L`, `envsnap list`); a label in use is "
                          "refused (default: not kept)")
    tim.add_argument("--log-root", metavar="DIR", type=utf8_text,
                     help="read the host's system files (/var/log, /proc/stat, "
                          "/sys/module/nvidia, /etc) under DIR, a recorded copy, instead of / "
                          "(default: /)")
    tim.add_argument("--collector-timeout", type=positive_seconds,
                     default=DEFAULT_COLLECTOR_TIMEOUT, metavar="S",
                     help=f"seconds each source may take on the host (default "
                          f"{DEFAULT_COLLECTOR_TIMEOUT:g})")
    add_connection_options(tim)
    tim.set_defaults(run=cmd_timeline)


def cmd_timeline(args: argparse.Namespace) -> int:
    from envsnap.cli.output import columns
    from envsnap.fold import fold
    from envsnap.snapshot.store import Store
    from envsnap.timeline import saved
    from envsnap.timeline.render import render_json, render_text
    from envsnap.timeline.run import TimelineOptions, timeline

    overrides: Vars = {"repos": args.repo, "procs": args.proc, "python": args.python,
                       "hot_paths": args.hot_path}
    hosts = selected_hosts(args, [args.host], overrides)
    options = TimelineOptions(since=args.since, until=args.until, root=args.log_root,
                              connect_timeout=args.connect_timeout,
                              collector_timeout=args.collector_timeout,
                              accept_new_host_keys=args.accept_new_host_keys)
    store = Store(args.store)
    if args.label is not None:
        saved.check_free(store, args.label)   # before the host is contacted
    found = timeline(hosts[0], options, store)
    width = columns()
    sys.stdout.write(render_json(found) if args.json else
                     render_text(found, width, args.verbose))
    if args.json:   # the text names them at its end; a script's reader sees them here too
        for problem in found.unreadable:
            sys.stderr.write(f"warning: {hosts[0].name}: cannot read {visible_line(problem)}\n")
    if args.label is not None:
        path = saved.save(store, found, args.label)
        # stdout stays one JSON document with --json
        (sys.stderr if args.json else sys.stdout).write(
            "".join(line + "\n" for line in fold(f"saved timeline {args.label}: {path}", width)))
    return ExitCode.OK
