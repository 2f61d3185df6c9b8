"""The user's untracked and ignored files, told apart from what the benchmark writes.

A benchmark writes files into the checkout it runs in: python's `__pycache__/` beside a
module it imports, a results file, logs. Before the first trial every untracked and
ignored file is recorded with its content (a git blob sha, computed by `git hash-object`),
and the ones that stay in the checkout during the trials (ignored files, and untracked ones
with --keep-untracked: stashing takes the others) get a copy in the checkout's own object
store (`hash-object -w`, unreachable objects git's gc drops in time), up to COPY_LIMIT
bytes each. When the host is put back:
- a file that was not there before, or one at a path whose user's version is in the stash,
  is the benchmark's: it is moved aside into a folder kept on the host (never deleted), so
  it never blocks a checkout or the stash coming back;
- a file of the user's that stayed in place and whose content the benchmark changed (or
  removed) gets the user's content back from its copy; the benchmark's version is moved
  aside first. One too big to copy is named as a problem, never guessed at.
Links are never written through: a path is moved (the link itself), then written new.
"""
from __future__ import annotations

import posixpath
import shlex
import time
import uuid
from dataclasses import dataclass, field

from envsnap.hostops.git import GitFailure, complaint, git_prefix, run
from envsnap.hostops.shell import Shell, quote_path, upload

COPY_LIMIT = 16 * 1024 * 1024   # bytes: a user's in-place file bigger than this is only hashed
KEPT_DIR = "~/.cache/envsnap/benchmark-files"
MOVES_PER_COMMAND = 200         # shell commands stay far below any argument-length limit


@dataclass(frozen=True)
class Recorded:
    """A checkout's untracked and ignored files before the first trial."""

    blobs: dict[str, str | None]    # path -> blob sha of its content; None: not a plain file
    in_place: frozenset[str]        # the paths not stashed: they stay during the trials
    copied: frozenset[str]          # in_place paths whose content is kept in the object store
    folders: frozenset[str]         # every folder of the worktree (never removed)


def listed(shell: Shell, top: str, *args: str) -> list[str]:
    result = run(shell, top, *args)
    if result.exit_code != 0:
        raise GitFailure(f"{top}: git {args[0]} failed: {complaint(result)}")
    return [entry for entry in result.stdout.split("\0") if entry]


def others(shell: Shell, top: str) -> list[str]:
    """Every file git does not track, ignored ones too (a nested repository, `sub/`, left
    out: it is not a file to move)."""
    return [path for path in listed(shell, top, "ls-files", "-z", "--others")
            if not path.endswith("/")]


def untracked(shell: Shell, top: str) -> set[str]:
    return set(listed(shell, top, "ls-files", "-z", "--others", "--exclude-standard"))


def found_by_find(shell: Shell, top: str, test: str) -> set[str]:
    """Paths under `top` (its .git left out) that find's `test` selects, relative to it."""
    result = shell.sh(f"cd {quote_path(top)} && find . -name .git -prune -o {test} -print0")
    if result.exit_code != 0:
        raise GitFailure(f"{top}: could not list its files: {result.stderr.strip()}")
    return {entry[2:] for entry in result.stdout.split("\0") if entry.startswith("./")}


def blob_shas(shell: Shell, top: str, paths: list[str], keep: bool) -> dict[str, str | None]:
    """The blob sha of each plain file's content (`keep`: a copy written to the object
    store); a path git's `--stdin-paths` cannot carry (a newline in it) is None."""
    fed = [path for path in paths if "\n" not in path]
    shas: dict[str, str | None] = {path: None for path in paths}
    if not fed:
        return shas
    listing = upload(shell, ("\n".join(fed) + "\n").encode("utf-8", "surrogateescape"),
                     "paths")
    write = " -w" if keep else ""
    try:
        result = shell.sh(f"{git_prefix(top)} hash-object{write} --no-filters --stdin-paths "
                          f"< {quote_path(listing)}")
    finally:
        shell.sh(f"rm -f {quote_path(listing)}")
    values = result.stdout.split()
    if result.exit_code != 0 or len(values) != len(fed):
        raise GitFailure(f"{top}: could not read its untracked files: {complaint(result)}")
    shas.update(zip(fed, values))
    return shas


def record(shell: Shell, top: str, stashing: bool) -> Recorded:
    """Before anything moves: every untracked and ignored file with its content; `stashing`:
    the untracked ones are about to go into the stash (they do not stay in place)."""
    paths = others(shell, top)
    plain = found_by_find(shell, top, "-type f") if paths else set()
    small = found_by_find(shell, top, f"-type f -size -{COPY_LIMIT + 1}c") if paths else set()
    in_place = set(paths) - untracked(shell, top) if stashing else set(paths)
    copied = sorted(path for path in in_place if path in small)
    blobs: dict[str, str | None] = {path: None for path in paths}
    blobs.update(blob_shas(shell, top, copied, keep=True))
    blobs.update(blob_shas(shell, top, sorted(path for path in paths
                                              if path in plain and path not in small), False))
    blobs.update({path: blobs[path] if path in plain else None for path in paths})
    folders = found_by_find(shell, top, "-type d") if paths else set()
    return Recorded(blobs, frozenset(in_place), frozenset(path for path in copied
                                                           if blobs[path] is not None),
                    frozenset(folders))


