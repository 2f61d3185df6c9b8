"""The user's untracked and ignored files, told apart from what the benchmark writes.

A benchmark writes files into the checkout it runs in: python's `__pycache__/` beside a
module it imports, a results file, logs. Before the first trial every untracked and
ignored file is listed, and a marker file is touched on the host: a file written after it
is newer. The ones that stay in the checkout during the trials (ignored files, and untracked
ones with --keep-untracked: stashing takes the others) get a copy of their content in the
checkout's own object store (`git hash-object -w`: unreachable objects that git's gc drops
in time), up to COPY_LIMIT bytes each and MAX_COPIES files, the shallowest first (a results
file before what lies deep in an ignored `.venv/`). A big file is never read at all. When
the host is put back:
- a file that was not there before, or one at a path whose user's version is in the stash,
  is the benchmark's: it is moved aside into a folder kept on the host (never deleted), so
  it never blocks a checkout or the stash coming back;
- a file of the user's that stayed in place and is newer than the marker (or gone) is
  compared with its copy: one the benchmark changed gets the user's content back (its
  version moved aside first). One without a copy is named as a problem, never guessed at.
Links are never written through: a path is moved (the link itself), then written new.
"""
from __future__ import annotations

import posixpath
import shlex
import time
import uuid
from dataclasses import dataclass, field

from envsnap.hostops.git import GitFailure, complaint, git_prefix, run
from envsnap.hostops.shell import TMP_DIR, Shell, quote_path, upload

COPY_LIMIT = 16 * 1024 * 1024   # bytes: a user's in-place file bigger than this is not copied
MAX_COPIES = 4000               # files copied at most (an ignored .venv/ holds tens of thousands)
KEPT_DIR = "~/.cache/envsnap/benchmark-files"
MOVES_PER_COMMAND = 200   # paths per shell command: far below any argument-length limit


@dataclass(frozen=True)
class Recorded:
    """A checkout's untracked and ignored files before the first trial."""

    paths: frozenset[str]           # every untracked and ignored file (links too)
    in_place: frozenset[str]        # the paths not stashed: they stay during the trials
    plain: frozenset[str]           # in_place paths that are plain files (not links)
    copies: dict[str, str]          # in_place path -> blob sha of its content, kept
    folders: frozenset[str]         # every folder of the worktree (never removed)
    marker: str                     # a file on the host touched once all this was read


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
    # a folder it may not read (another user's) makes find fail at the end: what it listed
    # stands; a file in there is one no benchmark of this user's writes either
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
    hash_object = git_prefix(shell, top, "hash-object")
    try:
        result = shell.sh(f"{hash_object} hash-object{write} --no-filters --stdin-paths "
                          f"< {quote_path(listing)}")
    finally:
        shell.sh(f"rm -f {quote_path(listing)}")
    values = result.stdout.split()
    if result.exit_code == 0 and len(values) == len(fed):
        shas.update(zip(fed, values))
        return shas
    # one file it may not read stops the whole batch: each on its own then, "-" for those
    values = []
    for start in range(0, len(fed), MOVES_PER_COMMAND):
        chunk = fed[start:start + MOVES_PER_COMMAND]
        one_by_one = shell.sh(f"cd {quote_path(top)} && for name in "
                              + " ".join(shlex.quote(path) for path in chunk)
                              + f'; do {hash_object} hash-object{write} --no-filters -- '
                                '"$name" 2>/dev/null || echo -; done')
        values += one_by_one.stdout.split()
    if len(values) != len(fed):
        return shas
    shas.update((path, None if value == "-" else value) for path, value in zip(fed, values))
    return shas


def record(shell: Shell, top: str, stashing: bool) -> Recorded:
    """Before anything moves: every untracked and ignored file, copies of the in-place ones
    (module docstring); `stashing`: the untracked ones are about to go into the stash."""
    paths = others(shell, top)
    in_place = set(paths) - untracked(shell, top) if stashing else set(paths)
    plain = found_by_find(shell, top, "-type f") & in_place if in_place else set()
    small = found_by_find(shell, top, f"-type f -size -{COPY_LIMIT + 1}c") & plain \
        if plain else set()
    chosen = sorted(small, key=lambda path: (path.count("/"), path))[:MAX_COPIES]
    copies = {path: sha for path, sha in blob_shas(shell, top, chosen, keep=True).items()
              if sha is not None}
    folders = found_by_find(shell, top, "-type d") if paths else set()
    marker = f"~/{TMP_DIR}/marker-{uuid.uuid4().hex[:12]}"
    touched = shell.sh(f'mkdir -p "$HOME"/{TMP_DIR} && : > {quote_path(marker)}')
    if touched.exit_code != 0:
        raise GitFailure(f"{top}: could not write {marker}: {touched.stderr.strip()}")
    return Recorded(frozenset(paths), frozenset(in_place), frozenset(plain), copies,
                    frozenset(folders), marker)


def drop_marker(shell: Shell, recorded: Recorded) -> None:
    shell.sh(f"rm -f {quote_path(recorded.marker)}")


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
    return [path for path in now if path not in recorded.in_place]


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
    brought back (no copy kept), one line each, and the paths written back."""
    if not recorded.plain:
        return [], []
    present = set(others(shell, top)) & recorded.plain
    plain_now = found_by_find(shell, top, "-type f")
    newer = found_by_find(shell, top, f"-type f -newer {quote_path(recorded.marker)}")
    suspects = sorted(path for path in recorded.plain
                      if path not in present or path not in plain_now or path in newer)
    now = blob_shas(shell, top, [path for path in suspects
                                 if path in recorded.copies and path in present
                                 and path in plain_now], keep=False)
    changed = [path for path in suspects if now.get(path) != recorded.copies.get(path)
               or path not in recorded.copies]
    aside.move([path for path in changed if path in recorded.copies and
                (path in present or path in newer)])
    problems, back = [], []
    for path in changed:
        blob = recorded.copies.get(path)
        if blob is None:
            problems.append(f"{top}/{path}: the benchmark changed your file, of which no copy "
                            f"was kept (over {COPY_LIMIT // (1024 * 1024)} MiB, or past "
                            f"{MAX_COPIES} files): it is left as the benchmark left it")
            continue
        folder = posixpath.dirname(path)
        make = f"mkdir -p -- {shlex.quote(folder)} && " if folder else ""
        # noclobber: the path was moved aside; should anything be there again, never
        # write into it (nor through a link)
        cat_file = git_prefix(shell, top, "cat-file")
        wrote = shell.sh(f"cd {quote_path(top)} && {make}set -C && "
                         f"{cat_file} cat-file blob {blob} > {shlex.quote(path)}")
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
