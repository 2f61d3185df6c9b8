"""The command line: parse, call the library, render. The only module that prints or exits."""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, TextIO

from envsnap import __version__
from envsnap.cli.bisect import add_bisect_parser
from envsnap.cli.demo import add_demo_parser
from envsnap.cli.options import (
    EPILOG,
    add_capture_options,
    add_connection_options,
    add_store_option,
)
from envsnap.cli.report import add_report_parser
from envsnap.cli.restore import add_restore_parser
from envsnap.defaults import (
    DEFAULT_COLLECTOR_TIMEOUT,
    DEFAULT_FORKS,
    DEFAULT_REPEAT,
    DEFAULT_RUN_TIMEOUT,
    DEFAULT_SAMPLE_INTERVAL,
)
from envsnap.errors import EXIT_DRIFT, EXIT_HOST, EXIT_OK, EnvsnapError, UsageError
from envsnap.snapshot.store import Store, dump_yaml

if TYPE_CHECKING:  # capture and inventory load on use: `diff` and `show` need neither
    from envsnap.hosts.capture import Outcome

SNAPSHOT_SUFFIXES = (".yaml", ".yml", ".json")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="envsnap", epilog=EPILOG,
                                     description="Capture, diff and restore GPU host environments.")
    parser.add_argument("--version", action="version", version=f"envsnap {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    cap = commands.add_parser("capture", help="snapshot one or more hosts", epilog=EPILOG)
    cap.add_argument("hosts", nargs="+", metavar="HOST",
                     help="inventory host or group, [user@]host[:port], or 'local'")
    cap.add_argument("--label", help="snapshot label (a fleet is stored as LABEL/<host>)")
    add_capture_options(cap)
    cap.add_argument("--hot-path", action="append", default=[], metavar="GLOB",
                     help="code paths whose changes diff ranks first (repeatable)")
    cap.add_argument("--forks", type=int, default=DEFAULT_FORKS,
                     help=f"hosts captured at once (default {DEFAULT_FORKS})")
    cap.add_argument("--collector-timeout", type=float, default=DEFAULT_COLLECTOR_TIMEOUT)
    cap.add_argument("--max-patch-bytes", type=int,
                     help="cap on each recorded git patch (default 1 MiB)")
    add_connection_options(cap)
    cap.set_defaults(run=cmd_capture)

    lst = commands.add_parser("list", help="list stored snapshots")
    add_store_option(lst)
    lst.set_defaults(run=cmd_list)

    show = commands.add_parser("show", help="print one snapshot")
    show.add_argument("label", metavar="LABEL", help="a label in the store or a snapshot file")
    show.add_argument("--json", action="store_true", help="print JSON instead of YAML")
    add_store_option(show)
    show.set_defaults(run=cmd_show)
    add_diff_parser(commands)
    add_bench_parser(commands)
    add_play_parser(commands)
    add_restore_parser(commands)
    add_bisect_parser(commands)
    add_report_parser(commands)
    add_demo_parser(commands)
    return parser


def add_diff_parser(commands: Any) -> None:
    dif = commands.add_parser("diff", help="what changed between two snapshots, ranked",
                              epilog=EPILOG)
    dif.add_argument("snapshots", nargs="*", metavar="SNAPSHOT",
                     help="A B: labels in the store or snapshot files (older first)")
    form = dif.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="versioned JSON findings")
    form.add_argument("--markdown", action="store_true", help="markdown for an issue")
    dif.add_argument("--all", action="store_true",
                     help="include volatile readings, and long parts (patches) in full")
    dif.add_argument("--section", metavar="NAMES",
                     help="only these sections, comma-separated (e.g. git,env)")
    dif.add_argument("--fleet", nargs="+", metavar="FILE",
                     help="N snapshots (files, labels or folders): facts where hosts "
                          "differ from the majority")
    add_store_option(dif)
    dif.set_defaults(run=cmd_diff)


def add_bench_parser(commands: Any) -> None:
    ben = commands.add_parser("bench", epilog=EPILOG,
                              help="snapshot a host, run a benchmark N times on it, save both")
    ben.add_argument("host", metavar="HOST", help="inventory host, [user@]host[:port], or 'local'")
    ben.add_argument("--cmd", required=True, help="the benchmark, run through sh -c on the host")
    ben.add_argument("--metric", required=True, metavar="REGEX",
                     help="regex of the metric in its output: the first group (or the whole "
                          "match) of the last match")
    ben.add_argument("--repeat", type=int, default=DEFAULT_REPEAT,
                     help=f"runs (default {DEFAULT_REPEAT})")
    ben.add_argument("--lower-is-better", action="store_true",
                     help="the metric is a time or latency, not a throughput")
    ben.add_argument("--label", help="label of the snapshot that holds the runs")
    ben.add_argument("--cwd", help="folder to run it in (default: here for local, else home)")
    ben.add_argument("--sample-interval", type=float, default=DEFAULT_SAMPLE_INTERVAL,
                     metavar="S", help="GPU telemetry every S seconds during each run; 0: off")
    ben.add_argument("--run-timeout", type=float, default=DEFAULT_RUN_TIMEOUT, metavar="S",
                     help=f"kill a run after S seconds (default {DEFAULT_RUN_TIMEOUT:g})")
    add_capture_options(ben)
    add_connection_options(ben)
    ben.set_defaults(run=cmd_bench)


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
            self.stream.write(f"\r{self.done}/{self.total} hosts, {self.failed} failed")
            self.stream.write("\n" if self.done == self.total else "")
            self.stream.flush()


