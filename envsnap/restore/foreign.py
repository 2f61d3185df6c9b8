"""Everything a restore of a foreign snapshot could do, read from the snapshot alone.

A snapshot envsnap did not sign for this user (snapshot/provenance.py) may have been written
by anyone, so before it is trusted the user sees all it holds that a restore acts on: every
file it would write (with its size) and every command it would run, whether or not the host
has drifted from it (the check-mode plan shows only what drifted, on the host as it is now).
Pure: restore/run.py decides, cli/restore.py prints restore/render.py's lines.
"""
from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from envsnap.snapshot import customize as customize_words
from envsnap.snapshot import document as snap
from envsnap.snapshot.provenance import Provenance

if TYPE_CHECKING:
    from envsnap.snapshot.records import Blob, Repo, Snapshot, Submodule

DIFF_HEADER = re.compile(r"^diff --git a/(.*?) b/(.*)$")


@dataclass(frozen=True)
class PlannedWrite:
    path: str              # on the host
    size: int | None       # bytes written (a patched file: the bytes of its diff); None unknown
    what: str              # "untracked file", "patched", "sitecustomize"


@dataclass(frozen=True)
class ForeignPlan:
    label: str
    host: str
    provenance: Provenance
    writes: tuple[PlannedWrite, ...]
    commands: tuple[str, ...]
    needs_consent: bool    # False under --check or --trust-foreign: shown, not asked
    left_alone: tuple[str, ...] = ()   # the snapshot's checkouts nobody named


def foreign_plan(document: Snapshot, label: str, host: str, provenance: Provenance,
                 *, repos: Sequence[str], pip: bool, rerun: str | None,
                 needs_consent: bool, serve: str | None = None,
                 host_wide: bool = False) -> ForeignPlan:
    """repos: the snapshot's checkouts this restore may touch (restore/policy.py: those the
    user named); rerun: the command --rerun would run, None without --rerun; serve: the
    server --rerun --serve would start, with the env the snapshot gives it; host_wide:
    --host-wide, without which a sitecustomize outside the recorded venv is not written."""
    writes: list[PlannedWrite] = []
    commands = [capture_command(repos)]
    # restore.yml skips a repo without a commit, and a checkout nobody named is left alone
    for path, repo in sorted(snap.repos_with_head(document).items()):
        if path not in repos:
            continue
        repo_writes, repo_commands = repo_plan(path, repo)
        writes += repo_writes
        commands += repo_commands
    writes += sitecustomize_writes(document, host_wide)
    if pip:
        commands += [f"pip install --no-deps {shlex.quote(f'{name}=={version}')}"
                     for name, version in sorted(snap.packages(document).items())
                     if isinstance(version, str)]
    if rerun:
        commands.append(f"benchmark (--rerun): {rerun}")
    if serve:
        commands.append(f"server (--rerun --serve): {serve}")
    left_alone = tuple(path for path in recorded_repos(document) if path not in repos)
    return ForeignPlan(label=label, host=host, provenance=provenance, writes=tuple(writes),
                       commands=tuple(commands), needs_consent=needs_consent,
                       left_alone=left_alone)


def capture_command(repos: Sequence[str]) -> str:
    """The captures before and after run git in the checkouts restored."""
    return "envsnap agent: capture the host before and after" + \
        (f" (git status in {', '.join(repos)})" if repos else "")


def submodule_commands(path: str, submodules: dict[str, Submodule]) -> list[str]:
    """What the submodules step runs in each submodule the snapshot records (gitsubmodule.py)."""
    commands = []
    for sub, record in sorted(submodules.items()):
        commit = record.get("checked_out") or record.get("recorded") or "?"
        quoted = shlex.quote(posixpath.join(path, sub))
        commands += [f"git -C {shlex.quote(path)} submodule update --init -- "
                     f"{shlex.quote(sub)}  (only if it is not checked out)",
                     f"git -C {quoted} stash push --include-untracked  (only if there is work)",
                     f"git -C {quoted} checkout --detach {commit}"]
    return commands


def repo_plan(path: str, repo: Repo) -> tuple[list[PlannedWrite], list[str]]:
    """What restoring one checkout runs and writes; `repo` has a HEAD (repos_with_head)."""
    work = repo.get("uncommitted") or {}
    quoted = shlex.quote(path)
    head = str(repo.get("head"))
    commands = [f"git -C {quoted} stash push --include-untracked  (only if there is work)",
                f"git -C {quoted} fetch  (only if {head[:12]} is not there)",
                f"git -C {quoted} checkout {shlex.quote(repo.get('branch') or head)}"
                f"  (commit {head})"]
    commands += submodule_commands(path, repo.get("submodules", {}))
    writes: list[PlannedWrite] = []
    for staged, blob in ((False, work.get("patch")), (True, work.get("staged"))):
        if blob is not None and (blob.get("bytes") or blob.get("text")):
            patch_writes, command = blob_plan(path, blob, staged)
            writes += patch_writes
            commands.append(command)
    writes += [PlannedWrite(posixpath.join(path, name),
                            len(content.encode("utf-8", "surrogateescape")), "untracked file")
               for name, content in sorted(snap.untracked_contents(repo).items())]
    return writes, commands


def blob_plan(path: str, blob: Blob, staged: bool) -> tuple[list[PlannedWrite], str]:
    """The files a recorded patch (or staged changes) rewrites, and the apply that does it."""
    what = "staged changes" if staged else "uncommitted patch"
    command = (f"git -C {shlex.quote(path)} apply{' --cached' if staged else ''}"
               f"  (the snapshot's {what}, {bytes_text(blob.get('bytes'))})")
    writes = [PlannedWrite(posixpath.join(path, file), file_size, "patched")
              for file, file_size in patched_files(blob.get("text") or "")]
    return writes, command


def patched_files(text: str) -> list[tuple[str, int]]:
    """Each file a patch touches, with the bytes of its part of the diff."""
    found: list[tuple[str, int]] = []
    for line in text.splitlines(keepends=True):
        header = DIFF_HEADER.match(line.rstrip("\n"))
        if header:
            found.append((header.group(2), 0))
        if found:
            found[-1] = (found[-1][0], found[-1][1] + len(line.encode("utf-8", "replace")))
    return found


def sitecustomize_writes(document: Snapshot, host_wide: bool = False) -> list[PlannedWrite]:
    """The recorded sitecustomize, where restore may write it: inside the recorded python's
    venv, or anywhere with --host-wide (hostops/site.py decides on the host itself)."""
    site = snap.sitecustomize(document)
    content = site.get("content") if site is not None else None
    if site is None or content is None:
        return []
    interpreter = snap.python_env(document).get("interpreter", {})
    in_venv = bool(interpreter.get("venv")) and customize_words.inside(
        str(site.get("real_path") or site.get("path")), interpreter.get("prefix"))
    if not (in_venv or host_wide):
        return []
    return [PlannedWrite(str(site.get("path")),
                         len(content.encode("utf-8", "surrogateescape")), "sitecustomize")]


def bytes_text(size: int | None) -> str:
    return "size unknown" if size is None else f"{size} bytes"


def rerun_shown(document: Snapshot, rerun: bool, given: str | None) -> str | None:
    """The benchmark command --rerun would run: the one given, else the recorded one."""
    if not rerun:
        return None
    if given:
        return given
    record = snap.bench(document)
    command = record.get("command") if record is not None else None
    if record is None or command is None:
        return "(no benchmark recorded)"
    cwd = record.get("cwd")
    return command + (f"  (in {cwd})" if cwd else "")


def recorded_repos(document: Snapshot) -> list[str]:
    return sorted(snap.repos(document))
