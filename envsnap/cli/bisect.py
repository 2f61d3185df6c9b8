"""`envsnap bisect`: its arguments and its command (part of the CLI, so it may print)."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from envsnap.cli.options import (
    add_connection_options,
    add_others_checkouts_option,
    add_serve_options,
    add_trust_foreign_option,
    examples,
    exit_codes,
    inventory_from,
    positive_int,
    positive_seconds,
    review_foreign,
    serve_spec,
    utf8_text,
)
from envsnap.defaults import DEFAULT_BISECT_REPEAT, DEFAULT_MAX_REPEAT, DEFAULT_RUN_TIMEOUT
from envsnap.errors import ExitCode, PutBackError, StoreError, UsageError

if TYPE_CHECKING:   # bisect's modules load when the command runs, not for the parser
    from envsnap.bisect.run import BisectReport
    from envsnap.cli.options import Commands

EPILOG = examples(
    "envsnap bisect good bad --cmd 'python bench.py' --metric 'tok/s: ([0-9.]+)'",
    "envsnap bisect good bad --cmd ./bench.sh --metric '([0-9.]+)' --plot b.svg",
    "envsnap bisect good bad",
) + exit_codes(
    (ExitCode.OK, "no regression between GOOD and BAD (or can't tell at the endpoints)"),
    (ExitCode.DRIFT, "regression: first bad commit found (or narrowed down when commits were "
                     "skipped or too noisy)"),
    (ExitCode.USAGE, "usage error: bad argument, GOOD not an ancestor of BAD, unknown repo, "
                     "another user's checkout without --as-root-in-others-checkouts; no "
                     "--cmd/--metric and no benchmark both snapshots recorded alike; a "
                     "--plot file that cannot be written (after the answer is printed)"),
    (ExitCode.HOST, "host or benchmark failure at an endpoint"),
    (ExitCode.INVALID, "invalid snapshot"),
    (ExitCode.DECLINED, "declined: a foreign snapshot without --trust-foreign (or its label "
                        "typed at a terminal); nothing was changed"),
    (ExitCode.PUT_BACK, "the answer printed (and --plot drawn), then the host not entirely "
                        "put back: the commands that finish it are printed; your work is "
                        "safe"),
)


def register(commands: Commands) -> None:
    bis = commands.add_parser("bisect", epilog=EPILOG,
                              help="find the commit between two snapshots that made the "
                                   "benchmark slower")
    bis.add_argument("good", metavar="GOOD", help="snapshot whose HEAD was fast")
    bis.add_argument("bad", metavar="BAD", help="snapshot whose HEAD is slow")
    bis.add_argument("--host", help="where to run (default: the BAD snapshot's host)")
    bis.add_argument("--repo", metavar="PATH", type=utf8_text,
                     help="the checkout (default: the one repo both snapshots recorded)")
    bis.add_argument("--cmd", type=utf8_text,
                     help="the benchmark, run through sh -c (default: the one both snapshots "
                          "recorded with envsnap bench)")
    bis.add_argument("--metric", metavar="REGEX", type=utf8_text,
                     help="regex of the metric: first group (or whole match) of the last match "
                          "(default: the recorded benchmark's)")
    bis.add_argument("--repeat", type=positive_int, default=DEFAULT_BISECT_REPEAT,
                     help=f"runs per commit to start with (default {DEFAULT_BISECT_REPEAT}); "
                          "as many more each time the verdict is can't tell")
    bis.add_argument("--max-repeat", type=positive_int, default=DEFAULT_MAX_REPEAT,
                     help="most runs at one commit while the verdict is can't tell "
                          f"(default {DEFAULT_MAX_REPEAT})")
    bis.add_argument("--lower-is-better", action="store_true",
                     help="the metric is a time or latency (default: a throughput, higher "
                          "is better)")
    bis.add_argument("--with-patch", action="store_true",
                     help="re-apply the GOOD snapshot's uncommitted patch at every commit "
                          "(default: the commits alone)")
    add_trust_foreign_option(bis, "bisect with")
    bis.add_argument("--good-from-snapshot", action="store_true",
                     help="take GOOD's recorded benchmark runs as the good baseline "
                          "(default: measure the good commit again)")
    bis.add_argument("--keep-untracked", action="store_true",
                     help="leave untracked files in the checkout (a benchmark script kept "
                          "there) (default: stash them with the rest of your work)")
    bis.add_argument("--cwd", type=utf8_text,
                     help="folder to run the benchmark in (default: where the snapshots' "
                          "recorded benchmark ran, else the repository bisected)")
    bis.add_argument("--run-timeout", type=positive_seconds, default=DEFAULT_RUN_TIMEOUT,
                     metavar="S",
                     help=f"kill a run after S seconds (default {DEFAULT_RUN_TIMEOUT:g})")
    bis.add_argument("--plot", metavar="FILE.svg",
                     help="also draw the metric at each tested commit, in commit order, the "
                          "first bad commit marked, as an SVG file (default: no plot)")
    add_serve_options(bis)
    add_others_checkouts_option(bis, "bisect")
    add_connection_options(bis)
    bis.set_defaults(run=cmd_bisect)


def check_plot(path: str | None) -> Path | None:
    """Refused before the bisect starts: a bisect can take hours to reach its plot."""
    if path is None:
        return None
    target = Path(path)
    if target.suffix.lower() != ".svg":
        raise UsageError(f"--plot {path!r}: name it FILE.svg")
    folder = target.parent
    if not folder.is_dir() or not os.access(folder, os.W_OK):
        raise UsageError(f"--plot {path!r}: {folder} is not a folder this user can write to")
    return target


def cmd_bisect(args: argparse.Namespace) -> int:
    from envsnap.bisect.inputs import BenchAsked
    from envsnap.bisect.render import event_line, final_lines, medians_line
    from envsnap.bisect.run import Answered, BisectOptions, RunEnded, Said, Step, bisect
    from envsnap.cli.output import columns
    from envsnap.cli.progress import StatusLine
    from envsnap.fold import fold, fold_all
    from envsnap.hosts.capture import CaptureOptions
    from envsnap.snapshot.store import Store

    asked = BenchAsked(cmd=args.cmd, metric=args.metric, cwd=args.cwd,
                       lower_is_better=args.lower_is_better, repeat=args.repeat,
                       run_timeout=args.run_timeout,
                       # --ready alone starts the server the snapshots' benchmark recorded
                       serve=serve_spec(args) if args.serve is not None else None,
                       ready=args.ready, serve_timeout=args.serve_timeout)
    options = BisectOptions(max_repeat=args.max_repeat, with_patch=args.with_patch,
                            good_from_snapshot=args.good_from_snapshot,
                            keep_untracked=args.keep_untracked,
                            trust_foreign=args.trust_foreign,
                            others_checkouts=args.as_root_in_others_checkouts,
                            capture=CaptureOptions(connect_timeout=args.connect_timeout,
                                                   accept_new_host_keys=args.accept_new_host_keys))

    plot = check_plot(args.plot)
    width = columns()

    answered: list[BisectReport] = []

    def show(event: Said) -> None:  # runs as they end on stderr; the steps are the answer
        if isinstance(event, Answered):   # before the checkout is put back: never lost to it
            answered.append(event.report)
            status.say("\n".join(fold_all([*final_lines(event.report, width),
                                             medians_line(event.report)], width)), sys.stdout)
            return
        if isinstance(event, RunEnded):
            status.run_ended("\n".join(fold(event_line(event), width)))
            return
        if isinstance(event, Step) and event.kind != "good":   # the steps still to come
            status.expect(status.done + event.steps_left * args.repeat, estimated=True)
        status.say("\n".join(fold(event_line(event), width)), sys.stdout)

    try:
        with StatusLine(sys.stderr, "bisect: ", None) as status:
            report = bisect(Store(args.store), inventory_from(args), args.good,
                            args.bad, args.host, args.repo, asked, options, show,
                            review_foreign)
    except PutBackError:   # after the answer: its plot is drawn all the same
        if plot is not None and answered:
            plot_beside_error(plot, answered[0], args)
        raise
    if not answered:
        sys.stdout.write("".join(line + "\n" for line in
                                 fold_all([*final_lines(report, width), medians_line(report)],
                                          width)))
    if plot is not None:
        write_plot(plot, report, args)
    return ExitCode.DRIFT if report.regression else ExitCode.OK


def plot_beside_error(target: Path, report: BisectReport, args: argparse.Namespace) -> None:
    """The answer's plot when the put-back failed: one that cannot be written is a warning,
    never in the way of the error that says how to finish the put-back."""
    try:
        write_plot(target, report, args)
    except StoreError as exc:
        sys.stderr.write(f"warning: {exc}\n")


def write_plot(target: Path, report: BisectReport, args: argparse.Namespace) -> None:
    from envsnap.report.charts import svg_file
    from envsnap.report.figures import bisect_chart, metric_name
    from envsnap.snapshot.store import atomic_write

    first_bad = report.first_bad.sha if report.first_bad is not None else None
    # the metric as its runs' output names it, as the diff does; never the regex
    metric = metric_name(report.last_record) if report.last_record else "benchmark"
    lower = bool(report.last_record.get("lower_is_better")) if report.last_record \
        else args.lower_is_better   # the recorded benchmark's direction, when it ran that
    chart = bisect_chart(report.steps, first_bad, metric, lower)
    try:
        atomic_write(target, svg_file(chart), mode=0o644)
    except OSError as exc:
        raise StoreError(f"cannot write --plot {target}: {exc.strerror or exc}") from None
    print(f"plot: {target}")
