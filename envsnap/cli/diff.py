"""`envsnap diff`: its arguments and its command (part of the CLI, so it may print).

Start-up matters here: `diff` should start about as fast as python loading the two files, so
this module imports nothing heavy, and the command imports only the renderer asked for."""
from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from envsnap.cli.options import add_store_option, examples, exit_codes
from envsnap.errors import ExitCode, SnapshotError, UsageError
from envsnap.text import timestamp
from envsnap.verdicts import REGRESSION

if TYPE_CHECKING:
    from envsnap.cli.options import Commands
    from envsnap.diff.fleet import Members
    from envsnap.snapshot.records import Snapshot
    from envsnap.snapshot.store import Store

DRIFT = "drift"
FAIL_ON = (DRIFT, REGRESSION)   # any drift, or only a benchmark's regression verdict

EPILOG = examples(
    "envsnap diff before after",
    "envsnap diff before after --section git,env --markdown",
    "envsnap diff --fleet run1",
    "envsnap diff good bad --fail-on regression",
) + exit_codes(
    (ExitCode.OK, "no drift; with --fail-on regression: no benchmark regression, whatever "
                  "drifted"),
    (ExitCode.DRIFT, "drift found (a result, not an error); with --fail-on regression: the "
                     "benchmark both snapshots ran is a regression (with --fleet: on some host)"),
    (ExitCode.USAGE, "usage error: bad argument, unknown label or section, no snapshot to "
                     "compare (--fleet of one snapshot: nothing to compare, exit 0)"),
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
                     help="include volatile readings, long parts (patches) and values in full "
                          "(default: leave them out, long parts and values shortened)")
    dif.add_argument("--section", metavar="NAMES",
                     help="only these sections, comma-separated, e.g. git,env (default: all)")
    dif.add_argument("--fleet", nargs="+", metavar="FILE",
                     help="N snapshots (files, labels or folders): facts where hosts "
                          "differ from the majority")
    dif.add_argument("-l", "--limit", metavar="PATTERN",
                     help="with --fleet: only the members this Ansible host pattern selects, "
                          "by host name (groups from --inventory); docs/guide/fleets.md#--limit")
    dif.add_argument("--inventory", default=os.environ.get("ENVSNAP_INVENTORY"),
                     help="with --limit: the inventory whose groups patterns may name "
                          "(default: $ENVSNAP_INVENTORY)")
    dif.add_argument("--fail-on", choices=FAIL_ON, default=DRIFT,
                     help="what exits 1: drift (any fact changed) or regression (only a "
                          "benchmark regression verdict, for CI; drift alone exits 0) "
                          f"(default: {DRIFT})")
    add_store_option(dif)
    dif.set_defaults(run=cmd_diff)


def cmd_diff(args: argparse.Namespace) -> int:
    from envsnap.snapshot.store import collector_held_off

    with collector_held_off():   # the documents are trees: nothing for it to find
        return diffed(args)


def diffed(args: argparse.Namespace) -> int:
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
        from envsnap.cli.output import columns
        from envsnap.diff.render_text import human

        sys.stdout.write(human(result, color, args.all, columns()))
    if args.fail_on == REGRESSION:
        if result.benchmark is None or not result.benchmark.compared:
            warn_nothing_to_regress("the two snapshots do not hold runs of one benchmark")
        return ExitCode.DRIFT if result.regression else ExitCode.OK
    return ExitCode.DRIFT if result.drift else ExitCode.OK


def limited_members(sources: list[str], limit: str, inventory_path: str | None) -> list[str]:
    """The fleet's members a --limit selects, each named as its capture saved it (the file's
    name without .yaml: the host's name); a pattern that matches none is a warning."""
    from pathlib import Path

    from envsnap.hosts.inventory import Host, limit_hosts, load_inventory, no_host_left

    members = [Host(name=Path(source).stem) for source in sources]
    kept, unmatched = limit_hosts(members, load_inventory(inventory_path), limit)
    if not kept:
        raise no_host_left(limit, unmatched)
    from envsnap.hosts.patterns import unmatched_said

    for said in unmatched_said(unmatched):
        sys.stderr.write(f"warning: --limit: no member matches {said}, ignoring it\n")
    names = {host.name for host in kept}
    return [source for source in sources if Path(source).stem in names]


def load_side(store: Store, name: str) -> Snapshot:
    """A snapshot, or a pasted output (torch collect_env, nvidia-smi, pip) read as the
    partial snapshot `envsnap import` would store; a file that is neither fails as a
    snapshot, with the snapshot's error."""
    try:
        return store.load(name)
    except SnapshotError:
        from envsnap.imports.build import pasted_snapshot

        pasted = pasted_snapshot(name, timestamp())
        if pasted is None:
            raise
        return pasted


def with_pastes(members: Members, store: Store) -> Members:
    """The fleet's members with the pasted outputs among those the snapshot reader refused
    read as load_side reads them (`diff --fleet` of a folder of users' pastes)."""
    from envsnap.diff.fleet import Members
    from envsnap.imports.build import pasted_snapshot

    read = Members(list(members.documents), list(members.sources), [])
    for source, why in members.refused:
        pasted = pasted_snapshot(source, timestamp()) if isinstance(why, SnapshotError) \
            else None
        if pasted is None:
            read.refused.append((source, why))
        else:
            read.documents.append(pasted)
            read.sources.append(source)
    return read


def warn_nothing_to_regress(why: str) -> None:
    """CI asked to fail on a regression that cannot happen: say so rather than pass quietly."""
    sys.stderr.write(f"warning: --fail-on regression: {why}; nothing can regress (exit 0)\n")


def diff_fleet(args: argparse.Namespace, store: Store, sections: tuple[str, ...],
               color: bool) -> int:
    from envsnap.cli.output import columns
    from envsnap.diff.fleet import fleet_of, fleet_sources, load_members
    from envsnap.diff.render_fleet import fleet_human, fleet_json, fleet_markdown

    sources = fleet_sources(args.snapshots + args.fleet, store)
    if args.limit is not None:
        sources = limited_members(sources, args.limit, args.inventory)
    if not sources:
        raise UsageError("--fleet: no snapshot to compare in " + ", ".join(
            args.snapshots + args.fleet))
    if len(sources) == 1:
        print(f"nothing to compare: the fleet holds one snapshot ({sources[0]})")
        return ExitCode.OK
    report = fleet_of(with_pastes(load_members(store, sources), store), sections)
    sys.stdout.write(fleet_json(report) if args.json else fleet_markdown(report)
                     if args.markdown else fleet_human(report, color, args.all, columns()))
    for _, why in report.unreadable:   # the others are compared; an unreadable one is named
        sys.stderr.write(f"envsnap: error: {why} (left out of the fleet)\n")
    if report.unreadable:
        return ExitCode.INVALID
    if args.fail_on == REGRESSION:
        if report.benchmark is None or report.benchmark.different:
            warn_nothing_to_regress("the hosts do not hold runs of one benchmark")
        return ExitCode.DRIFT if report.regression else ExitCode.OK
    return ExitCode.DRIFT if report.drift else ExitCode.OK
