"""`envsnap import`: pasted tool outputs of one host -> one partial snapshot (part of the
CLI, so it may print). The readers load when the command runs."""
from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from envsnap.cli.options import add_store_option, examples, exit_codes
from envsnap.errors import ExitCode, UsageError
from envsnap.text import timestamp

if TYPE_CHECKING:
    from envsnap.cli.options import Commands

EPILOG = examples(
    "envsnap import collect_env.txt pip-freeze.txt --label from-issue",
    "envsnap import nvidia-smi-q.xml --host gpu7",
) + exit_codes(
    (ExitCode.OK, "every file read and the snapshot saved"),
    (ExitCode.USAGE, "usage error: a file that cannot be read, a bad or existing label"),
    (ExitCode.INVALID, "a file malformed, truncated, mixed or of no known format: the line "
                       "it could not read is named, and nothing is stored"),
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
                          "(and --export); told apart by content")
    imp.add_argument("--label", help="snapshot label (default: imported-<first file's name>)")
    imp.add_argument("--host", help="the host the outputs came from, as the snapshot names "
                                    "it (default: imported)")
    imp.add_argument("--force", action="store_true",
                     help="replace an existing label (default: refuse)")
    add_store_option(imp)
    imp.set_defaults(run=cmd_import)


def cmd_import(args: argparse.Namespace) -> int:
    from pathlib import Path

    from envsnap.imports.build import imported_snapshot, read_source
    from envsnap.snapshot.store import Store, label_from_name, validate_label

    label = validate_label(args.label or "imported-" + label_from_name(Path(args.files[0]).stem))
    store = Store(args.store)
    if store.exists(label) and not args.force:
        raise UsageError(f"snapshot {label!r} already exists in {store.root} (use --force "
                         "to replace it, or another --label)")
    document = imported_snapshot([read_source(path) for path in args.files], label=label,
                                 host=args.host or "imported", captured_at=timestamp())
    path = store.save(document, label, replace=args.force)
    sources = document["meta"].get("imported", {}).get("sources", {})
    read = ", ".join(f"{name} ({info.get('tool')})" for name, info in sources.items())
    print(f"saved {label} -> {path} (partial: {read})")
    return ExitCode.OK
