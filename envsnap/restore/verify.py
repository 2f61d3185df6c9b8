"""After a restore, the host captured again is held against the snapshot: what is equal is
said as verified, by name, and nothing else is; what still differs is listed. Pure.

Restore puts back, and so verifies exactly: each restored checkout's HEAD, uncommitted patch
and untracked files, the sitecustomize that runs, and with --pip the installed packages. The
rest is drift no tool of envsnap's undoes (`remaining_drift`), each with its advice.
"""
from __future__ import annotations

from collections.abc import Set
from typing import TYPE_CHECKING

from envsnap.agent.sections import SECTIONS
from envsnap.diff.compare import DiffOptions, diff
from envsnap.diff.findings import Finding
from envsnap.restore.unwritable import kept_out
from envsnap.snapshot import document as snap

if TYPE_CHECKING:
    from envsnap.snapshot.records import Repo, Snapshot

# Which machine and which boot: checked before the restore (hostname, --force-host), never
# something to change by hand afterwards.
IDENTITY = (("system", ("hostname",)), ("system", ("boot_id",)))


def restorable_mismatches(snapshot: Snapshot, after: Snapshot,
                          restored: list[str]) -> list[str]:
    """What restore puts back, compared exactly: HEAD, uncommitted patch, untracked files
    (of the checkouts it restored), sitecustomize. History, reflog and stashes differ after
    any restore, by design."""
    problems = []
    for path in restored_checkouts(snapshot, restored):
        problems += [f"{path}: {name} differs from the snapshot"
                     for name in checkout_differences(snapshot, after, path)]
    if snap.customize_digest(snapshot) != snap.customize_digest(after):
        problems.append("sitecustomize differs from the snapshot")
    return problems


def verified(snapshot: Snapshot, after: Snapshot, restored: list[str],
             packages_checked: bool) -> list[str]:
    """What was checked equal, each by name: the checkouts, the sitecustomize that runs (by
    its path), and the installed packages when --pip put them back and none still differs."""
    same = [path for path in restored_checkouts(snapshot, restored)
            if not checkout_differences(snapshot, after, path)]
    said = [f"checkout{'s' if len(same) > 1 else ''} {', '.join(same)}"] if same else []
    if snap.customize_digest(snapshot) == snap.customize_digest(after):
        site = snap.sitecustomize(after)
        said.append(f"the sitecustomize that runs ({site.get('path')})" if site else
                    "no sitecustomize (none runs, as in the snapshot)")
    if packages_checked:
        said.append("the installed packages")
    return said


def restored_checkouts(snapshot: Snapshot, restored: list[str]) -> list[str]:
    return [path for path, repo in snap.repos(snapshot).items()
            if "head" in repo and path in restored]


def checkout_differences(snapshot: Snapshot, after: Snapshot, path: str) -> list[str]:
    """The names of what differs in one checkout; the untracked files restore cannot write
    back are said apart (unwritable.py)."""
    repo = snap.repos(snapshot)[path]
    now = snap.repos(after).get(path, {})
    unkept = set(kept_out(repo))
    wanted, found = repo_fingerprint(repo, unkept), repo_fingerprint(now, unkept)
    return [name for name, value in wanted.items() if found.get(name) != value]


def repo_fingerprint(repo: Repo, unkept: set[str]) -> dict[str, str | list[str] | None]:
    """What restore puts back of a checkout, by the name a mismatch is reported under; the
    `unkept` untracked files, which it cannot put back, left out."""
    work = repo.get("uncommitted") or {}
    patch = work.get("patch") or {}
    return {"HEAD": repo.get("head"), "uncommitted patch": patch.get("sha256"),
            "untracked files": sorted(set(work.get("untracked", {})) - unkept)}


def remaining_drift(snapshot: Snapshot, live: Snapshot, handled: Set[str]) -> list[Finding]:
    """Drift restore.yml does not undo, ranked. `handled`: the packages --pip is about to pin
    or remove (shown in the plan instead); after it ran, none is: a package that still differs
    is listed, whatever pip said."""
    sections = tuple(name for name in SECTIONS if name != "git")   # restore.yml moves git
    report = diff(snapshot, live, DiffOptions(sections=sections))
    return [finding for finding in report.findings
            if (finding.section, finding.path) not in IDENTITY
            and not (finding.section == "python_env" and finding.path[:1] == ("customize",))
            and not (finding.section == "python_env" and finding.path[:1] == ("packages",)
                     and len(finding.path) > 1 and finding.path[1] in handled)]


def packages_differ(findings: list[Finding]) -> bool:
    return any(finding.section == "python_env" and finding.path[:1] == ("packages",)
               for finding in findings)
