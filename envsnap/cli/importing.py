"""`envsnap import`: pasted tool outputs of one host -> one partial snapshot (part of the
CLI, so it may print). The readers load when the command runs."""
from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from envsnap.cli.options import add_store_option, examples, exit_codes
from envsnap.errors import ExitCode, UsageError
from envsnap.text import timestamp

if TYPE_CHECKING:
    from envsnap.cli.options import Commands
    from envsnap.imports.build import Pasted

EPILOG = examples(
    "envsnap import collect_env.txt pip-freeze.txt --label from-issue",
    "envsnap import nvidia-smi-q.xml --host gpu7",
) + exit_codes(
    (ExitCode.OK, "every file read and the snapshot saved"),
    (ExitCode.USAGE, "usage error: a file that cannot be read, a bad or existing label"),
    (ExitCode.INVALID, "a file in which no report can be read (none of a known tool, or a "
                       "truncated XML or JSON document): the line is named, and nothing is "
                       "stored; a line that breaks a report is a warning, the rest is read"),
)


def register(commands: Commands) -> None:
    imp = commands.add_parser(
        "import", epilog=EPILOG,
        help="read pasted outputs of one host (torch or vLLM collect_env, SGLang check_env, "
             "nvidia-smi, pip, uv, conda) into a partial snapshot")
    imp.add_argument("files", nargs="+", metavar="FILE",
                     help="outputs of one host: torch's or vLLM's collect_env, SGLang's "
                          "check_env; nvidia-smi, -q, -q -x, topo -m; pip list (columns or "
                          "json), pip freeze, pip inspect (gzip too); uv pip list; conda list "
                          "(and --export); rocm-smi --showtopo; told apart by content, found "
                          "in a whole pasted comment (markdown, prompts, warnings, prose "
                          "passed over), several in one file")
    imp.add_argument("--label", help="snapshot label (default: imported-<first file's name>)")
    imp.add_argument("--host", help="the host the outputs came from, as the snapshot names "
                                    "it (default: imported)")
    imp.add_argument("-v", "--verbose", action="store_true",
                     help="list every line passed over around the reports (markdown, prose, "
                          "prompts, warnings), with its number")
    imp.add_argument("--force", action="store_true",
                     help="replace an existing label (default: refuse)")
    add_store_option(imp)
    imp.set_defaults(run=cmd_import)


def notes(pastes: list[Pasted], verbose: bool) -> list[str]:
    """What a person should know of how their paste was read: lines that broke a report,
    reports read only as far as they go, and (all of them with -v) the lines passed over."""
    from envsnap.imports.reading import quoted
    from envsnap.text import plural

    said: list[str] = []
    for pasted in pastes:
        name = pasted.source.name
        said += [f"warning: {name}:{b.line}: passed over {quoted(b.text.strip())} ({b.why}); "
                 "the rest of the report read" for b in pasted.broken]
        said += [f"warning: {name}: {why}: read as far as it goes" for why in pasted.cut]
        if verbose:
            said += [f"{name}:{s.line}: skipped {s.why}: {quoted(s.text.strip())}"
                     for s in pasted.skipped]
        elif pasted.skipped:
            said.append(f"{name}: {plural(len(pasted.skipped), 'line')} around the reports "
                        "passed over (markdown, prompts, warnings, prose); -v lists them")
    return said


def cmd_import(args: argparse.Namespace) -> int:
    from pathlib import Path

    from envsnap.imports.build import read_pasted, read_source, snapshot_of
    from envsnap.snapshot.store import Store, label_from_name, validate_label

    label = validate_label(args.label or "imported-" + label_from_name(Path(args.files[0]).stem))
    store = Store(args.store)
    if store.exists(label) and not args.force:
        raise UsageError(f"snapshot {label!r} already exists in {store.root} (use --force "
                         "to replace it, or another --label)")
    pastes = [read_pasted(read_source(path)) for path in args.files]
    document = snapshot_of(pastes, label=label, host=args.host or "imported",
                           captured_at=timestamp())
    path = store.save(document, label, replace=args.force)
    for line in notes(pastes, args.verbose):
        sys.stderr.write(line + "\n")
    sources = document["meta"].get("imported", {}).get("sources", {})
    read = ", ".join(f"{name} ({info.get('tool')})" for name, info in sources.items())
    print(f"saved {label} -> {path} (partial: {read})")
    return ExitCode.OK
