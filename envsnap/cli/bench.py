"""`envsnap bench`: its arguments and its command (part of the CLI, so it may print).
Bench, capture and the inventory load when the command runs, not when the parser is built."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from envsnap.cli.options import (
    add_capture_options,
    add_connection_options,
    add_limit_option,
    add_serve_options,
    examples,
    exit_codes,
    non_negative_seconds,
    positive_int,
    positive_seconds,
    selected_hosts,
    serve_spec,
    utf8_text,
)
from envsnap.defaults import DEFAULT_REPEAT, DEFAULT_RUN_TIMEOUT, DEFAULT_SAMPLE_INTERVAL
from envsnap.errors import ExitCode, UsageError
from envsnap.text import values_at_a_glance

if TYPE_CHECKING:
    from envsnap.cli.options import Commands
    from envsnap.hosts.inventory_graph import Vars

EPILOG = examples(
    "envsnap bench local --cmd 'python bench.py' --metric 'tok/s: ([0-9.]+)'",
    "envsnap bench gpu1 --cmd ./lat.sh --metric 'p50 ([0-9.]+)' --lower-is-better",
) + exit_codes(
    (ExitCode.OK, "every run printed the metric; the snapshot and the runs are saved"),
    (ExitCode.USAGE, "usage error: bad argument, bad --metric regex, existing label, a name "
                     "that is not one host; a store not writable or without room for the "
                     "record (checked before the first run); a store that refused the record "
                     "after the runs (it is kept under $XDG_STATE_HOME/envsnap/unsaved, else "
                     "here, and the line says where)"),
    (ExitCode.HOST, "host unreachable or partly failed; a run exited non-zero, timed out or "
                    "printed no metric; the --serve server exited or was not ready in time "
                    "(nothing saved)"),
)


def register(commands: Commands) -> None:
    ben = commands.add_parser("bench", epilog=EPILOG,
                              help="snapshot a host, run a benchmark N times on it, save both")
    ben.add_argument("host", metavar="HOST", help="inventory host, [user@]host[:port], or 'local'")
    ben.add_argument("--cmd", required=True, type=utf8_text,
                     help="the benchmark, run through sh -c on the host")
    ben.add_argument("--metric", required=True, metavar="REGEX", type=utf8_text,
                     help="regex of the metric in its output: the first group (or the whole "
                          "match) of the last match")
    ben.add_argument("--repeat", type=positive_int, default=DEFAULT_REPEAT,
                     help=f"runs (default {DEFAULT_REPEAT})")
    ben.add_argument("--lower-is-better", action="store_true",
                     help="the metric is a time or latency (default: a throughput, higher "
                          "is better)")
    ben.add_argument("--label", help="label of the snapshot that holds the runs (default: the "
                                     "host and the time of capture)")
    ben.add_argument("--cwd", type=utf8_text,
                     help="folder to run it in (default: here for local, else home)")
    ben.add_argument("--sample-interval", type=non_negative_seconds,
                     default=DEFAULT_SAMPLE_INTERVAL, metavar="S",
                     help="GPU telemetry every S seconds during each run; 0: off "
                          f"(default {DEFAULT_SAMPLE_INTERVAL:g})")
    ben.add_argument("--run-timeout", type=positive_seconds, default=DEFAULT_RUN_TIMEOUT,
                     metavar="S",
                     help=f"kill a run after S seconds (default {DEFAULT_RUN_TIMEOUT:g})")
    add_serve_options(ben)
    add_capture_options(ben)
    add_limit_option(ben)
    add_connection_options(ben)
    ben.set_defaults(run=cmd_bench)


def cmd_bench(args: argparse.Namespace) -> int:
    from envsnap.bench.run import BenchSpec, capture_and_bench, format_record
    from envsnap.cli.crash import state_dir
    from envsnap.cli.output import columns
    from envsnap.cli.progress import StatusLine
    from envsnap.fold import fold_all
    from envsnap.hosts.capture import CaptureOptions
    from envsnap.snapshot.store import Store

    spec = BenchSpec(cmd=args.cmd, metric=args.metric, repeat=args.repeat,
                     lower_is_better=args.lower_is_better, cwd=args.cwd,
                     sample_interval=args.sample_interval, run_timeout=args.run_timeout,
                     serve=serve_spec(args))
    spec.check()   # a bad regex is refused before any host is contacted
    overrides: Vars = {"repos": args.repo, "procs": args.proc, "python": args.python}
    hosts = selected_hosts(args, [args.host], overrides)
    if len(hosts) != 1:
        raise UsageError(f"bench runs on one host; {args.host!r} names {len(hosts)} "
                         "(--limit picks one)")
    options = CaptureOptions(label=args.label, force=args.force,
                             connect_timeout=args.connect_timeout,
                             accept_new_host_keys=args.accept_new_host_keys)
    name = hosts[0].name
    # Where a record goes if the store refuses it after the runs: the user's state dir,
    # else here.
    fallbacks = [state_dir() / "unsaved", Path.cwd()]
    # long runs: each shown as it ends, on stderr, under a live status line on a terminal
    with StatusLine(sys.stderr, f"{name}: ", spec.repeat) as status:
        outcome = capture_and_bench(hosts[0], spec, Store(args.store), options,
                                    lambda text: status.run_ended(f"{name}: {text}"),
                                    fallbacks)
    width = columns()
    lines = [*format_record(outcome.record),
             f"runs: {values_at_a_glance(outcome.record['values'])}"]
    sys.stdout.write("".join(line + "\n" for line in fold_all(lines, width)))
    if outcome.not_saved:
        sys.stderr.write(f"envsnap: error: {outcome.not_saved}; the record is kept in "
                         f"{outcome.path} (envsnap show {outcome.path})\n")
        return ExitCode.USAGE
    print("\n".join(fold_all([f"{name}: saved {outcome.label} -> {outcome.path}"], width)))
    for problem in outcome.problems:
        sys.stderr.write(f"warning: {name}: {problem}\n")
    return ExitCode.HOST if outcome.problems else ExitCode.OK
