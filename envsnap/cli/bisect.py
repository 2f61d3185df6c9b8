"""`envsnap bisect`: its arguments and its command (part of the CLI, so it may print)."""
from __future__ import annotations

import argparse
import sys
from typing import Any

from envsnap.cli.options import (
    add_connection_options,
    exit_codes,
    positive_int,
    positive_seconds,
    utf8_text,
)
from envsnap.defaults import DEFAULT_MAX_REPEAT, DEFAULT_REPEAT, DEFAULT_RUN_TIMEOUT
from envsnap.errors import EXIT_DRIFT, EXIT_HOST, EXIT_INVALID, EXIT_OK, EXIT_USAGE

EPILOG = exit_codes(
    (EXIT_OK, "no regression between GOOD and BAD (or can't tell at the endpoints)"),
    (EXIT_DRIFT, "regression: first bad commit found (or narrowed down when commits were "
                 "skipped or too noisy)"),
    (EXIT_USAGE, "usage error: bad argument, GOOD not an ancestor of BAD, unknown repo"),
    (EXIT_HOST, "host or benchmark failure at an endpoint"),
    (EXIT_INVALID, "invalid snapshot"),
)


def register(commands: Any) -> None:
    bis = commands.add_parser("bisect", epilog=EPILOG,
                              help="find the commit between two snapshots that made the "
                                   "benchmark slower")
    bis.add_argument("good", metavar="GOOD", help="snapshot whose HEAD was fast")
    bis.add_argument("bad", metavar="BAD", help="snapshot whose HEAD is slow")
    bis.add_argument("--host", help="where to run (default: the BAD snapshot's host)")
    bis.add_argument("--repo", metavar="PATH", type=utf8_text,
                     help="the checkout (default: the one repo both snapshots recorded)")
    bis.add_argument("--cmd", required=True, type=utf8_text,
                     help="the benchmark, run through sh -c")
    bis.add_argument("--metric", required=True, metavar="REGEX", type=utf8_text,
                     help="regex of the metric: first group (or whole match) of the last match")
    bis.add_argument("--repeat", type=positive_int, default=DEFAULT_REPEAT,
                     help=f"runs per commit (default {DEFAULT_REPEAT})")
    bis.add_argument("--max-repeat", type=positive_int, default=DEFAULT_MAX_REPEAT,
                     help="most runs at one commit while the verdict is can't tell "
                          f"(default {DEFAULT_MAX_REPEAT})")
    bis.add_argument("--lower-is-better", action="store_true",
                     help="the metric is a time or latency (default: a throughput, higher "
                          "is better)")
    bis.add_argument("--with-patch", action="store_true",
                     help="re-apply the GOOD snapshot's uncommitted patch at every commit "
                          "(default: the commits alone)")
    bis.add_argument("--good-from-snapshot", action="store_true",
                     help="take GOOD's recorded benchmark runs as the good baseline "
                          "(default: measure the good commit again)")
    bis.add_argument("--keep-untracked", action="store_true",
                     help="leave untracked files in the checkout (a benchmark script kept "
                          "there) (default: stash them with the rest of your work)")
    bis.add_argument("--cwd", type=utf8_text,
                     help="folder to run the benchmark in (default, as for bench: here for "
                          "local, the login home over SSH)")
    bis.add_argument("--run-timeout", type=positive_seconds, default=DEFAULT_RUN_TIMEOUT,
                     metavar="S",
                     help=f"kill a run after S seconds (default {DEFAULT_RUN_TIMEOUT:g})")
    add_connection_options(bis)
    bis.set_defaults(run=cmd_bisect)


def cmd_bisect(args: argparse.Namespace) -> int:
    from envsnap.bench.run import BenchSpec
    from envsnap.bisect.render import event_line, final_lines
    from envsnap.bisect.run import BisectOptions, Event, RunEnded, bisect
    from envsnap.hosts.capture import CaptureOptions
    from envsnap.hosts.inventory import load_inventory
    from envsnap.snapshot.store import Store

    spec = BenchSpec(cmd=args.cmd, metric=args.metric, repeat=args.repeat,
                     lower_is_better=args.lower_is_better, cwd=args.cwd,
                     sample_interval=None, run_timeout=args.run_timeout)
    options = BisectOptions(max_repeat=args.max_repeat, with_patch=args.with_patch,
                            good_from_snapshot=args.good_from_snapshot,
                            keep_untracked=args.keep_untracked,
                            capture=CaptureOptions(connect_timeout=args.connect_timeout,
                                                   accept_new_host_keys=args.accept_new_host_keys))

    def show(event: Event) -> None:  # runs as they end on stderr; the steps are the answer
        stream = sys.stderr if isinstance(event, RunEnded) else sys.stdout
        print(event_line(event), file=stream, flush=True)

    report = bisect(Store(args.store), load_inventory(args.inventory), args.good, args.bad,
                    args.host, args.repo, spec, options, show)
    sys.stdout.write("".join(line + "\n" for line in final_lines(report)))
    return EXIT_DRIFT if report.regression else EXIT_OK
