"""`envsnap history`: the store's deduplicated history of snapshots (envsnap/history/):
list its records, show one, verify it, thin it (gc), and copy the YAML snapshots into it."""
from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from envsnap.cli.options import add_store_option, examples, exit_codes
from envsnap.cli.output import columns
from envsnap.errors import ExitCode
from envsnap.fold import fold_all
from envsnap.text import dump_json, plural

if TYPE_CHECKING:
    from envsnap.cli.options import Commands
    from envsnap.history.store import History, Manifest
    from envsnap.snapshot.store import Store

EPILOG = examples(
    "envsnap history migrate",
    "envsnap history list",
    "envsnap history verify",
    "envsnap history gc --dry-run --keep every=1d,hourly=7d",
) + exit_codes(
    (ExitCode.OK, "listed, shown, every record sound, thinned, migrated"),
    (ExitCode.USAGE, "usage error: bad argument or --keep, no such record, a store that "
                     "cannot be read or written"),
    (ExitCode.INVALID, "a record is damaged (a part missing or not what its name promises): "
                       "`verify` lists each"),
)


def register(commands: Commands) -> None:
    history = commands.add_parser(
        "history", epilog=EPILOG,
        help="the store's deduplicated history of snapshots: list, show, verify, gc, migrate",
        description="Every record of the history is a small manifest of content-addressed "
                    "parts, each part stored once, in STORE/history. `migrate` copies the "
                    "store's YAML snapshots into it (they stay); `gc` keeps every record of "
                    "the last 2 days, the first of each hour for 14 days and the first of "
                    "each day after, for each host, and deletes the parts no record names.")
    actions = history.add_subparsers(dest="action", metavar="ACTION", required=True,
                                     help="what to do with the history")
    listing = actions.add_parser("list", help="each record: id, time, host, why")
    listing.add_argument("host", metavar="HOST", nargs="?", help="only this host's records")
    show = actions.add_parser("show", help="one record, as `envsnap show` shows a snapshot")
    show.add_argument("id", metavar="ID", help="a record's id, as `history list` prints it")
    form = show.add_mutually_exclusive_group()
    form.add_argument("--yaml", action="store_true", help="the whole document as YAML")
    form.add_argument("--json", action="store_true", help="the whole document as JSON")
    actions.add_parser("verify", help="check that every record's parts are there and sound")
    gc = actions.add_parser("gc", help="delete the records outside the retention rule, then "
                                       "every part no record names")
    gc.add_argument("--dry-run", action="store_true", help="list what would go, delete none")
    gc.add_argument("--keep", action="append", default=[], metavar="SPAN=AGE",
                    help="the rule, e.g. every=2d,hourly=14d,daily=forever (the default); "
                         "a span not named keeps its default; AGE: 90m, 36h, 14d, 8w, 0, "
                         "forever")
    actions.add_parser("migrate", help="copy every YAML snapshot of the store into the "
                                       "history, checked by reading it back")
    for each in actions.choices.values():
        add_store_option(each)
    history.set_defaults(run=cmd_history)


def cmd_history(args: argparse.Namespace) -> int:
    from envsnap.history.store import History
    from envsnap.snapshot.store import Store

    store = Store(args.store)
    history = History.of_store(store)
    run = {"list": list_records, "show": show_record, "verify": verify_records,
           "gc": collect, "migrate": migrate_store}[args.action]
    return run(history, store, args)


def when(manifest: Manifest) -> str:
    return datetime.fromtimestamp(manifest.captured_at, timezone.utc).isoformat(
        timespec="seconds")


def list_records(history: History, store: Store, args: argparse.Namespace) -> int:
    manifests = history.manifests(args.host)
    if not manifests:
        print(f"no records in {history.root}" + (f" of {args.host}" if args.host else "")
              + "; envsnap history migrate copies the store's snapshots into it")
        return ExitCode.OK
    width = max(len(manifest.id) for manifest in manifests)
    lines = [f"{manifest.id:<{width}}  {when(manifest)}  {manifest.host}  {manifest.reason}"
             for manifest in manifests]
    print("\n".join(lines + [plural(len(manifests), "record")]))
    return ExitCode.OK


def show_record(history: History, store: Store, args: argparse.Namespace) -> int:
    from envsnap.cli.show import summary_lines
    from envsnap.snapshot.store import visible_yaml

    manifest = history.find(args.id)
    document = history.load(manifest)
    if args.json:
        sys.stdout.write(dump_json(document))
    elif args.yaml:
        sys.stdout.write(visible_yaml(document))
    else:
        lines = summary_lines(document, args.id, str(history.manifest_path(manifest.id)),
                              columns())
        lines[-1] = f"the whole document: envsnap history show {args.id} --yaml (or --json)"
        sys.stdout.write("".join(line + "\n" for line in lines))
    return ExitCode.OK


def verify_records(history: History, store: Store, args: argparse.Namespace) -> int:
    from envsnap.history.upkeep import verify

    problems = verify(history)
    count = len(history.manifests())
    if not problems:
        print(f"{plural(count, 'record')} in {history.root}: every part there and sound")
        return ExitCode.OK
    print("\n".join(fold_all([problem.describe() for problem in problems], columns())))
    print(f"{plural(len(problems), 'problem')} in {history.root}")
    return ExitCode.INVALID


def collect(history: History, store: Store, args: argparse.Namespace) -> int:
    from envsnap.cli.prune import size
    from envsnap.history.retention import parse_keep
    from envsnap.history.upkeep import gc

    rule = parse_keep(args.keep)
    done = gc(history, rule, dry_run=args.dry_run)
    verb = "would delete" if args.dry_run else "deleted"
    lines = [f"{verb} {manifest.id}  {when(manifest)}  {manifest.reason}"
             for manifest in done.dropped] if args.dry_run else []
    lines.append(f"{verb} {plural(len(done.dropped), 'record')} and "
                 f"{plural(len(done.parts), 'part')} ({size(done.bytes_freed)}); kept "
                 f"{plural(done.kept, 'record')} (rule {rule.describe()})")
    print("\n".join(lines))
    return ExitCode.OK


def migrate_store(history: History, store: Store, args: argparse.Namespace) -> int:
    from envsnap.cli.prune import size
    from envsnap.history.migrate import migrate
    done = migrate(store, history)
    lines = [f"{label} -> {manifest.id}" for label, manifest in done.recorded]
    lines.append(f"migrated {plural(len(done.recorded), 'snapshot')} into {history.root} "
                 f"({size(done.bytes_added)} added), each read back equal; "
                 f"{len(done.already)} recorded before; the YAML files stay")
    lines += [f"not migrated: {label} (unreadable: envsnap show {label} says why)"
              for label in done.unreadable]
    print("\n".join(lines))
    return ExitCode.OK
