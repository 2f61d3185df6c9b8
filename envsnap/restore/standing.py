"""Where a host stands when a restore stops half-way, and the stash that restore leaves.

restore.yml stashes the user's work (`envsnap: work saved before restoring LABEL (time)`)
before it moves HEAD. Ctrl-C then leaves a checkout somewhere between the two states:
`standing` says where (HEAD, its branch or detached, the stash holding the work), for the
one line the CLI prints with the one way back (`stopped_halfway`); Ctrl-C before anything
moved says just that (`stopped_before`). `restore --abort`, and `restore pre-restore-<time>`,
put the work back from the rollback point, whose snapshot holds it; the stash then only
repeats it, and `drop_restored_stashes` (of the aborted restore's label) or
`drop_stashes_since` (made since the rollback point's time) drops it, but only once git
shows that all it holds is back as it holds it: HEAD its commit, every tracked file, every
untracked file, byte for byte. Anything less, and the stash stays (work is never lost for a
tidy stash list).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from envsnap.errors import HostError, Interrupted
from envsnap.hostops.git import GitFailure, current_branch, head, output, run, toplevel
from envsnap.hostops.shell import Shell
from envsnap.restore.safety import Journal, way_out

STASH_PREFIX = "envsnap: work saved before restoring "
STAMP = re.compile(r" \((\d{8}-\d{6})\)$")   # the restore's time, ending the stash's subject


@dataclass(frozen=True)
class Stash:
    ref: str       # stash@{n}: shifts as stashes come and go
    sha: str
    subject: str


def restore_stashes(shell: Shell, top: str, label: str) -> list[Stash]:
    """The stashes a restore of `label` made in `top` (of any label: ""), newest first."""
    listed = output(shell, top, "stash", "list", "--format=%gd%x00%H%x00%gs") or ""
    found = []
    for line in listed.splitlines():
        parts = line.split("\0")
        if len(parts) == 3 and (f"{STASH_PREFIX}{label} (" if label else STASH_PREFIX) \
                in parts[2]:
            found.append(Stash(*parts))
    return found


def standing(shell: Shell, touched: list[str], label: str) -> list[str]:
    """One phrase per checkout: its HEAD, and the stash that holds the user's work."""
    said = []
    for top in touched:
        try:
            sha, branch = head(shell, top), current_branch(shell, top)
            stashes = restore_stashes(shell, top, label)
        except (GitFailure, HostError) as exc:
            said.append(f"{top}: could not be read ({exc})")
            continue
        where = f"on {branch} at {(sha or '?')[:12]}" if branch else \
            f"detached at {(sha or '?')[:12]}"
        work = f", your work in {stashes[0].ref} ({stashes[0].sha[:12]})" if stashes else ""
        said.append(f"{top}: HEAD {where}{work}")
    return said


def stopped_halfway(shell: Shell, journal: Journal) -> Interrupted:
    """Ctrl-C while the restore changed the host: where each checkout stands, the way back."""
    where = standing(shell, journal.touched, journal.label)
    host = journal.host
    return Interrupted(f"the restore of {journal.label!r} on {host} stopped while "
                       f"{journal.state}: {'; '.join(where) or 'no checkout moved'}; "
                       f"`envsnap restore --abort --host {host}` puts it back as it was "
                       f"({journal.pre_restore}), your work included")


def stopped_before(host: str, label: str, journal: Journal | None) -> Interrupted:
    """Ctrl-C while capturing, planning or asking: this run changed nothing (one interrupted
    before it, if any, is still pending, and its way out is said)."""
    pending = f"; {way_out(journal)}" if journal is not None else ""
    return Interrupted(f"nothing was changed on {host}: the restore of {label!r} stopped "
                       f"before it began{pending}")


def is_back(shell: Shell, top: str, stash: Stash) -> bool:
    """Whether the checkout holds all the stash holds: HEAD is the commit it was made on, each
    tracked file is as it saved it, each untracked file it saved is there with its bytes."""
    if head(shell, top) != output(shell, top, "rev-parse", "-q", "--verify", f"{stash.sha}^1"):
        return False
    if run(shell, top, "diff", "--quiet", stash.sha, "--").exit_code != 0:
        return False
    untracked = output(shell, top, "rev-parse", "-q", "--verify", f"{stash.sha}^3")
    if untracked is None:
        return True
    listing = output(shell, top, "ls-tree", "-r", "-z", untracked)
    if listing is None:
        return False
    entries = [entry.split("\t", 1) for entry in listing.split("\0") if entry]
    if any(meta.split()[0] != "100644" and meta.split()[0] != "100755"
           for meta, _path in entries):
        return False   # a link or a submodule: not compared here, so kept
    paths = [path for _meta, path in entries]
    if not paths:
        return True
    hashed = run(shell, top, "hash-object", "--no-filters", "--", *paths)
    wanted = [meta.split()[2] for meta, _path in entries]
    return hashed.exit_code == 0 and hashed.stdout.split() == wanted


def drop_restored_stashes(shell: Shell, touched: list[str], label: str) -> list[str]:
    """Drop each stash of the restore of `label` whose content is back; what was dropped."""
    return drop_back(shell, touched, lambda top: restore_stashes(shell, top, label))


def stashes_since(shell: Shell, top: str, stamp: str) -> list[Stash]:
    """The stashes any restore made in `top` at `stamp` (a name_stamp) or later: those of the
    restore whose rollback point is pre-restore-<stamp>, and of restores after it."""
    return [stash for stash in restore_stashes(shell, top, "")
            if (made := STAMP.search(stash.subject)) is not None and made.group(1) >= stamp]


def drop_stashes_since(shell: Shell, touched: list[str], stamp: str) -> list[str]:
    """A rollback to pre-restore-<stamp>: drop each stash a restore made since whose content
    is back (is_back); what was dropped."""
    return drop_back(shell, touched, lambda top: stashes_since(shell, top, stamp))


def drop_back(shell: Shell, touched: list[str],
              stashes: Callable[[str], list[Stash]]) -> list[str]:
    """Drop each of `stashes(top)` whose content is back; what was dropped."""
    dropped = []
    for top in touched:
        toplevel(shell, top)   # another user's checkout: admitted, or refused (hostops/git.py)
        for stash in stashes(top):
            if not is_back(shell, top, stash):
                continue
            # by sha, not by the stash@{n} listed: a stash made meanwhile shifts the numbers
            ref = next((s.ref for s in stashes(top) if s.sha == stash.sha), None)
            if ref is not None and run(shell, top, "stash", "drop", "-q", ref).exit_code == 0:
                dropped.append(f"{top}: {stash.sha[:12]} ({stash.subject!r})")
    return dropped
