"""`envsnap watch`: the foreground watcher, its status, its installation as a service (part
of the CLI, so it may print). The watcher's library (envsnap/watch/) loads when the command
runs; each capture goes to the store's history (envsnap/history/)."""
from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from typing import TYPE_CHECKING

from envsnap.cli.options import (
    add_connection_options,
    approved,
    examples,
    exit_codes,
    positive_seconds,
    selected_hosts,
    utf8_text,
)
from envsnap.defaults import DEFAULT_COLLECTOR_TIMEOUT
from envsnap.errors import ExitCode, StoreError, UsageError
from envsnap.text import duration

if TYPE_CHECKING:
    from envsnap.cli.options import Commands
    from envsnap.snapshot.store import Store
    from envsnap.watch.install import Change, Service
    from envsnap.watch.status import CaptureRun, WatchStatus

EPILOG = examples(
    "envsnap watch local --proc sglang.launch_server --repo ~/sglang",
    "envsnap watch local gpu1 --every 30m --once",
    'envsnap watch local --once --reason "slurm job 4242 start"',
    "envsnap watch local --proc vllm --install",
    "envsnap watch --status",
    "envsnap watch --uninstall --yes",
) + exit_codes(
    (ExitCode.OK, "stopped (SIGTERM, --for), --once captured every host, installed, "
                  "uninstalled, or the status shown"),
    (ExitCode.USAGE, "usage error: bad argument, bad period, unknown host, a store that "
                     "cannot be written, another watcher of these hosts runs"),
    (ExitCode.HOST, "--once: a host's capture failed; --install/--uninstall: systemctl or "
                    "crontab failed"),
    (ExitCode.DECLINED, "--install/--uninstall answered no, or no --yes without a terminal"),
)


