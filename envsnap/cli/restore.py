"""`envsnap restore`: its arguments, the yes/no question, and the rendering of the report
(part of the CLI, so it may print and prompt)."""
from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Callable

from envsnap.cli.options import (
    add_connection_options,
    add_others_checkouts_option,
    add_serve_options,
    add_trust_foreign_option,
    approved,
    ask,
    examples,
    exit_codes,
    inventory_from,
    non_negative_seconds,
    review_foreign,
    said_yes,
    serve_spec,
    utf8_text,
)
from envsnap.errors import ExitCode, UsageError
from envsnap.verdicts import REGRESSION

if TYPE_CHECKING:   # the restore code loads when the command runs, not with the parser
    from envsnap.cli.options import Commands
    from envsnap.hostops.locks import LockWait
    from envsnap.restore.policy import RecordedRerun
    from envsnap.restore.run import RestoreReport

EPILOG = examples(
    "envsnap restore before --check",
    "envsnap restore before --yes --rerun",
    "envsnap restore --at 2h --repo ~/sglang",
    "envsnap restore --abort",
) + exit_codes(
    (ExitCode.OK, "nothing to do, or restored and verified; --abort: rolled back (or its "
                  "journal cleared), or no restore was pending"),
    (ExitCode.DRIFT, "--check found drift, something still differs after restoring, or the "
                     "rerun is a regression"),
    (ExitCode.USAGE, "usage error: bad argument, a snapshot of another host without "
                     "--force-host, another user's checkout without "
                     "--as-root-in-others-checkouts, another restore's journal pending, no "
                     "recorded benchmark "
                     "for --rerun; --check: the restore itself would refuse (said after the "
                     "plan)"),
    (ExitCode.HOST, "a check failed before any change (a commit neither here nor on a remote, "
                    "a patch that does not apply: no journal is written), a checkout is locked "
                    "by another envsnap command (named; after --wait), or a step failed (the "
                    "journal keeps it resumable; `envsnap restore --abort` rolls it back)"),
    (ExitCode.INVALID, "invalid snapshot"),
    (ExitCode.DECLINED, "declined: answered no, or no --yes (--trust-foreign for a foreign "
                        "snapshot) without a terminal; nothing was changed"),
)


def register(commands: Commands) -> None:
    res = commands.add_parser("restore", epilog=EPILOG,
                              help="bring a host's code and env back to a snapshot")
    res.add_argument("label", metavar="LABEL", nargs="?",
                     help="the snapshot to restore (with --abort: the snapshot of the "
                          "restore to abort, when several are pending)")
    res.add_argument("--abort", action="store_true",
                     help="give up an interrupted or failed restore: roll its checkouts back "
                          "to its rollback point (pre-restore-<time>), or clear its journal "
                          "when that point is gone; --host names the host (default: the "
                          "only restore pending)")
    res.add_argument("--host", help="where to restore (default: the snapshot's host)")
    res.add_argument("--check", action="store_true",
                     help="show the plan, change nothing (default: plan, ask, apply)")
    res.add_argument("--yes", action="store_true",
                     help="apply without asking (default: ask at a terminal, else refuse)")
    res.add_argument("--rerun", action="store_true",
                     help="then rerun the snapshot's benchmark and give a verdict: its "
                          "recorded command is shown and runs only with --yes or a yes at a "
                          "terminal (default: no rerun)")
    res.add_argument("--rerun-cmd", metavar="CMD", type=utf8_text,
                     help="rerun with this command instead of the recorded one (implies "
                          "--rerun; the recorded metric, repeats and folder are kept)")
    res.add_argument("--at", metavar="TIME", type=utf8_text,
                     help="instead of LABEL: put the one --repo checkout back where its "
                          "reflog says HEAD stood at TIME (2h, 30m, 1d back from now, an ISO "
                          "time, or a snapshot label); uncommitted work is not in a reflog: "
                          "the work there now is stashed (default: restore LABEL)")
    res.add_argument("--repo", action="append", default=[], metavar="PATH", type=utf8_text,
                     help="a checkout to restore, as the snapshot records it (repeatable; "
                          "default: the inventory's repos, else those of a snapshot of your "
                          "own; a foreign snapshot restores only checkouts named so)")
    add_trust_foreign_option(res, "restore")
    res.add_argument("--wait", type=non_negative_seconds, default=0.0, metavar="SECONDS",
                     help="wait up to SECONDS for the envsnap command (restore, bisect, "
                          "explain) that holds a checkout's lock to end, saying who it waits "
                          "for (default 0: refuse at once, naming it)")
    res.add_argument("--force-host", action="store_true",
                     help="restore a snapshot taken on another host (default: refuse)")
    res.add_argument("--pip", action="store_true",
                     help="also pin drifted packages back with the host's pip (default: "
                          "report them only)")
    res.add_argument("--python", metavar="PATH",
                     help="interpreter on the host to run the agent with (default: the "
                          "inventory's python, else the one a snapshot of your own was "
                          "captured with, else python3)")
    res.add_argument("--host-wide", action="store_true",
                     help="may write a sitecustomize that every python of the host loads "
                          "(Debian's /usr/lib/python3.X one, which shadows a venv's own); "
                          "default: only inside the python's venv")
    add_others_checkouts_option(res, "restore")
    add_serve_options(res)
    add_connection_options(res)
    res.set_defaults(run=cmd_restore)