def render_outcome(outcome: Outcome, out: TextIO, err: TextIO) -> None:
    if outcome.error:
        err.write(f"error: {outcome.error}\n")
        return
    out.write(f"{outcome.host.name}: saved {outcome.label} -> {outcome.path} "
              f"({outcome.seconds:.2f}s)\n")
    for problem in outcome.problems:
        err.write(f"warning: {outcome.host.name}: {problem}\n")


def cmd_capture(args: argparse.Namespace) -> int:
    from envsnap.hosts.capture import CaptureOptions, capture
    from envsnap.hosts.inventory import load_inventory, resolve_hosts

    overrides: dict[str, Any] = {"repos": args.repo, "procs": args.proc, "python": args.python,
                                 "hot_paths": args.hot_path}
    hosts = resolve_hosts(args.hosts, load_inventory(args.inventory), overrides)
    options = CaptureOptions(label=args.label, force=args.force, forks=args.forks,
                             connect_timeout=args.connect_timeout,
                             collector_timeout=args.collector_timeout,
                             accept_new_host_keys=args.accept_new_host_keys,
                             max_patch_bytes=args.max_patch_bytes)
    outcomes = capture(hosts, Store(args.store), options, Progress(len(hosts), sys.stderr))
    for outcome in outcomes:
        render_outcome(outcome, sys.stdout, sys.stderr)
    failed = [o for o in outcomes if not o.ok]
    if failed and len(outcomes) > 1:
        sys.stderr.write(f"{len(failed)} of {len(outcomes)} hosts failed or partly failed\n")
    return EXIT_HOST if failed else EXIT_OK


def cmd_list(args: argparse.Namespace) -> int:
    entries = Store(args.store).entries()
    if not entries:
        print(f"no snapshots in {args.store}")
        return EXIT_OK
    width = max(len(entry.label) for entry in entries)
    for entry in entries:
        print(f"{entry.label:<{width}}  {entry.captured_at:<25}  {entry.host}")
    return EXIT_OK


def cmd_show(args: argparse.Namespace) -> int:
    document = Store(args.store).load(args.label)
    if args.json:
        print(json.dumps(document, indent=2, sort_keys=True))
    else:
        sys.stdout.write(dump_yaml(document))
    return EXIT_OK


def fleet_sources(names: list[str], store: Store) -> list[str]:
    """Files, labels, or folders (a fleet capture's LABEL/ in the store) of snapshots."""
    found: list[str] = []
    for name in names:
        folder = Path(name) if Path(name).is_dir() else store.root / name
        if folder.is_dir():
            found += sorted(str(p) for p in folder.iterdir() if p.suffix in SNAPSHOT_SUFFIXES)
        else:
            found.append(name)
    return found


def cmd_diff(args: argparse.Namespace) -> int:
    # Imported here, and only the form asked for: `diff` should start about as fast as
    # python loading the two files, and other commands should not pay for it at all.
    store = Store(args.store)
    sections = tuple(s.strip() for s in (args.section or "").split(",") if s.strip())
    color = sys.stdout.isatty() and "NO_COLOR" not in os.environ
    if args.fleet is not None:
        return diff_fleet(args, store, sections, color)
    if len(args.snapshots) != 2:
        raise UsageError("diff takes two snapshots, A and B (or --fleet FILE...)")
    from envsnap.diff.compare import DiffOptions, diff

    first, second = args.snapshots
    options = DiffOptions(include_volatile=args.all, sections=sections)
    result = diff(store.load(first), store.load(second), options, (first, second))
    if args.json or args.markdown:
        from envsnap.diff.render_formats import as_json, markdown

        sys.stdout.write(as_json(result, args.all) if args.json else markdown(result, args.all))
    else:
        from envsnap.diff.render_text import human

        sys.stdout.write(human(result, color, args.all))
    return EXIT_DRIFT if result.drift else EXIT_OK


