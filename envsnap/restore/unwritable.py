"""What a restore cannot write back, said the same way every time: the untracked files a
snapshot describes but did not keep (binary, over the size cap, masked, symlinks), which the
host lacks or holds otherwise.

It is computed from the snapshot and the host as captured, before a restore and after it, so
a second run says what the first said (the plan alone would say nothing once the rest is in
place, and the check after a restore would call the file "NOT restored"). The reason is the
untracked task's own (playbook/tasks/untracked.py): one text for one cause.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from envsnap.playbook.tasks.untracked import unrestorable
from envsnap.snapshot import document as snap
from envsnap.snapshot.records import Repo, Snapshot


@dataclass(frozen=True)
class Unwritable:
    repo: str
    name: str
    reason: str     # "binary content not recorded"

    def text(self) -> str:
        return f"{self.repo}: {self.name} ({self.reason})"


def kept_out(repo: Repo) -> dict[str, str]:
    """{name: why} of the untracked files a snapshot's repo record could not give back."""
    return {name: why for name, facts in snap.untracked_records(repo).items()
            if (why := unrestorable(facts))}


def unwritable_files(snapshot: Snapshot, live: Snapshot, restored: list[str]) -> list[Unwritable]:
    """The snapshot's unkept untracked files (of the checkouts restored) that the host lacks
    or holds with other content."""
    live_repos = snap.repos(live)
    found = []
    for path, repo in snap.repos(snapshot).items():
        if path not in restored:
            continue
        now = snap.untracked_records(live_repos.get(path))
        recorded = snap.untracked_records(repo)
        for name, why in kept_out(repo).items():
            if not same_file(recorded[name], now.get(name)):
                found.append(Unwritable(path, name, why))
    return found


def same_file(recorded: Mapping[str, object], now: Mapping[str, object] | None) -> bool:
    if now is None:
        return False
    keys = ("sha256", "bytes", "symlink", "mtime_ns")
    return all(recorded.get(key) == now.get(key) for key in keys)
