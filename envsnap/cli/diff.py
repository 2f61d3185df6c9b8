"""`envsnap diff`: its arguments and its command (part of the CLI, so it may print).

Start-up matters here: `diff` should start about as fast as python loading the two files, so
this module imports nothing heavy, and the command imports only the renderer asked for."""
from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from envsnap.cli.options import add_store_option, exit_codes
from envsnap.errors import ExitCode, UsageError
from envsnap.verdicts import REGRESSION

if TYPE_CHECKING:
    from envsnap.cli.options import Commands
    from envsnap.snapshot.records import Snapshot
    from envsnap.snapshot.store import Store

DRIFT = "drift"
FAIL_ON = (DRIFT, REGRESSION)   # any drift, or only a benchmark's regression verdict

EPILOG = exit_codes(
    (ExitCode.OK, "no drift; with --fail-on regression: no benchmark regression, whatever "
                  "drifted"),
    (ExitCode.DRIFT, "drift found (a result, not an error); with --fail-on regression: the "
                     "benchmark both snapshots ran is a regression (with --fleet: on some host)"),
    (ExitCode.USAGE, "usage error: bad argument, unknown label or section, fewer than two "
                     "snapshots"),
    (ExitCode.INVALID, "invalid snapshot (corrupt, not a snapshot, newer schema)"),
)


def register(commands: Commands) -> None:
    dif = commands.add_parser("diff", help="what changed between two snapshots, ranked",
                              epilog=EPILOG)
    dif.add_argument("snapshots", nargs="*", metavar="SNAPSHOT",
                     help="A B: labels in the store or snapshot files (older first)")
    form = dif.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true",
                      help="versioned JSON findings (default: text for a person)")
    form.add_argument("--markdown", action="store_true",
                      help="markdown for an issue (default: text for a person)")
    dif.add_argument("--all", action="store_true",
                     help="include volatile readings, and long parts (patches) in full "
                          "(default: leave them out, long parts shortened)")
    dif.add_argument("--section", metavar="NAMES",
                     help="only these sections, comma-separated, e.g. git,env (default: all)")
    dif.add_argument("--fleet", nargs="+", metavar="FILE",
                     help="N snapshots (files, labels or folders): facts where hosts "
                          "differ from the majority")
    dif.add_argument("--fail-on", choices=FAIL_ON, default=DRIFT,
                     help="what exits 1: drift (any fact changed) or regression (only a "
                          "benchmark regression verdict, for CI; drift alone exits 0) "
                          f"(default: {DRIFT})")
    add_store_option(dif)
    dif.set_defaults(run=cmd_diff)


def cmd_diff(args: argparse.Namespace) -> int:
    from envsnap.snapshot.store import Store

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
    result = diff(load_side(store, first), load_side(store, second), options,
                  (first, second))
    if args.json or args.markdown:
        from envsnap.diff.render_formats import as_json, markdown

        sys.stdout.write(as_json(result, args.all) if args.json else markdown(result, args.all))
    else:
        from envsnap.diff.render_text import human

        sys.stdout.write(human(result, color, args.all))
    if args.fail_on == REGRESSION:
        if result.benchmark is None or not result.benchmark.compared:
            warn_nothing_to_regress("the two snapshots do not hold runs of one benchmark")
        return ExitCode.DRIFT if result.regression else ExitCode.OK
    return ExitCode.DRIFT if result.drift else ExitCode.OK


def load_side(store: Store, name: str) -> Snapshot:
    """A snapshot, or a pasted output (torch collect_env, nvidia-smi, pip) read as the
    partial snapshot `envsnap import` would store; a file that is neither fails as a
    snapshot, with the snapshot's error."""
    from envsnap.errors import SnapshotError

    try:
        return store.load(name)
    except SnapshotError:
        from envsnap.imports.build import pasted_snapshot
        from envsnap.text import timestamp

        pasted = pasted_snapshot(name, timestamp())
        if pasted is None:
            raise
        return pasted


def load_all(store: Store, sources: list[str]) -> list[Snapshot]:
    """The fleet's snapshots at the store's speed; where one is a pasted output, each is
    read as load_side reads it."""
    from envsnap.errors import SnapshotError

    try:
        return store.load_all(sources)
    except SnapshotError:
        return [load_side(store, source) for source in sources]


def warn_nothing_to_regress(why: str) -> None:
    """CI asked to fail on a regression that cannot happen: say so rather than pass quietly."""
    sys.stderr.write(f"warning: --fail-on regression: {why}; nothing can regress (exit 0)\n")


def diff_fleet(args: argparse.Namespace, store: Store, sections: tuple[str, ...],
               color: bool) -> int:
    from envsnap.diff.fleet import fleet, fleet_sources
    from envsnap.diff.render_fleet import fleet_human, fleet_json, fleet_markdown

    sources = fleet_sources(args.snapshots + args.fleet, store)
    if len(sources) < 2:
        raise UsageError("--fleet needs at least two snapshots")
    report = fleet(load_all(store, sources), sources, sections)
    sys.stdout.write(fleet_json(report) if args.json else fleet_markdown(report)
                     if args.markdown else fleet_human(report, color))
    if args.fail_on == REGRESSION:
        if report.benchmark is None or report.benchmark.different:
            warn_nothing_to_regress("the hosts do not hold runs of one benchmark")
        return ExitCode.DRIFT if report.regression else ExitCode.OK
    return ExitCode.DRIFT if report.drift else ExitCode.OK