def diff_fleet(args: argparse.Namespace, store: Store, sections: tuple[str, ...],
               color: bool) -> int:
    from envsnap.diff.fleet import fleet
    from envsnap.diff.render_fleet import fleet_human, fleet_json, fleet_markdown

    sources = fleet_sources(args.snapshots + args.fleet, store)
    if len(sources) < 2:
        raise UsageError("--fleet needs at least two snapshots")
    report = fleet([store.load(s) for s in sources], sources, sections)
    sys.stdout.write(fleet_json(report) if args.json else fleet_markdown(report)
                     if args.markdown else fleet_human(report, color))
    return EXIT_DRIFT if report.drift else EXIT_OK


def cmd_bench(args: argparse.Namespace) -> int:
    from envsnap.bench.run import BenchSpec, capture_and_bench, format_record
    from envsnap.hosts.capture import CaptureOptions
    from envsnap.hosts.inventory import load_inventory, resolve_hosts

    spec = BenchSpec(cmd=args.cmd, metric=args.metric, repeat=args.repeat,
                     lower_is_better=args.lower_is_better, cwd=args.cwd,
                     sample_interval=args.sample_interval, run_timeout=args.run_timeout)
    spec.check()   # a bad regex is refused before any host is contacted
    overrides: dict[str, Any] = {"repos": args.repo, "procs": args.proc, "python": args.python}
    hosts = resolve_hosts([args.host], load_inventory(args.inventory), overrides)
    if len(hosts) != 1:
        raise UsageError(f"bench runs on one host; {args.host!r} names {len(hosts)}")
    options = CaptureOptions(label=args.label, force=args.force,
                             connect_timeout=args.connect_timeout,
                             accept_new_host_keys=args.accept_new_host_keys)
    name = hosts[0].name

    def progress(text: str) -> None:  # long runs: show each as it ends, on stderr
        sys.stderr.write(f"{name}: {text}\n")
        sys.stderr.flush()

    outcome = capture_and_bench(hosts[0], spec, Store(args.store), options, progress)
    sys.stdout.write("".join(line + "\n" for line in format_record(outcome.record)))
    print(f"{hosts[0].name}: saved {outcome.label} -> {outcome.path}")
    for problem in outcome.problems:
        sys.stderr.write(f"warning: {hosts[0].name}: {problem}\n")
    return EXIT_HOST if outcome.problems else EXIT_OK


def add_play_parser(commands: Any) -> None:
    play = commands.add_parser("play", help="run an Ansible-style playbook on hosts",
                               epilog=EPILOG + "\n(play: 1 = only assert/verify tasks found "
                               "drift, 3 = a task or host failed)")
    play.add_argument("playbook", metavar="PLAYBOOK", help="YAML playbook (playbooks/*.yml)")
    play.add_argument("-e", "--extra-vars", action="append", default=[], metavar="KEY=VALUE",
                      help="variable for every task, highest precedence; also {...} or @file "
                           "(repeatable); -e snapshot=LABEL loads that snapshot")
    play.add_argument("-l", "--limit", action="append", default=[], metavar="HOST_PATTERN",
                      help="only these hosts (inventory names or groups, [user@]host[:port], "
                           "local; repeatable or comma-separated)")
    play.add_argument("--check", action="store_true", help="report what would change, change "
                                                           "nothing")
    play.add_argument("--diff", action="store_true", help="show file and repo changes as diffs")
    play.add_argument("--forks", type=int, default=DEFAULT_FORKS,
                      help=f"hosts worked on at once (default {DEFAULT_FORKS})")
    add_connection_options(play)
    play.set_defaults(run=cmd_play)


def cmd_play(args: argparse.Namespace) -> int:
    from envsnap.hosts.inventory import load_inventory
    from envsnap.playbook.load import load, parse_extra_vars
    from envsnap.playbook.render import render_event, render_recap
    from envsnap.playbook.run import PLAY_EXIT_CODES, RunOptions, run_playbook

    options = RunOptions(extra_vars=parse_extra_vars(args.extra_vars), limit=tuple(args.limit),
                         check=args.check, diff=args.diff, forks=args.forks,
                         connect_timeout=args.connect_timeout,
                         accept_new_host_keys=args.accept_new_host_keys)

    def show(event: Any) -> None:
        sys.stdout.write(render_event(event, args.diff))
        sys.stdout.flush()

    result = run_playbook(load(args.playbook), load_inventory(args.inventory),
                          Store(args.store), options, show)
    sys.stdout.write(render_recap(result, args.check))
    return PLAY_EXIT_CODES[result.outcome]


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    command: Callable[[argparse.Namespace], int] = args.run
    try:
        return command(args)
    except EnvsnapError as exc:
        sys.stderr.write(f"envsnap: error: {exc}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("envsnap: interrupted\n")
        return 130
    except BrokenPipeError:
        return EXIT_OK




if __name__ == "__main__":
    sys.exit(main())