def ask_to_apply(yes: bool) -> Callable[[RestoreReport], bool]:
    """--yes, or a person at a terminal says so; a script without --yes is refused."""
    def confirm(report: RestoreReport) -> bool:
        return approved(yes, f"apply these changes to {report.host}? [y/N] ",
                        f"nothing was changed on {report.host}",
                        "restore would change it: pass --yes (or --check to only see the plan)")
    return confirm


def ask_to_rerun(yes: bool) -> Callable[[RecordedRerun], bool]:
    """The snapshot's recorded benchmark command is shown, then run only with --yes or a
    yes at a terminal: a snapshot is data, its command someone else's."""
    def confirm(recorded: RecordedRerun) -> bool:
        if not (yes or sys.stdin.isatty()):
            return False   # the one line that says so names the command
        where = f" (in {recorded.cwd})" if recorded.cwd else ""
        print(f"--rerun: the snapshot {recorded.label!r} records the benchmark command "
              f"{recorded.command!r}{where}")
        return yes or said_yes(ask("run this command after the restore? [y/N] "))
    return confirm


def say_wait(wait: LockWait) -> None:
    """--wait: who the restore waits for, and how long at most (stderr: output is the plan)."""
    sys.stderr.write(f"{wait.host}: waiting up to {wait.seconds:.3g} s for {wait.holder.doing()} "
                     f"({wait.holder.describe()}) to release the lock on {wait.checkout}\n")
    sys.stderr.flush()


