"""`envsnap report`: its arguments and its command (part of the CLI, so it may print)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from envsnap.cli.options import (
    add_connection_options,
    examples,
    exit_codes,
    inventory_from,
    utf8_text,
)
from envsnap.defaults import REPORT_FORMATS
from envsnap.errors import ExitCode, UsageError

if TYPE_CHECKING:
    from envsnap.cli.options import Commands
    from envsnap.snapshot.records import Snapshot
    from envsnap.snapshot.store import Store
    from envsnap.timeline.model import Timeline

EPILOG = examples(
    "envsnap report after --vs before -o bug.md",
    "envsnap report after --vs before --bundle bug.tar.gz",
    "envsnap report after --format collect-env",
) + exit_codes(
    (ExitCode.OK, "the report was written, whatever --vs found: a report is a rendering; "
                  "`envsnap diff` is the check that exits 1 on drift"),
    (ExitCode.USAGE, "usage error: bad argument, unknown label, a file that cannot be written"),
    (ExitCode.HOST, "--timeline: the snapshot's host unreachable, or the agent failed there"),
    (ExitCode.INVALID, "invalid snapshot"),
)
COLLECT_ENV, CHECK_ENV = "collect-env", "check-env"
SUFFIX_FORMATS = {".md": "md", ".markdown": "md", ".html": "html", ".htm": "html",
                  ".json": "json"}


def register(commands: Commands) -> None:
    rep = commands.add_parser("report", epilog=EPILOG,
                              help="a bug report of a snapshot (markdown, html, json), "
                                   "optionally compared with another, or a bundle")
    rep.add_argument("label", metavar="LABEL", help="a label in the store or a snapshot file")
    rep.add_argument("--vs", metavar="LABEL",
                     help="compare with this (older, good) snapshot (default: no comparison)")
    rep.add_argument("--format", choices=REPORT_FORMATS + (COLLECT_ENV, CHECK_ENV),
                     help="md, html (one self-contained file) or json; collect-env, "
                          "check-env: the snapshot as torch's collect_env or SGLang's "
                          "check_env prints it (default: from -o's suffix, else md)")
    rep.add_argument("-o", "--output", metavar="FILE",
                     help="write here (default: stdout)")
    rep.add_argument("--bundle", metavar="FILE.tar.gz",
                     help="write a tar.gz of the snapshot(s), the report (md + html), "
                          "bench samples and the charts as SVG (default: no bundle)")
    rep.add_argument("--no-mask", action="store_true",
                     help="keep GPU UUIDs, serials, MAC-like ids and home paths; never "
                          "shows a secret: those were masked on the host at capture "
                          "(default: masked)")
    rep.add_argument("--all", action="store_true",
                     help="patches and long diff parts in full (default: shortened)")
    rep.add_argument("--timeline", metavar="TIME", type=utf8_text,
                     help="add the timeline of the snapshot's host since TIME (2h, 30m, an "
                          "ISO time, a snapshot label), read from the host now as `envsnap "
                          "timeline` reads it (default: no timeline)")
    add_connection_options(rep)
    rep.set_defaults(run=cmd_report)


def output_format(args: argparse.Namespace) -> str:
    """--format, else what -o's suffix says; a suffix of another format (x.pdf) is refused
    rather than written as markdown under its name."""
    if args.format:
        return str(args.format)
    suffix = Path(args.output).suffix.lower() if args.output else ""
    if suffix and suffix not in SUFFIX_FORMATS:
        raise UsageError(f"-o {args.output}: envsnap writes no {suffix} file; name it "
                         f"{', '.join(SUFFIX_FORMATS)}, or give --format")
    return SUFFIX_FORMATS.get(suffix, "md")


def cmd_report(args: argparse.Namespace) -> int:
    from envsnap.report.build import ReportOptions, build_report, save_text
    from envsnap.report.bundle import write_bundle
    from envsnap.report.render import render
    from envsnap.snapshot.mask import Masker
    from envsnap.snapshot.store import Store

    if args.bundle and not args.bundle.endswith((".tar.gz", ".tgz")):
        raise UsageError(f"--bundle {args.bundle!r}: name it FILE.tar.gz")
    form = output_format(args)   # refused before anything is read
    store = Store(args.store)
    document = store.load(args.label)
    if args.format in (COLLECT_ENV, CHECK_ENV):
        return report_as_tool(args, document)
    vs = store.load(args.vs) if args.vs else None
    options = ReportOptions(mask=not args.no_mask, full=args.all)
    report = build_report(document, vs, options, (args.label, args.vs or ""),
                          report_timeline(args, document, store))
    if args.bundle:
        rendered = {form: render(report, form) for form in ("md", "html")}
        names = write_bundle(args.bundle, report.label, [document] + ([vs] if vs else []),
                             rendered, Masker(options.mask), report.charts)
        print(f"saved {args.bundle}: " + ", ".join(name.split("/", 1)[1] for name in names))
    if args.output:
        print(f"saved {save_text(args.output, render(report, form))}")
    elif not args.bundle:
        sys.stdout.write(render(report, form))
    return ExitCode.OK


def report_timeline(args: argparse.Namespace, document: Snapshot,
                    store: Store) -> Timeline | None:
    """--timeline: the snapshot's host asked for its changes, here, for the report to lay
    out (the report itself reaches no host)."""
    if args.timeline is None:
        return None
    from envsnap.timeline.of_snapshot import host_timeline
    from envsnap.timeline.run import TimelineOptions

    options = TimelineOptions(connect_timeout=args.connect_timeout,
                              accept_new_host_keys=args.accept_new_host_keys)
    return host_timeline(document, args.timeline, store, inventory_from(args), options)


def report_as_tool(args: argparse.Namespace, document: Snapshot) -> int:
    """The snapshot as the tool a maintainer asked for prints it."""
    from envsnap.report.build import save_text
    from envsnap.report.check_env import check_env_text
    from envsnap.report.collect_env import collect_env_text

    if args.vs or args.bundle:
        raise UsageError(f"--format {args.format} shows one snapshot: without --vs and "
                         "--bundle")
    rendered = (collect_env_text if args.format == COLLECT_ENV else check_env_text)(document)
    if args.output:
        print(f"saved {save_text(args.output, rendered)}")
    else:
        sys.stdout.write(rendered)
    return ExitCode.OK
