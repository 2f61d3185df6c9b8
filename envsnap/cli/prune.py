"""`envsnap prune`: list (and with --yes remove) restore's own rollback points and their
backups past a retention rule (restore/prune.py; part of the CLI, so it may print)."""
from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from envsnap.cli.options import (
    add_connection_options,
    examples,
    exit_codes,
    inventory_from,
    non_negative_int,
    number_type,
)
from envsnap.cli.output import columns
from envsnap.defaults import DEFAULT_PRUNE_DAYS, DEFAULT_PRUNE_KEEP
from envsnap.errors import ExitCode
from envsnap.fold import fold_all
from envsnap.text import now_utc, plural

if TYPE_CHECKING:   # the prune code loads when the command runs, not for the parser
    from envsnap.cli.options import Commands
    from envsnap.restore.prune import PruneResult, Retention

EPILOG = examples(
    "envsnap prune",
    "envsnap prune --keep 2 --days 7 --yes",
) + exit_codes(
    (ExitCode.OK, "listed what the rule lets go (nothing removed without --yes), or removed "
                  "it"),
    (ExitCode.USAGE, "usage error: bad argument, a store that cannot be read"),
    (ExitCode.HOST, "a host could not be reached: its rollback points and backups were kept"),
)
non_negative_days = number_type(float, 0, True, "a number of days of at least 0")


def register(commands: Commands) -> None:
    prune = commands.add_parser(
        "prune", epilog=EPILOG,
        help="remove restore's old rollback points (pre-restore-*) and their backups",
        description="Each restore that changes a host stores the host as it was (the "
                    "rollback point, pre-restore-<time>) and keeps what it overwrote on the "
                    "host (~/.cache/envsnap/restore-backup/<label>). prune lists those past "
                    "the rule, with their sizes, and removes them with --yes. Snapshots you "
                    "labelled, links, an open restore's point and a locked host's are never "
                    "touched.")
    prune.add_argument("--keep", type=non_negative_int, default=DEFAULT_PRUNE_KEEP, metavar="N",
                       help=f"keep the newest N rollback points of each host (default "
                            f"{DEFAULT_PRUNE_KEEP})")
    prune.add_argument("--days", type=non_negative_days, default=DEFAULT_PRUNE_DAYS, metavar="D",
                       help=f"and every one younger than D days (default {DEFAULT_PRUNE_DAYS:g})")
    prune.add_argument("--yes", action="store_true",
                       help="remove them (default: only list what would go)")
    add_connection_options(prune)
    prune.set_defaults(run=cmd_prune)


def cmd_prune(args: argparse.Namespace) -> int:
    from envsnap.restore.prune import Retention, prune
    from envsnap.snapshot.store import Store

    rule = Retention(args.keep, args.days)
    result = prune(Store(args.store), inventory_from(args), rule, args.yes, now_utc(),
                   args.connect_timeout, args.accept_new_host_keys)
    print("\n".join(fold_all(result_lines(result, rule), columns())))
    return ExitCode.HOST if result.unreachable else ExitCode.OK


def size(count: int) -> str:
    """Bytes as a person reads them: 512 B, 12.3 KiB, 4.1 MiB."""
    value, unit = float(count), "B"
    for bigger in ("KiB", "MiB", "GiB"):
        if value < 1024:
            break
        value, unit = value / 1024, bigger
    return f"{count} B" if unit == "B" else f"{value:.1f} {unit}"


def result_lines(result: PruneResult, rule: Retention) -> list[str]:
    snapshots = sum(point.size for point in result.gone)
    backups = sum(point.backup_size for point in result.gone)
    if result.gone:
        lines = [f"{'removed' if result.applied else 'would remove'} "
                 f"{plural(len(result.gone), 'rollback point')}: {size(snapshots)} of "
                 f"snapshots, {size(backups)} of backups on the hosts"]
    else:
        lines = ["nothing to remove"]
    lines += [f"  {point.label}  {point.host}  {point.taken:%Y-%m-%d %H:%M}  "
              f"{size(point.size)} + backup {size(point.backup_size)}"
              for point in result.gone]
    lines += [f"kept {kept.label} ({kept.host}): {kept.why}" for kept in result.kept]
    lines.append(f"kept by the rule (the newest {rule.keep} of each host, and any younger "
                 f"than {rule.days:g} days): {result.retained}")
    if result.gone and not result.applied:
        lines.append("nothing removed: `envsnap prune --yes` removes them")
    return lines
