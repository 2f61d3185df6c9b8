"""`envsnap ansible DEST`: write the Ansible collection envsnap.gpu, assembled from
its source and the agent (envsnap/ansible/build.py); part of the CLI, so it may print."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from envsnap.cli.options import examples, exit_codes
from envsnap.errors import ExitCode, UsageError

if TYPE_CHECKING:
    from envsnap.cli.options import Commands

EPILOG = examples(
    "envsnap ansible ~/.ansible/collections",
    "envsnap ansible build",
) + exit_codes(
    (ExitCode.OK, "written: DEST/ansible_collections/envsnap/gpu (its path is printed)"),
    (ExitCode.USAGE, "DEST cannot be written"),
)


def register(commands: Commands) -> None:
    build = commands.add_parser(
        "ansible", epilog=EPILOG,
        help="write the Ansible collection envsnap.gpu (modules envsnap_capture, "
             "envsnap_assert) for ANSIBLE_COLLECTIONS_PATH or ansible-galaxy")
    build.add_argument("dest", metavar="DEST",
                       help="folder to write ansible_collections/envsnap/gpu/ into (an earlier "
                            "build there is replaced)")
    build.set_defaults(run=cmd_collection)


def cmd_collection(args: argparse.Namespace) -> int:
    from envsnap.ansible.build import build

    try:
        built = build(Path(args.dest).absolute())
    except OSError as exc:
        raise UsageError(f"cannot write the collection into {args.dest}: "
                         f"{exc.strerror or exc}") from None
    sys.stdout.write(f"{built}\n")   # alone on stdout, for scripts: $(envsnap ansible DEST)
    collections = built.parents[2]
    sys.stderr.write(f"next: export ANSIBLE_COLLECTIONS_PATH={collections} and use "
                     "envsnap.gpu.envsnap_capture in a play (docs/guide/fleets.md#ansible), "
                     "or pack it: "
                     f"ansible-galaxy collection build {built}\n")
    return ExitCode.OK
