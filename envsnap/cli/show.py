"""`envsnap list` and `envsnap show`: what the store holds, and one snapshot on one screen
(part of the CLI, so it may print). The summary rows are the report's own (report/facts.py),
so `show` and a bug report describe a host in the same words."""
from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from envsnap.cli.options import add_store_option, examples, exit_codes
from envsnap.cli.output import columns
from envsnap.errors import ExitCode, UsageError
from envsnap.text import dump_json

if TYPE_CHECKING:   # loaded when the command runs, not for the parser
    from envsnap.cli.options import Commands
    from envsnap.snapshot.records import Snapshot
    from envsnap.snapshot.store import Store

NAME_COLUMN_MAX = 24     # a longer row name (a repo's path) pushes its value, not the column


def add_list_parser(commands: Commands) -> None:
    lst = commands.add_parser("list", help="list stored snapshots", epilog=examples(
        "envsnap list",
        "envsnap list --store /shared/snapshots",
    ) + exit_codes(
        (ExitCode.OK, "listed (an empty store too)"),
        (ExitCode.USAGE, "usage error: bad argument")))
    add_store_option(lst)
    lst.set_defaults(run=cmd_list)


def add_show_parser(commands: Commands) -> None:
    show = commands.add_parser(
        "show", help="one snapshot on one screen: host, versions, GPUs, repos, env, problems",
        epilog=examples("envsnap show before", "envsnap show run1/node01 --json")
        + exit_codes((ExitCode.OK, "shown"),
                          (ExitCode.USAGE, "usage error: bad argument, no such label"),
                          (ExitCode.INVALID, "invalid snapshot (corrupt, not a snapshot, newer "
                                             "schema)")))
    show.add_argument("label", metavar="LABEL", help="a label in the store or a snapshot file")
    form = show.add_mutually_exclusive_group()
    form.add_argument("--yaml", action="store_true",
                      help="print the whole document as YAML (default: the summary)")
    form.add_argument("--json", action="store_true",
                      help="print the whole document as JSON (default: the summary)")
    add_store_option(show)
    show.set_defaults(run=cmd_show)


def cmd_list(args: argparse.Namespace) -> int:
    from envsnap.snapshot.store import Store
    from envsnap.timeline import saved

    store = Store(args.store)
    if not store.root.exists():
        if not store.is_default:   # a folder named by hand that is not there: a typo?
            raise UsageError(f"store {store.where} does not exist")
        print(f"no snapshots yet: the store {store.where} does not exist; `envsnap capture "
              "local` makes the first")
        return ExitCode.OK
    entries = store.entries()
    timelines = saved.entries(store)
    if not (entries or timelines):
        print(f"no snapshots in {store.where}")
        return ExitCode.OK
    from envsnap.fold import fold_all

    width = max([len(entry.label) for entry in entries] + [len(t.label) for t in timelines])
    rows = [f"{entry.label:<{width}}  {entry.captured_at:<25}  {entry.host_shown}"
            for entry in entries]
    rows += [f"{timeline.label:<{width}}  {timeline.saved_at:<25}  {timeline.host}  "
             "(a timeline)" for timeline in timelines]
    sys.stdout.write("".join(line + "\n" for line in fold_all(rows, columns())))
    return ExitCode.OK


def cmd_show(args: argparse.Namespace) -> int:
    from envsnap.snapshot.store import Store, visible_yaml

    store = Store(args.store)
    if is_saved_timeline(store, args.label):
        return show_timeline(store, args)
    document = store.load(args.label)
    if args.json:
        sys.stdout.write(dump_json(document))
    elif args.yaml:
        sys.stdout.write(visible_yaml(document))
    else:
        path = str(store.resolve(args.label))
        sys.stdout.write("".join(line + "\n" for line in
                                 summary_lines(document, args.label, path, columns())))
    return ExitCode.OK


def is_saved_timeline(store: Store, label: str) -> bool:
    try:
        return store.timeline_path(label).is_file() and not store.path_for(label).is_file()
    except UsageError:   # not a label: a path to a snapshot file
        return False


def show_timeline(store: Store, args: argparse.Namespace) -> int:
    """A saved timeline: where and whose it is, then its events as `timeline` shows them."""
    from envsnap.snapshot.provenance import verify_as_user
    from envsnap.snapshot.store import dump_yaml
    from envsnap.timeline import saved
    from envsnap.timeline.render import render_text

    document = saved.load(store, args.label)
    if args.json or args.yaml:
        sys.stdout.write(dump_json(document) if args.json else dump_yaml(document,
                                                                        ascii_only=True))
        return ExitCode.OK
    meta = document["meta"]
    rows = [("timeline", f"{args.label} ({store.timeline_path(args.label)})"),
            ("host", str(meta.get("host"))), ("saved", str(meta.get("saved_at"))),
            ("provenance", verify_as_user(document).describe())]
    width = columns()
    sys.stdout.write("".join(line + "\n" for line in aligned(rows, width)) + "\n"
                     + render_text(saved.timeline_of(document), width))
    return ExitCode.OK


def summary_lines(document: Snapshot, label: str, path: str, line_width: int) -> list[str]:
    from envsnap.diff.compare import side_of
    from envsnap.report.build import bench_facts
    from envsnap.report.facts import summary
    from envsnap.snapshot.document import bench, held_checkouts, held_text, problems
    from envsnap.snapshot.provenance import verify_as_user

    # The report's "host" row says where and when it was captured.
    rows = [("snapshot", f"{side_of(document, label).label} ({path})")]
    rows += [(fact.name, fact.value) for fact in summary(document)]
    measured = {fact.name: fact.value for fact in bench_facts(bench(document))}
    if measured:
        rows += [("benchmark", f"median {measured['median']}; metric {measured['metric']}")]
    found = problems(document)
    rows += [("problems", "; ".join(found) if found else "none: every collector ran")]
    rows += [("held by envsnap", held_text(path, held))
             for path, held in sorted(held_checkouts(document).items())]
    # foreign: restore will show all it would do and ask first (snapshot/provenance.py)
    rows += [("provenance", verify_as_user(document).describe())]
    return (aligned(rows, line_width)
            + ["", f"the whole document: envsnap show {label} --yaml (or --json)"])


def aligned(rows: list[tuple[str, str]], line_width: int) -> list[str]:
    """Name, then value, in two columns; a long value folds under its own column."""
    from envsnap.fold import fold

    width = min(max(len(name) for name, _ in rows), NAME_COLUMN_MAX)
    lines: list[str] = []
    for name, value in rows:
        lines += fold(f"{name:<{width}}  {value}", line_width, width + 2)
    return lines


def register(commands: Commands) -> None:
    add_list_parser(commands)
    add_show_parser(commands)
