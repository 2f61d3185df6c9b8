"""`envsnap capture`: its arguments, the progress line and each host's outcome (part of the
CLI, so it may print). Capture and the inventory load when the command runs: building the
parser must not load them."""
from __future__ import annotations

import argparse
import sys
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, TextIO

from envsnap.cli.options import (
    add_capture_options,
    add_connection_options,
    add_limit_option,
    examples,
    exit_codes,
    non_negative_int,
    positive_int,
    positive_seconds,
    selected_hosts,
    utf8_text,
)
from envsnap.cli.output import control
from envsnap.defaults import DEFAULT_COLLECTOR_TIMEOUT, DEFAULT_FORKS
from envsnap.errors import ExitCode, StoreError

if TYPE_CHECKING:
    from envsnap.cli.options import Commands
    from envsnap.hosts.agentconfig import CaptureOptions
    from envsnap.hosts.capture import Outcome
    from envsnap.hosts.headstart import EarlyAgent
    from envsnap.hosts.inventory import Host
    from envsnap.hosts.inventory_graph import Vars

EPILOG = examples(
    "envsnap capture local --label before",
    "envsnap capture alice@gpu1 --repo ~/sglang --proc sglang.launch_server",
    "envsnap capture gpu --inventory hosts.yml --label run1",
    "envsnap capture gpu --inventory hosts.yml --limit @snapshots/run1.retry",
) + exit_codes(
    (ExitCode.OK, "every host captured in full"),
    (ExitCode.USAGE, "usage error: bad argument, unknown host or group, bad label template, "
                     "existing label (or one another capture saved meanwhile), store not "
                     "writable, bad inventory"),
    (ExitCode.HOST, "a host unreachable, refused, or partly failed (a collector or repo failed: "
                    "its snapshot is still saved)"),
)


def register(commands: Commands) -> None:
    cap = commands.add_parser("capture", help="snapshot one or more hosts", epilog=EPILOG)
    cap.add_argument("hosts", nargs="+", metavar="HOST",
                     help="inventory host or group, [user@]host[:port], or 'local'")
    cap.add_argument("--label", help="snapshot label; a fleet is stored as LABEL/<host> "
                                     "(default: the host and the time of capture). A "
                                     "template may hold {host} (local: the short hostname), "
                                     "{date} and {time} (UTC), {rank} (the launcher's: "
                                     "SLURM_PROCID, RANK, ...; else 0): 'run1/{host}'")
    add_capture_options(cap)
    cap.add_argument("--hot-path", action="append", default=[], metavar="GLOB", type=utf8_text,
                     help="code paths whose changes diff ranks first (repeatable; default: "
                          "the inventory's hot_paths, else none)")
    cap.add_argument("--forks", type=positive_int, default=DEFAULT_FORKS,
                     help=f"hosts captured at once (default {DEFAULT_FORKS})")
    cap.add_argument("--collector-timeout", type=positive_seconds,
                     default=DEFAULT_COLLECTOR_TIMEOUT, metavar="S",
                     help=f"seconds each collector may take on the host (default "
                          f"{DEFAULT_COLLECTOR_TIMEOUT:g})")
    cap.add_argument("--max-patch-bytes", type=non_negative_int, metavar="BYTES",
                     help="cap on each recorded git patch (default 1 MiB)")
    cap.add_argument("--history", type=positive_int, metavar="N",
                     help="most commits of git history recorded per repository (default "
                          "5000): the newest 200, and all that HEAD gained since the oldest "
                          "reflog entry recorded, up to N")
    add_limit_option(cap)
    add_connection_options(cap)
    cap.set_defaults(run=cmd_capture)


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
            control(self.stream, "\r")
            self.stream.write(f"{self.done}/{self.total} hosts, {self.failed} failed")
            self.stream.write("\n" if self.done == self.total else "")
            self.stream.flush()


def render_outcome(outcome: Outcome, out: TextIO, err: TextIO) -> None:
    if outcome.error:
        err.write(f"envsnap: error: {outcome.error}\n")
        return
    out.write(f"{outcome.host.name}: saved {outcome.label} -> {outcome.path} "
              f"({outcome.seconds:.2f}s)\n")
    for problem in outcome.problems:
        err.write(f"warning: {outcome.host.name}: {problem}\n")
    for note in outcome.notes:
        err.write(f"note: {outcome.host.name}: {note}\n")


def cmd_capture(args: argparse.Namespace) -> int:
    overrides: Vars = {"repos": args.repo, "procs": args.proc, "python": args.python,
                       "hot_paths": args.hot_path}
    hosts = selected_hosts(args, args.hosts, overrides)
    # What waits on nothing else starts before the capture's modules load: a remote first
    # host's handshake (a fleet's others start in the workers, at once: here they would
    # start one by one), or the agent of a capture of this machine.
    with connecting_first(hosts[0], args):
        from envsnap.hosts.agentconfig import CaptureOptions
        from envsnap.hosts.headstart import agent_started_early

        options = CaptureOptions(label=args.label, force=args.force, forks=args.forks,
                                 connect_timeout=args.connect_timeout,
                                 collector_timeout=args.collector_timeout,
                                 accept_new_host_keys=args.accept_new_host_keys,
                                 max_patch_bytes=args.max_patch_bytes, history=args.history)
        with agent_started_early(hosts, options) as early:
            return capture_hosts(args, hosts, options, early)


def connecting_first(host: Host, args: argparse.Namespace) -> AbstractContextManager[None]:
    """The handshake of `host` under way for the block, unless it is this machine (whose
    agent is started early instead: hosts/headstart.py)."""
    if host.is_local:
        return nullcontext()
    from envsnap.hosts.connect import connecting_early

    return connecting_early([host], args.connect_timeout, args.accept_new_host_keys)


def capture_hosts(args: argparse.Namespace, hosts: list[Host], options: CaptureOptions,
                  early: EarlyAgent | None) -> int:
    from envsnap.hosts.capture import capture, retry_of, write_retry_file
    from envsnap.snapshot.store import Store

    store = Store(args.store)
    retry = retry_of(hosts, store, options)
    if retry.skipped:
        print(f"skipped {len(retry.skipped)} hosts already in {args.label!r}: "
              f"{', '.join(retry.skipped)} (--force captures them again)")
    hosts = retry.hosts
    outcomes = capture(hosts, store, options, Progress(len(hosts), sys.stderr), retry.labels,
                       early)
    for outcome in outcomes:
        render_outcome(outcome, sys.stdout, sys.stderr)
    failed = [o for o in outcomes if not o.ok]
    if failed and len(outcomes) > 1:
        try:
            retry_file = write_retry_file(store, outcomes)
            again = f"; their names are in {retry_file} (--limit @{retry_file})" \
                if retry_file else ""
        except StoreError as exc:   # the snapshots are saved: said on the same line
            again = f"; no retry file: {exc}"
        sys.stderr.write(f"{len(failed)} of {len(outcomes)} hosts failed or partly "
                         f"failed{again}\n")
    if failed and all(outcome.exit_code == ExitCode.USAGE for outcome in failed):
        return ExitCode.USAGE   # only labels other captures saved meanwhile, or the store refused
    return ExitCode.HOST if failed else ExitCode.OK