@dataclass
class Aside:
    """Where the benchmark's files go on the host, made on the first move."""

    shell: Shell
    top: str
    command: str
    folder: str = ""
    moved: int = 0
    stuck: list[str] = field(default_factory=list)   # paths the last move could not move

    def finish_command(self) -> str | None:
        """For paths that could not be moved aside: one command that keeps them in a tar
        file in the home folder and takes them out of the checkout, or None."""
        if not self.stuck:
            return None
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        paths = " ".join(shlex.quote(path) for path in self.stuck)
        return (f"(cd {shlex.quote(self.top)} && tar -cf ~/envsnap-benchmark-files-{stamp}.tar "
                f"-- {paths} && rm -f -- {paths})")

    def move(self, paths: list[str]) -> None:
        """Each path (a file or a link, never followed) into the kept folder, under its own
        relative path; GitFailure if one could not be moved (the others still are)."""
        if not paths:
            return
        if not self.folder:
            stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
            self.folder = f"{KEPT_DIR}/{self.command}-{stamp}-{uuid.uuid4().hex[:8]}"
        failed = []
        for start in range(0, len(paths), MOVES_PER_COMMAND):
            chunk = paths[start:start + MOVES_PER_COMMAND]
            lines = [f"cd {quote_path(self.top)} || exit 1"]
            for path in chunk:
                target = f"{self.folder}/{posixpath.basename(self.top)}/{path}"
                lines.append(f"mkdir -p {quote_path(posixpath.dirname(target))} && "
                             f"mv -f -- {shlex.quote(path)} {quote_path(target)} || "
                             f"printf '%s\\0' {shlex.quote(path)}")
            result = self.shell.sh("\n".join(lines))
            failed += [entry for entry in result.stdout.split("\0") if entry]
            if result.exit_code != 0:
                failed += chunk
        self.moved += len(paths) - len(failed)
        self.stuck = failed
        if failed:
            raise GitFailure("could not move aside what the benchmark wrote: "
                             + ", ".join(failed[:5]) + (" ..." if len(failed) > 5 else ""))


def theirs(recorded: Recorded, now: list[str]) -> list[str]:
    """The benchmark's files among those git does not track now: new paths, and paths whose
    user's version is in the stash (written again by the trials)."""
    return [path for path in now if path not in recorded.blobs or path not in recorded.in_place]


def set_aside(shell: Shell, top: str, recorded: Recorded, aside: Aside) -> list[str]:
    """The benchmark's files moved aside, the folders they alone made removed: the paths."""
    moved = theirs(recorded, others(shell, top))
    aside.move(moved)
    remove_new_folders(shell, top, recorded, moved)
    return moved


def remove_new_folders(shell: Shell, top: str, recorded: Recorded, moved: list[str]) -> None:
    """Folders left empty by the moves that did not exist before (`__pycache__/`): rmdir
    only, which never removes a folder that still holds anything."""
    made = {parent for path in moved for parent in parents(path)
            if parent not in recorded.folders}
    if made:
        deepest_first = sorted(made, key=lambda folder: folder.count("/"), reverse=True)
        shell.sh(f"cd {quote_path(top)} && "
                 + "; ".join(f"rmdir -- {shlex.quote(folder)} 2>/dev/null" for folder in
                             deepest_first) + "; true")


def parents(path: str) -> list[str]:
    folders = []
    folder = posixpath.dirname(path)
    while folder:
        folders.append(folder)
        folder = posixpath.dirname(folder)
    return folders


def restore_own(shell: Shell, top: str, recorded: Recorded,
                aside: Aside) -> tuple[list[str], list[str]]:
    """The user's files that stayed in place, back to the content recorded: those the
    benchmark rewrote or removed (its version moved aside first). Returns what could not be
    brought back (no copy kept: too big), one line each, and the paths written back."""
    watched = sorted(path for path in recorded.in_place if recorded.blobs.get(path))
    if not watched:
        return [], []
    plain = found_by_find(shell, top, "-type f")
    present = set(others(shell, top))
    now = blob_shas(shell, top, [path for path in watched if path in plain and path in present],
                    keep=False)
    changed = [path for path in watched if now.get(path) != recorded.blobs[path]]
    aside.move([path for path in changed if path in present])
    problems, back = [], []
    for path in changed:
        if path not in recorded.copied:
            problems.append(f"{top}/{path}: the benchmark changed your file and it was too "
                            f"big to keep a copy of (over {COPY_LIMIT // (1024 * 1024)} MiB)")
            continue
        blob = recorded.blobs[path]
        assert blob is not None
        folder = posixpath.dirname(path)
        make = f"mkdir -p -- {shlex.quote(folder)} && " if folder else ""
        # noclobber: the path was moved aside; should anything be there again, never
        # write into it (nor through a link)
        wrote = shell.sh(f"cd {quote_path(top)} && {make}set -C && "
                         f"{git_prefix(top)} cat-file blob {blob} > {shlex.quote(path)}")
        if wrote.exit_code != 0:
            problems.append(f"{top}/{path}: could not be written back ({complaint(wrote)}): "
                            f"git -C {shlex.quote(top)} cat-file blob {blob} > "
                            f"{shlex.quote(path)}")
        else:
            back.append(path)
    return problems, back


def in_the_way(shell: Shell, top: str, stash: str) -> list[str]:
    """The untracked files of a stash (its third parent) that exist in the worktree now:
    `git stash pop` would restore the others, then fail on these."""
    saved = run(shell, top, "ls-tree", "-r", "-z", "--name-only", f"{stash}^3")
    if saved.exit_code != 0:   # no untracked files in it
        return []
    names = [name for name in saved.stdout.split("\0") if name]
    present = set(others(shell, top))
    return [name for name in names if name in present]
