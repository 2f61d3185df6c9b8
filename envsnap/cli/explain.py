"""`envsnap explain`: its arguments and its command (part of the CLI, so it may print)."""
from __future__ import annotations

import argparse
import sys
from contextlib import ExitStack
from typing import TYPE_CHECKING, Callable

from envsnap.cli.options import (
    add_connection_options,
    add_others_checkouts_option,
    add_serve_options,
    add_trust_foreign_option,
    approved,
    examples,
    exit_codes,
    inventory_from,
    positive_int,
    positive_seconds,
    review_foreign,
    serve_spec,
    two_or_more,
    utf8_text,
)
from envsnap.defaults import DEFAULT_BISECT_REPEAT, DEFAULT_RUN_TIMEOUT
from envsnap.errors import ExitCode

if TYPE_CHECKING:   # explain's modules load when the command runs, not for the parser
    from envsnap.cli.options import Commands
    from envsnap.cli.progress import Tally
    from envsnap.explain.differences import Difference
    from envsnap.explain.run import Plan

EPILOG = examples(
    "envsnap explain good bad --cmd 'python bench.py' --metric 'tok/s: ([0-9.]+)'",
    "envsnap explain good bad --cmd ./bench.sh --metric '([0-9.]+) tok/s' --pip",
) + exit_codes(
    (ExitCode.OK, "no regression between GOOD's state and the host now (or can't tell whether "
                  "there is one)"),
    (ExitCode.DRIFT, "regression: its causes found (or some left undecided by the noise)"),
    (ExitCode.USAGE, "usage error: bad argument, unknown label or repo, another host without "
                     "--force-host, nothing that can be put back, another user's checkout "
                     "without --as-root-in-others-checkouts"),
    (ExitCode.HOST, "host unreachable, or the benchmark or server fails at a state"),
    (ExitCode.INVALID, "invalid snapshot"),
    (ExitCode.DECLINED, "declined: answered no, or no --yes (--trust-foreign for a foreign "
                        "snapshot) without a terminal; nothing was changed"),
    (ExitCode.PUT_BACK, "the answer printed, then the host not entirely put back: the "
                        "commands that finish it are printed; your work is safe"),
)


def register(commands: Commands) -> None:
    exp = commands.add_parser("explain", epilog=EPILOG,
                              help="find which differences since a good snapshot make the "
                                   "benchmark slower, by putting them back one set at a time")
    exp.add_argument("good", metavar="GOOD", help="snapshot of the fast state")
    exp.add_argument("bad", metavar="BAD",
                     help="snapshot of the slow state (its workers' env; the host's own "
                          "state is captured when explain starts)")
    exp.add_argument("--host", help="where to run (default: the BAD snapshot's host)")
    exp.add_argument("--repo", action="append", default=[], metavar="PATH", type=utf8_text,
                     help="checkout to search (repeatable; default: every one both "
                          "snapshots recorded)")
    exp.add_argument("--cmd", required=True, type=utf8_text,
                     help="the benchmark, run through sh -c")
    exp.add_argument("--metric", required=True, metavar="REGEX", type=utf8_text,
                     help="regex of the metric: first group (or whole match) of the last match")
    exp.add_argument("--repeat", type=positive_int, default=DEFAULT_BISECT_REPEAT,
                     help=f"runs per benchmark invocation (default {DEFAULT_BISECT_REPEAT})")
    exp.add_argument("--max-invocations", type=two_or_more, metavar="N",
                     help="never run the benchmark more than N times (the 2 endpoints included); "
                          "what is still undecided then is reported so (default: 3 x the "
                          "bound for two causes)")
    exp.add_argument("--lower-is-better", action="store_true",
                     help="the metric is a time or latency (default: a throughput, higher "
                          "is better)")
    exp.add_argument("--pip", action="store_true",
                     help="search changed package versions too: each trial pins them with "
                          "pip (--no-deps), pinned back at the end (default: listed, not "
                          "searched)")
    exp.add_argument("--keep-untracked", action="store_true",
                     help="leave untracked files in the checkouts (a benchmark script kept "
                          "there) (default: stash them with the rest of your work)")
    exp.add_argument("--cwd", type=utf8_text,
                     help="folder to run the benchmark in (default, as for bench: here for "
                          "local, the login home over SSH)")
    exp.add_argument("--run-timeout", type=positive_seconds, default=DEFAULT_RUN_TIMEOUT,
                     metavar="S",
                     help=f"kill a run after S seconds (default {DEFAULT_RUN_TIMEOUT:g})")
    exp.add_argument("--host-wide", action="store_true",
                     help="may switch a sitecustomize or .pth file that every python of "
                          "the host loads (the system python's site-packages, Debian's "
                          "/usr/lib/python3.X/sitecustomize.py); default: only inside the "
                          "python's venv")
    exp.add_argument("--force-host", action="store_true",
                     help="run on a host other than GOOD's (default: refuse)")
    add_trust_foreign_option(exp, "put in place the patch, env and startup files of")
    exp.add_argument("--yes", action="store_true",
                     help="start without asking (default: ask at a terminal, else refuse)")
    add_serve_options(exp)   # the workers' env differences go to it (else to --cmd)
    add_others_checkouts_option(exp, "explain")
    add_connection_options(exp)
    exp.set_defaults(run=cmd_explain)


