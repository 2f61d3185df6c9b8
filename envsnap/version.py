"""What `envsnap --version` says: the release, and the commit when envsnap runs from a git
checkout, so a bug report can quote exactly which code it ran.

The commit is read from the checkout's files, never by running git: a checkout's config
(core.fsmonitor, hooks) may be another user's, and git run there would run their code. What is
read: `.git` (a folder, or the `gitdir:` file of a worktree or submodule), its HEAD, the ref
HEAD names (in the worktree's folder, then the shared one), and packed-refs. Only `.git`
beside the package folder counts, never one further up: a wheel installed in a virtualenv
inside some project's checkout is not that project's commit."""
from __future__ import annotations

import re
from pathlib import Path

from envsnap import __version__

CHECKOUT = Path(__file__).resolve().parent.parent   # holds envsnap/: a checkout, site-packages
COMMIT = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")   # SHA-1, or a SHA-256 repository's
SHORT = 12   # as envsnap quotes commits elsewhere (bisect, restore)


def version_text() -> str:
    """`envsnap 0.1.0 (commit 0123456789ab)` from a checkout, `envsnap 0.1.0` otherwise."""
    commit = checkout_commit(CHECKOUT)
    return f"envsnap {__version__}" + (f" (commit {commit[:SHORT]})" if commit else "")


def checkout_commit(checkout: Path) -> str | None:
    """The commit checked out in `checkout`, or None: no checkout, or one that cannot be
    read this way (a ref store other than files, an unborn branch)."""
    git = git_folder(checkout)
    head = first_line(git / "HEAD") if git else None
    if git is None or head is None:
        return None
    if not head.startswith("ref: "):   # detached
        return head if COMMIT.fullmatch(head) else None
    return ref_commit(git, head[len("ref: "):])


def git_folder(checkout: Path) -> Path | None:
    dot_git = checkout / ".git"
    if dot_git.is_dir():
        return dot_git
    line = first_line(dot_git)   # a worktree's or submodule's pointer, relative to checkout
    if line is None or not line.startswith("gitdir: "):
        return None
    return checkout / line[len("gitdir: "):]


def ref_commit(git: Path, ref: str) -> str | None:
    """The commit `ref` points at: its loose file (a worktree's own folder first, then the
    folder it shares with the main checkout), else its line in packed-refs."""
    if not ref.startswith("refs/") or ".." in ref.split("/"):
        return None
    shared = git / (first_line(git / "commondir") or ".")
    for folder in (git, shared):
        loose = first_line(folder / ref)
        if loose is not None and COMMIT.fullmatch(loose):
            return loose
    try:
        packed = (shared / "packed-refs").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in packed.splitlines():   # `<commit> <ref>`; `#` and `^` lines match no ref
        commit, _, name = line.partition(" ")
        if name == ref and COMMIT.fullmatch(commit):
            return commit
    return None


def first_line(path: Path) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            return file.readline(4096).strip()
    except OSError:   # missing, a folder, unreadable
        return None