def cmd_restore(args: argparse.Namespace) -> int:
    from envsnap.cli.output import columns
    from envsnap.fold import fold_all
    from envsnap.hosts.capture import CaptureOptions
    from envsnap.restore.at_time import AtTime, restore_at
    from envsnap.restore.render import outcome_lines, plan_lines
    from envsnap.restore.run import RestoreOptions, restore
    from envsnap.snapshot.store import Store

    if args.abort:
        return cmd_abort(args)
    if args.at is not None and (args.label is not None or len(args.repo) != 1):
        raise UsageError("--at TIME restores one checkout from its reflog: give exactly one "
                         "--repo PATH and no LABEL")
    if args.label is None and args.at is None:
        raise UsageError("restore needs the LABEL of a snapshot (or --repo PATH --at TIME, "
                         "or --abort)")
    rerun = args.rerun or args.rerun_cmd is not None
    serve = serve_spec(args)
    if serve is not None and not rerun:
        raise UsageError("--serve starts a server for the benchmark rerun: give --rerun too")
    options = RestoreOptions(label=args.label or "", host=args.host, check=args.check,
                             force_host=args.force_host, pip=args.pip,
                             rerun=rerun, serve=serve,
                             rerun_command=args.rerun_cmd, repos=tuple(args.repo),
                             python=args.python, trust_foreign=args.trust_foreign,
                             wait=args.wait, on_wait=say_wait, host_wide=args.host_wide,
                             others_checkouts=args.as_root_in_others_checkouts,
                             capture=CaptureOptions(connect_timeout=args.connect_timeout,
                                                    accept_new_host_keys=args.accept_new_host_keys))
    confirm = ask_to_apply(args.yes)
    width = columns()

    def show_then_confirm(report: RestoreReport) -> bool:
        print("\n".join(fold_all(plan_lines(report, check=False), width)))
        return confirm(report)

    if args.at is not None:
        report = restore_at(Store(args.store), inventory_from(args), options,
                            AtTime(args.repo[0], args.at), show_then_confirm,
                            review_foreign=review_foreign, confirm_rerun=ask_to_rerun(args.yes))
    else:
        report = restore(Store(args.store), inventory_from(args), options,
                         show_then_confirm, review_foreign=review_foreign,
                         confirm_rerun=ask_to_rerun(args.yes))
    if report.applied is None:
        if args.check or report.plan.outcome != "ok" or not (report.planned or report.pip_changes):
            print("\n".join(fold_all(plan_lines(report, check=args.check), width)))
    print("\n".join(fold_all(outcome_lines(report), width)))
    return restore_exit(report)


def cmd_abort(args: argparse.Namespace) -> int:
    """`restore --abort`: one line saying what was done (the failed rollback's own lines
    when it fails)."""
    from envsnap.cli.output import columns
    from envsnap.fold import fold_all
    from envsnap.hosts.capture import CaptureOptions
    from envsnap.restore.abort import abort
    from envsnap.restore.render import abort_lines
    from envsnap.restore.run import RestoreOptions
    from envsnap.snapshot.store import Store

    if args.check or args.rerun or args.rerun_cmd is not None or args.pip or args.repo \
            or args.serve is not None or args.at is not None:
        raise UsageError("--abort rolls back an interrupted restore: it takes only --host, "
                         "LABEL and the connection options")
    options = RestoreOptions(label=args.label or "", wait=args.wait, on_wait=say_wait,
                             python=args.python,
                             others_checkouts=args.as_root_in_others_checkouts,
                             capture=CaptureOptions(connect_timeout=args.connect_timeout,
                                                    accept_new_host_keys=args.accept_new_host_keys))
    done = abort(Store(args.store), inventory_from(args), args.host, args.label,
                 options, review_foreign=review_foreign)
    print("\n".join(fold_all(abort_lines(done, args.host), columns())))
    return abort_exit(done.report)


def abort_exit(report: RestoreReport | None) -> int:
    """0 once the checkouts are back (drift that no restore undoes is not the abort's)."""
    if report is None:
        return ExitCode.OK
    if report.plan.outcome != "ok" or (report.applied and report.applied.outcome != "ok"):
        return ExitCode.HOST
    return ExitCode.DRIFT if report.mismatches else ExitCode.OK


def restore_exit(report: RestoreReport) -> int:
    if report.refusals:      # --check: the run would refuse, with this code
        return ExitCode.USAGE
    if report.plan.outcome != "ok" or (report.applied and report.applied.outcome != "ok"):
        return ExitCode.HOST
    if report.rerun and report.rerun.verdict == REGRESSION:
        return ExitCode.DRIFT
    if report.applied is not None:
        left = report.mismatches or report.remaining or report.unwritable
        return ExitCode.DRIFT if left else ExitCode.OK
    return ExitCode.DRIFT if report.drift else ExitCode.OK