def ask_to_start(yes: bool, width: int) -> Callable[[Plan], bool]:
    def confirm(plan: Plan) -> bool:
        from envsnap.explain.render import plan_lines
        from envsnap.fold import fold_all

        sys.stdout.write("".join(line + "\n" for line in fold_all(plan_lines(plan), width)))
        sys.stdout.flush()
        return approved(yes, f"run the benchmark at these states on {plan.host}? [y/N] ",
                        f"nothing was changed on {plan.host}",
                        "explain would check out and patch its checkouts (put back at the "
                        "end): pass --yes")
    return confirm


def trial_text(tally: Tally) -> str:
    """explain's status: "trial 4, 3 of 30 invocations used, 1m02s elapsed, ETA at most ~5m"
    (a tally of invocations, the bound as its total: the ETA is the bound's, at the pace so
    far; the search usually stops well before it)."""
    from envsnap.cli.progress import duration, eta_seconds

    eta = eta_seconds(tally)
    trial = min(tally.done + 1, tally.total or tally.done + 1)
    return (f"trial {trial}, {tally.done} of {tally.total} invocations used, "
            f"{duration(tally.elapsed)} elapsed, " +
            ("ETA after the first trial" if eta is None else f"ETA at most ~{duration(eta)}"))


def cmd_explain(args: argparse.Namespace) -> int:
    from envsnap.bench.run import BenchSpec
    from envsnap.bisect.run import RunEnded
    from envsnap.cli.output import columns
    from envsnap.cli.progress import StatusLine
    from envsnap.explain.render import event_line, final_lines
    from envsnap.explain.run import (
        Answer,
        ExplainOptions,
        ExplainReport,
        Measured,
        Said,
        explain_run,
    )
    from envsnap.fold import fold, fold_all
    from envsnap.hosts.capture import CaptureOptions
    from envsnap.snapshot.store import Store

    spec = BenchSpec(cmd=args.cmd, metric=args.metric, repeat=args.repeat,
                     lower_is_better=args.lower_is_better, cwd=args.cwd,
                     sample_interval=None, run_timeout=args.run_timeout, serve=serve_spec(args))
    options = ExplainOptions(repos=tuple(args.repo), force_host=args.force_host,
                             trust_foreign=args.trust_foreign,
                             others_checkouts=args.as_root_in_others_checkouts,
                             keep_untracked=args.keep_untracked, pip=args.pip,
                             host_wide=args.host_wide, max_invocations=args.max_invocations,
                             capture=CaptureOptions(connect_timeout=args.connect_timeout,
                                                    accept_new_host_keys=args.accept_new_host_keys))
    items: list[Difference] = []
    # Started once the plan is approved: a status rewritten every second would cut into
    # the question asked at the terminal.
    status = StatusLine(sys.stderr, "explain: ", None, text=trial_text)

    started = ExitStack()
    width = columns()

    def confirm(plan: Plan) -> bool:
        items.extend(plan.differences.items)
        approved = bool(ask_to_start(args.yes, width)(plan))
        status.expect(plan.ceiling, estimated=False)
        started.enter_context(status)
        return approved

    answered: list[ExplainReport] = []

    def show(event: Said) -> None:   # runs on stderr as they end; each state on stdout
        if isinstance(event, Answer):   # before the host is put back: never lost to it
            answered.append(event.report)
            status.say("\n".join(fold_all(final_lines(event.report), width)), sys.stdout)
            return
        line = "\n".join(fold(event_line(event, items), width))
        if isinstance(event, RunEnded):
            status.say(line)
        elif isinstance(event, Measured):   # one invocation more of the bound
            status.run_ended(line, sys.stdout)
        else:
            status.say(line, sys.stdout)

    with started:
        report = explain_run(Store(args.store), inventory_from(args),
                             (args.good, args.bad), args.host, spec, options, confirm, show,
                             review_foreign)
    if not answered:   # nothing ran (not approved): no answer came before
        sys.stdout.write("".join(line + "\n" for line in fold_all(final_lines(report), width)))
    return ExitCode.DRIFT if report.regression else ExitCode.OK