def period(text: str) -> float:
    from envsnap.watch.period import parse_period

    try:
        return parse_period(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


period.__name__ = "a period"   # argparse names the type in some messages


def register(commands: Commands) -> None:
    watch = commands.add_parser(
        "watch", epilog=EPILOG,
        help="keep a history of hosts: a capture every period and at each worker's start",
        description="Captures each HOST at start and every --every; on this machine also "
                    "whenever a new process matching a --proc pattern starts (its env and "
                    "argv read at its start, so a restarted worker's old and new env are "
                    "both on record). Each capture goes to the store's history. It runs in "
                    "the foreground until SIGTERM or Ctrl-C; --install keeps it running as "
                    "a systemd user service (else a cron line). It never signals, restarts "
                    "or touches a worker.")
    watch.add_argument("hosts", nargs="*", metavar="HOST",
                       help="inventory host or group, [user@]host[:port], or 'local'")
    watch.add_argument("--every", type=period, default="10m", metavar="PERIOD",
                       help="capture every PERIOD: 30s, 10m, 2h, 1d (default 10m)")
    watch.add_argument("--proc", action="append", default=[], metavar="PATTERN",
                       type=utf8_text,
                       help="record env of running processes whose cmdline matches, and on "
                            "this machine capture when a new one starts (repeatable; "
                            "default: the inventory's procs, else none)")
    watch.add_argument("--repo", action="append", default=[], metavar="PATH", type=utf8_text,
                       help="git checkout to record (repeatable; default: the inventory's "
                            "repos, else none)")
    watch.add_argument("--python", type=utf8_text,
                       help="interpreter on the host to run the agent with (default: the "
                            "inventory's python, else python3 on the host's PATH)")
    watch.add_argument("--once", action="store_true",
                       help="capture each host once, then end")
    watch.add_argument("--reason", type=utf8_text, metavar="TEXT",
                       help="with --once: the reason the record gives (default 'watch "
                            "started'), e.g. the job a Slurm prolog captures for")
    watch.add_argument("--for", dest="duration", type=period, metavar="PERIOD",
                       help="end after PERIOD (default: run until stopped)")
    watch.add_argument("--collector-timeout", type=positive_seconds,
                       default=DEFAULT_COLLECTOR_TIMEOUT, metavar="S",
                       help=f"seconds each collector may take on the host (default "
                            f"{DEFAULT_COLLECTOR_TIMEOUT:g})")
    what = watch.add_mutually_exclusive_group()
    what.add_argument("--install", action="store_true",
                      help="keep this watcher running: a systemd user service, else a cron "
                           "line (shows what it writes and asks)")
    what.add_argument("--uninstall", action="store_true",
                      help="remove what --install wrote: for the HOSTs given, else every "
                           "watcher's (shows it and asks)")
    what.add_argument("--status", action="store_true",
                      help="each watcher of the store: last capture, failures, its CPU")
    watch.add_argument("--scheduler", choices=("systemd", "cron"),
                       help="with --install: what runs the watcher (default: systemd where "
                            "a user instance runs, else cron)")
    watch.add_argument("--yes", action="store_true",
                       help="with --install/--uninstall: make the change without asking")
    add_connection_options(watch)
    watch.set_defaults(run=cmd_watch)


def cmd_watch(args: argparse.Namespace) -> int:
    from envsnap.snapshot.store import Store

    store = Store(args.store)
    if args.status:
        return show_status(store)
    if args.scheduler is not None and not args.install:
        raise UsageError("--scheduler is about --install: give --install too")
    if args.uninstall:
        return uninstall(args)
    if args.reason is not None and not args.once:
        raise UsageError("--reason names a one-off capture: give --once too")
    if args.reason is not None and not args.reason.strip():
        raise UsageError("--reason is empty: say why this capture is made")
    if not args.hosts:
        raise UsageError("give the hosts to watch: `envsnap watch local`, or --status")
    for flag, given in (("--once", args.once), ("--for", args.duration is not None)):
        if given and args.install:
            raise UsageError(f"{flag} and --install do not go together: an installed "
                             "watcher runs until it is stopped")
    if args.install:
        return install(args, store)
    return watch_hosts(args, store)


# ---- the watcher ------------------------------------------------------------------------------

def watch_hosts(args: argparse.Namespace, store: Store) -> int:
    from envsnap.history.store import History
    from envsnap.hosts.agentconfig import CaptureOptions
    from envsnap.watch.period import period_text
    from envsnap.watch.run import STARTED, Watcher, WatchPlan, capture_document
    from envsnap.watch.status import WatcherLock, watcher_runs, write_status

    hosts = selected_hosts(args, args.hosts, {"repos": args.repo, "procs": args.proc,
                                              "python": args.python})
    plan = WatchPlan(hosts=tuple(hosts), every=args.every, once=args.once,
                     duration=args.duration, reason=(args.reason or STARTED).strip())
    store.check_writable()
    lock = None if args.once else WatcherLock(store.root, plan.name)
    # a one-off capture (a Slurm prolog's) beside a watcher of the same hosts records as
    # it does, but leaves that watcher's status file to it: --status keeps saying it runs
    writes_status = not (args.once and watcher_runs(store.root, plan.name))
    options = CaptureOptions(connect_timeout=args.connect_timeout,
                             collector_timeout=args.collector_timeout,
                             accept_new_host_keys=args.accept_new_host_keys)
    history = History.of_store(store)
    said = [0]

    def on_status(status: WatchStatus) -> None:
        if status.captures > said[0] and status.last is not None:
            said[0] = status.captures
            say_capture(status.last)
        if not writes_status:
            return
        try:
            write_status(store.root, status)
        except StoreError as exc:   # the watch goes on: the captures are what matters
            sys.stderr.write(f"warning: {exc}\n")

    watcher = Watcher(plan, lambda host: capture_document(host, options),
                      lambda document, reason: history.record(document, reason=reason),
                      on_status)
    stopped = threading.Event()

    def on_sigterm(signum: int, frame: object) -> None:
        stopped.set()
        watcher.stop.set()

    if not args.once:
        print(f"watching {', '.join(host.name for host in hosts)}: a capture every "
              f"{period_text(args.every)}" + (", and at each start of "
                                           + " or ".join(plan.patterns())
                                           if plan.local and plan.patterns() else "")
              + f"; history in {store.root / 'history'}")
    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        runs = watcher.run()
    finally:
        signal.signal(signal.SIGTERM, previous)
        if lock is not None:
            lock.release()
    if stopped.is_set():
        print("stopped (SIGTERM)")
    failed = [run for run in runs if not run.ok]
    return ExitCode.HOST if args.once and failed else ExitCode.OK


def say_capture(run: CaptureRun) -> None:
    when = clock_text(run.at)
    if run.ok:
        print(f"{when} {run.host}: recorded ({run.reason}, {run.seconds:.2f}s)")
    else:
        sys.stderr.write(f"warning: {when} {run.host}: capture failed ({run.reason}): "
                         f"{run.error}; tried again next period\n")


def clock_text(epoch: float, with_date: bool = False) -> str:
    from datetime import datetime, timezone

    shape = "%Y-%m-%d %H:%M:%S UTC" if with_date else "%H:%M:%S"
    return datetime.fromtimestamp(epoch, timezone.utc).strftime(shape)


# ---- --status -------------------------------------------------------------------------------

def show_status(store: Store) -> int:
    from envsnap.watch.status import read_statuses

    statuses = read_statuses(store.root)
    if not statuses:
        print(f"no watcher has written a status in {store.where}; `envsnap watch HOST` "
              "starts one")
        return ExitCode.OK
    for status in statuses:
        if isinstance(status, StoreError):
            sys.stderr.write(f"warning: {status}\n")
            continue
        sys.stdout.write(status_text(status))
    return ExitCode.OK


def status_text(status: WatchStatus) -> str:
    from envsnap.watch.period import period_text
    from envsnap.watch.status import is_alive

    if is_alive(status):
        state = f"running (pid {status.pid})"
    elif status.running:
        state = f"not running: pid {status.pid} is gone without saying it ended"
    else:
        state = f"ended at {clock_text(status.updated_at, True)}"
    lines = [f"{status.name}: {state}, started {clock_text(status.started_at, True)}, "
             f"a capture every {period_text(status.every)}"]
    if status.last is not None:
        last = status.last
        outcome = "ok" if last.ok else f"failed: {last.error}"
        lines.append(f"  last capture  {clock_text(last.at, True)} {last.host} "
                     f"({last.reason}): {outcome}, {last.seconds:.2f}s")
    failures = ""
    if status.last_failure is not None:
        failure = status.last_failure
        failures = f" (the last at {clock_text(failure.at, True)}, {failure.host}: " \
                   f"{failure.error})"
    lines.append(f"  captures      {status.captures}, {status.failures} failed{failures}")
    lines.append(f"  CPU           {status.cpu_share:.3%} of a core of its own, "
                 f"{status.total_cpu_share:.3%} with its captures' agents, over "
                 f"{duration(status.wall_seconds)}"
                 + (f"; it read {status.new_processes} new processes" if status.new_processes
                    else ""))
    return "".join(line + "\n" for line in lines)


# ---- --install, --uninstall -------------------------------------------------------------------

def install(args: argparse.Namespace, store: Store) -> int:
    from envsnap.watch.install import chosen_scheduler, plan_install
    from envsnap.watch.status import folder_of

    store.check_writable()
    service = service_of(args, store)
    try:   # where the service's log and lock go, before anything is installed
        folder_of(store.root).mkdir(exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot make {folder_of(store.root)}: {exc.strerror}") from None
    change = plan_install(service, chosen_scheduler(args.scheduler))
    if not change.needed:
        print(f"already installed in {change.target}: nothing to change")
        return ExitCode.OK
    show_change(change)
    approved(args.yes, "install it? [y/N] ", f"nothing installed in {change.target}",
             "pass --yes to install without a terminal")
    from envsnap.watch.install import apply

    apply(change)
    print(f"installed in {change.target}" + (f"; {' ; '.join(' '.join(c) for c in change.commands)}"
                                             if change.commands else ""))
    return ExitCode.OK


def service_of(args: argparse.Namespace, store: Store) -> Service:
    """The installed watcher: this envsnap, the same arguments, the store by its absolute
    path, in this folder with this PATH."""
    from envsnap.watch.install import KEPT_VARIABLES, Service, envsnap_program
    from envsnap.watch.period import period_text
    from envsnap.watch.status import folder_of, watcher_name

    hosts = selected_hosts(args, args.hosts, {"repos": args.repo, "procs": args.proc,
                                              "python": args.python})
    name = watcher_name([host.name for host in hosts])
    root = store.root.absolute()
    words = ["watch", *args.hosts, "--every", period_text(args.every)]
    for flag, values in (("--proc", args.proc), ("--repo", args.repo)):
        for value in values:
            words += [flag, value]
    if args.python:
        words += ["--python", args.python]
    if args.inventory:
        words += ["--inventory", os.path.abspath(args.inventory)]
    if args.collector_timeout != DEFAULT_COLLECTOR_TIMEOUT:
        words += ["--collector-timeout", f"{args.collector_timeout:g}"]
    if args.accept_new_host_keys:
        words.append("--accept-new-host-keys")
    words += ["--store", str(root)]
    environment = tuple((name, os.environ[name]) for name in KEPT_VARIABLES
                        if os.environ.get(name))
    return Service(name=name, argv=(*envsnap_program(), *words), workdir=os.getcwd(),
                   environment=environment, lock=str(folder_of(root) / f"{name}.cron.lock"),
                   log=str(folder_of(root) / f"{name}.log"))


def show_change(change: Change) -> None:
    if change.new is None:
        print(f"will remove from {change.target}:")
        sys.stdout.write(indented(change.old or ""))
        return
    if change.old is not None:
        whose = "envsnap's" if change.ours else "NOT written by envsnap"
        print(f"{change.target} holds a different watcher ({whose}); it will be replaced. "
              "Now:")
        sys.stdout.write(indented(change.old))
    print(f"will write in {change.target}:")
    sys.stdout.write(indented(change.new))
    for command in change.commands:
        print(f"then run: {' '.join(command)}")


def indented(text: str) -> str:
    return "".join(f"    {line}\n" for line in text.splitlines())


def uninstall(args: argparse.Namespace) -> int:
    from envsnap.watch.install import apply, plan_uninstall
    from envsnap.watch.status import watcher_name

    name = None
    if args.hosts:
        hosts = selected_hosts(args, args.hosts, {})
        name = watcher_name([host.name for host in hosts])
    changes = plan_uninstall(name)
    if not changes:
        print("nothing to remove: no watcher installed by envsnap"
              + (f" for {name}" if name else ""))
        return ExitCode.OK
    for change in changes:
        show_change(change)
    approved(args.yes, "remove it? [y/N] ", "nothing removed",
             "pass --yes to remove without a terminal")
    for change in changes:
        apply(change)
        print(f"removed from {change.target}")
    return ExitCode.OK
