"""What a restore may touch and run, decided by the user, never by the snapshot.

A snapshot is data: it may be a colleague's, a bug report's, or edited by hand. So:

- Checkouts. A restore touches only the checkouts the user named: `--repo PATH` on the
  restore command line, else the inventory's `repos` for the host. A snapshot of the user's
  own (signed with their key, snapshot/provenance.py: they named its repos when they
  captured it) restores the checkouts it records when nothing else is named. A foreign one
  never picks a folder by itself: its checkouts are restored only where named.
- Files. Inside those checkouts' working trees and the host python's own sitecustomize (in
  its venv; one every python of the host loads only with --host-wide), and nowhere else
  (hostops/treefile.py enforces it on the host, hostops/site.py compares the recorded path
  with the python's own folders).
- The host. `--host`, or the snapshot's recorded host only when the machine reached there
  has the hostname the snapshot recorded. A snapshot with no hostname is of an unknown
  host: like another machine, restored only with --force-host (and then only onto --host);
  hostops/hostrule.py keeps that rule.
- Commands. `--rerun` runs the command given with --rerun-cmd, or the snapshot's recorded
  one only once it was shown and the user said yes (--yes, or at a terminal).
"""
from __future__ import annotations

import os
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from envsnap.agent.redact import holds_marker
from envsnap.errors import DeclinedError, UsageError
from envsnap.hostops.treefile import backup_dir
from envsnap.hosts.inventory import Host
from envsnap.snapshot import document as snap

if TYPE_CHECKING:
    from envsnap.playbook.templating import Variables
    from envsnap.snapshot.records import Snapshot

CHOSEN_VAR = "restore_repos"            # host var: the snapshot's checkouts to restore
UNNAMED_VAR = "restore_unnamed_repos"   # host var: the snapshot's checkouts left alone
ROLLBACK_PREFIX = "pre-restore-"


@dataclass(frozen=True)
class RepoChoice:
    restore: list[str]       # the snapshot's checkouts (as recorded) this restore may touch
    unnamed: list[str]       # the snapshot's checkouts nobody named: left alone


def same_path(path: str, local: bool) -> str:
    """A path as compared: normalised; `~` expanded and a relative path made absolute where
    the host is this machine (a capture records it so)."""
    return posixpath.normpath(os.path.abspath(os.path.expanduser(path)) if local else path)


def choose_repos(document: Snapshot, host: Host, named_on_cli: Sequence[str],
                 mine: bool) -> RepoChoice:
    recorded = sorted(str(path) for path in snap.repos(document))
    named = list(named_on_cli) or host.list_var("repos")
    if not named:
        return RepoChoice(recorded, []) if mine else RepoChoice([], recorded)
    wanted = {same_path(path, host.is_local) for path in named}
    given = {path: repo.get("given_path") or path for path, repo in snap.repos(document).items()}
    # Recorded absolute since issue 13; a path named as it was typed (`sglang`) still names it.
    chosen = [path for path in recorded if same_path(path, host.is_local) in wanted
              or same_path(given.get(path, path), host.is_local) in wanted]
    return RepoChoice(chosen, [path for path in recorded if path not in chosen])


def with_repo_choice(host: Host, choice: RepoChoice) -> Host:
    """The choice rides on the host's vars (an empty list too, which with_vars would drop):
    the playbook restores restore_repos and lists restore_unnamed_repos as left alone."""
    host.vars.update({CHOSEN_VAR: list(choice.restore), UNNAMED_VAR: list(choice.unnamed)})
    return host


def chosen_repos(host: Host) -> list[str]:
    return host.list_var(CHOSEN_VAR)


def unnamed_refusal(host: Host) -> UsageError | None:
    """Applying a snapshot none of whose checkouts was named is refused: restoring nothing
    of it while saying "restored" would mislead, and guessing is what must not happen."""
    unnamed = host.list_var(UNNAMED_VAR)
    if not unnamed or chosen_repos(host):
        return None
    listed = ", ".join(unnamed[:5]) + (f" and {len(unnamed) - 5} more" if len(unnamed) > 5
                                       else "")
    return UsageError(f"the snapshot records checkouts that neither --repo nor the inventory "
                      f"names ({listed}): restore touches only checkouts you name (a foreign "
                      "snapshot picks none); pass --repo PATH for each one to restore")


