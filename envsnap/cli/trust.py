"""`envsnap trust FILE`: adopt a foreign snapshot (a colleague's, a bug report's, one edited
by hand) after showing what it holds; it is then signed with your key and stored, and
restore treats it as yours (part of the CLI, so it may print and prompt)."""
from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from envsnap.cli.options import add_store_option, approved, examples, exit_codes
from envsnap.errors import ExitCode

if TYPE_CHECKING:   # loaded when the command runs, not for the parser
    from envsnap.cli.options import Commands
    from envsnap.snapshot.provenance import Provenance
    from envsnap.snapshot.records import Snapshot

EPILOG = examples(
    "envsnap trust ~/Downloads/theirs.yaml --label theirs",
    "envsnap trust theirs --yes",
) + exit_codes(
    (ExitCode.OK, "adopted (signed with your key and stored), or already yours"),
    (ExitCode.USAGE, "usage error: no such file or label, a label taken without --force"),
    (ExitCode.INVALID, "invalid snapshot"),
    (ExitCode.DECLINED, "declined: answered no, or no --yes without a terminal; nothing "
                        "was stored"),
)


def register(commands: Commands) -> None:
    trust = commands.add_parser(
        "trust", epilog=EPILOG,
        help="adopt a snapshot someone else made: show what it holds, then sign it as yours")
    trust.add_argument("file", metavar="FILE", help="a snapshot file (or a label in the store)")
    trust.add_argument("--label", help="store it under this label (default: the label it is "
                                       "stored under, else the one it records)")
    trust.add_argument("--yes", action="store_true",
                       help="adopt without asking (default: ask at a terminal, else refuse)")
    trust.add_argument("--force", action="store_true",
                       help="replace another snapshot of that label (default: refuse)")
    add_store_option(trust)
    trust.set_defaults(run=cmd_trust)


def summary_lines(document: Snapshot, source: str, found: Provenance) -> list[str]:
    from envsnap.hostops.gate import foreign_plan, recorded_repos, rerun_shown, review_lines
    from envsnap.snapshot import document as snap

    lines = [f"{source}: {found.describe()}",
             f"  host: {snap.host(document)} ({snap.hostname(document) or 'hostname unknown'})",
             f"  captured: {snap.captured_at(document) or '?'}"]
    for path, repo in sorted(snap.repos(document).items()):
        head, branch = repo.get("head"), repo.get("branch")
        lines.append(f"  repo {path}: " + (f"{head}" + (f" ({branch})" if branch else "")
                                           if head is not None else "no commit"))
    plan = foreign_plan(document, source, snap.host(document), found,
                        repos=recorded_repos(document), pip=False,
                        rerun=rerun_shown(document, True, None), needs_consent=True,
                        env=snap.recorded_server_env(document))   # restore --rerun --serve's
    return lines + review_lines(plan)[1:]


def ask_to_adopt(yes: bool, source: str) -> bool:
    return approved(yes, "sign this snapshot as yours? restore will then run it without "
                         "asking [y/N] ", f"nothing was stored: {source} not adopted",
                    "trusting it signs it as yours: pass --yes (after reading what it "
                    "holds, above)")


def cmd_trust(args: argparse.Namespace) -> int:
    from envsnap.snapshot import document as snap
    from envsnap.snapshot import provenance
    from envsnap.snapshot.store import Store, adoption_label

    store = Store(args.store)
    document = store.load(args.file)
    found = provenance.verify_as_user(document)
    label = adoption_label(store, args.file, document, args.label, args.force)
    if found.mine and store.resolve(args.file).resolve() == store.path_for(label).resolve():
        print(f"{label}: already yours (signed with your key); nothing to do")
        return ExitCode.OK
    print("\n".join(summary_lines(document, args.file, found)))
    ask_to_adopt(args.yes, args.file)
    snap.set_label(document, label)
    path = store.save(document, label)
    print(f"trusted: signed with your key and stored as {label} ({path})")
    return ExitCode.OK
