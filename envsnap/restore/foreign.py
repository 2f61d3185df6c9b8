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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from envsnap.snapshot import document as snap
from envsnap.snapshot.provenance import Provenance

if TYPE_CHECKING:
    from envsnap.snapshot.records import Snapshot

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
                 needs_consent: bool, serve: str | None = None) -> ForeignPlan:
    """repos: the snapshot's checkouts this restore may touch (restore/policy.py: those the
    user named); rerun: the command --rerun would run, None without --rerun; serve: the
    server --rerun --serve would start, with the env the snapshot gives it."""
    writes: list[PlannedWrite] = []
    commands = [capture_command(repos)]
    for path, repo in sorted(snap.repos(document).items()):
        if str(path) not in repos:
            continue   # a checkout nobody named is left alone
        if not isinstance(repo, dict) or not isinstance(repo.get("head"), str):
            continue   # restore.yml skips a repo without a commit
        repo_writes, repo_commands = repo_plan(str(path), repo)
        writes += repo_writes
        commands += repo_commands
    writes += sitecustomize_writes(document)
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


def submodule_commands(path: str, submodules: Any) -> list[str]:
    """What the submodules step runs in each submodule the snapshot records (gitsubmodule.py)."""
    commands = []
    for sub, record in sorted((submodules if isinstance(submodules, dict) else {}).items()):
        if not isinstance(record, dict):
            continue
        commit = str(record.get("checked_out") or record.get("recorded") or "?")
        quoted = shlex.quote(posixpath.join(path, str(sub)))
        commands += [f"git -C {shlex.quote(path)} submodule update --init -- "
                     f"{shlex.quote(str(sub))}  (only if it is not checked out)",
                     f"git -C {quoted} stash push --include-untracked  (only if there is work)",
                     f"git -C {quoted} checkout --detach {commit}"]
    return commands


def repo_plan(path: str, repo: Mapping[str, Any]) -> tuple[list[PlannedWrite], list[str]]:
    uncommitted = repo.get("uncommitted")
    work: dict[str, Any] = uncommitted if isinstance(uncommitted, dict) else {}
    quoted = shlex.quote(path)
    head = str(repo["head"])
    commands = [f"git -C {quoted} stash push --include-untracked  (only if there is work)",
                f"git -C {quoted} fetch  (only if {head[:12]} is not there)",
                f"git -C {quoted} checkout {shlex.quote(str(repo.get('branch') or head))}"
                f"  (commit {head})"]
    commands += submodule_commands(path, repo.get("submodules"))
    writes: list[PlannedWrite] = []
    for name in ("patch", "staged"):
        blob = work.get(name)
        text = blob.get("text") if isinstance(blob, dict) else None
        if isinstance(blob, dict) and (blob.get("bytes") or text):
            size = blob.get("bytes") if isinstance(blob.get("bytes"), int) else None
            what = "staged changes" if name == "staged" else "uncommitted patch"
            commands.append(f"git -C {quoted} apply{' --cached' if name == 'staged' else ''}"
                            f"  (the snapshot's {what}, {bytes_text(size)})")
            writes += [PlannedWrite(posixpath.join(path, file), file_size, "patched")
                       for file, file_size in patched_files(text if isinstance(text, str)
                                                            else "")]
    untracked = work.get("untracked")
    for name, facts in sorted((untracked if isinstance(untracked, dict) else {}).items()):
        if isinstance(facts, dict) and isinstance(facts.get("content"), str):
            writes.append(PlannedWrite(posixpath.join(path, str(name)),
                                       len(facts["content"].encode("utf-8", "surrogateescape")),
                                       "untracked file"))
    return writes, commands


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


def sitecustomize_writes(document: Snapshot) -> list[PlannedWrite]:
    customize = snap.section(document, "python_env").get("customize")
    site = customize.get("sitecustomize") if isinstance(customize, dict) else None
    if not (isinstance(site, dict) and isinstance(site.get("content"), str)):
        return []
    return [PlannedWrite(str(site.get("path")),
                         len(site["content"].encode("utf-8", "surrogateescape")),
                         "sitecustomize")]


def bytes_text(size: int | None) -> str:
    return "size unknown" if size is None else f"{size} bytes"


def rerun_shown(document: Snapshot, rerun: bool, given: str | None) -> str | None:
    """The benchmark command --rerun would run: the one given, else the recorded one."""
    if not rerun:
        return None
    if given:
        return given
    record: Mapping[str, Any] = snap.bench(document) or {}
    command, cwd = record.get("command"), record.get("cwd")
    if not isinstance(command, str):
        return "(no benchmark recorded)"
    return command + (f"  (in {cwd})" if isinstance(cwd, str) and cwd else "")


def recorded_repos(document: Snapshot) -> list[str]:
    return sorted(str(path) for path in snap.repos(document))