def refusals(document: Snapshot, host: Host, rerun: bool,
             given: str | None) -> list[UsageError]:
    """Every refusal a restore makes before it changes anything, one list: the run raises
    the first, --check shows them all after its plan (the same checks, so the same answer)."""
    found = [unnamed_refusal(host), rerun_refusal(document, rerun, given)]
    return [refusal for refusal in found if refusal is not None]


# ---- which command ------------------------------------------------------------------------------

@dataclass(frozen=True)
class RecordedRerun:
    label: str
    command: str
    cwd: str | None


def rerun_refusal(document: Snapshot, rerun: bool, given: str | None) -> UsageError | None:
    """Why `--rerun` cannot run (no command to run), else None."""
    if given is not None:
        return UsageError("--rerun-cmd is empty") if not given.strip() else None
    if not rerun:
        return None
    record = snap.bench(document)
    command = record.get("command") if record is not None else None
    if record is None or command is None:
        return UsageError(f"snapshot {snap.label(document)!r} has no recorded benchmark to "
                          "rerun (record one with envsnap bench HOST --label ..., or give "
                          "the command with --rerun-cmd)")
    if holds_marker(command):
        return UsageError(f"the recorded benchmark command {command!r} had a secret "
                          "masked at capture: give the command with --rerun-cmd")
    return None


def rerun_note(document: Snapshot, rerun: bool, given: str | None) -> list[str]:
    """--check --rerun: the recorded command the run would show, and when it runs it."""
    record = snap.bench(document)
    if not rerun or given is not None or record is None or rerun_refusal(document, rerun,
                                                                          given):
        return []
    return [f"--rerun: the snapshot {snap.label(document)!r} records the benchmark command "
            f"{record.get('command')!r}: the restore shows it, then runs it only with --yes "
            "or a yes at a terminal (else nothing is changed or run)"]


def rerun_command(document: Snapshot, options_rerun: bool, given: str | None,
                  check: bool, confirm: Callable[[RecordedRerun], bool] | None) -> str | None:
    """The command `--rerun` will run: the user's own (--rerun-cmd), or the recorded one
    once `confirm` has shown it and said yes. Asked before anything changes, once
    `rerun_refusal` found none."""
    if given is not None:
        return given
    if not options_rerun or check:
        return None
    record = snap.bench(document)
    if record is None or record.get("command") is None:   # rerun_refusal said so first
        raise UsageError(f"snapshot {snap.label(document)!r} has no recorded benchmark to rerun")
    recorded = RecordedRerun(snap.label(document), str(record.get("command")),
                             record.get("cwd") or None)
    if confirm is None or not confirm(recorded):
        raise DeclinedError(f"nothing was changed or run: --rerun would run the snapshot's "
                            f"recorded command {recorded.command!r}: pass --yes to run it, "
                            "or give your own with --rerun-cmd CMD")
    return recorded.command


# ---- the playbook's view ------------------------------------------------------------------------

def rollback_backup_source(label: str) -> str | None:
    """A rollback (restoring a pre-restore point by its label) puts back what the restore
    it undoes had saved; the label is the user's (the CLI's), the folder name is ours."""
    tail = label[len(ROLLBACK_PREFIX):]
    if label.startswith(ROLLBACK_PREFIX) and tail.replace("-", "").isdigit():
        return label
    return None


def rollback_stamp(label: str) -> str | None:
    """The time in a rollback point's label (pre-restore-<time>[-n]): the restore it undoes
    began then, and stashed the user's work at that time or later."""
    return label[len(ROLLBACK_PREFIX):][:len("YYYYmmdd-HHMMSS")] \
        if rollback_backup_source(label) else None


def playbook_vars(host: Host, label: str, backup_label: str | None) -> Variables:
    """Extra vars for restore.yml: the checkouts to restore, where to save what is replaced
    (applying only), and, for a rollback, the backup folder of the restore it undoes."""
    found: Variables = {CHOSEN_VAR: chosen_repos(host)}
    if backup_label:
        found["backup_dir"] = backup_dir(backup_label)
    source = rollback_backup_source(label)
    if source:
        found["put_back_from"] = backup_dir(source)
    return found
