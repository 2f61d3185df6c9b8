"""Keeping a history sound and small: `verify` and `gc`.

verify reads every manifest and checks each part it names once: there, and holding what its
name promises.

gc thins the records by a retention rule (retention.py), then deletes every part no manifest
names. Other processes may be recording meanwhile (a watcher, another host on a shared
folder), and a record reuses parts already there, so a part gc found unnamed may be named a
moment later. The writer sets the time of each part it uses (store.put_part); gc deletes
none whose time is later than its start (less a grace, for a record begun before gc was),
and deletes by moving the part aside first, then looking at the time of what it moved:
a writer that used the part before the move is seen, and one after finds it gone and
writes it again.
"""
from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Union

from envsnap.errors import StoreError
from envsnap.history.retention import DEFAULT, Retention, kept
from envsnap.history.store import (
    DIGEST,
    MANIFESTS,
    PARTS,
    History,
    Manifest,
    decoded_part,
    read_bytes,
)
from envsnap.snapshot.entries import create_entry
from envsnap.snapshot.store import max_snapshot_bytes

GRACE_S = 600.0   # a record takes well under a second; one begun this long before gc is safe


@dataclass(frozen=True)
class MissingPart:
    record: str   # the manifest's id
    digest: str

    def describe(self) -> str:
        return f"{self.record}: part {self.digest} is missing"


@dataclass(frozen=True)
class DamagedPart:
    record: str
    digest: str
    why: str

    def describe(self) -> str:
        return f"{self.record}: part {self.digest} is damaged ({self.why})"


@dataclass(frozen=True)
class DamagedManifest:
    path: Path
    why: str

    def describe(self) -> str:
        return f"{self.path}: {self.why}"


Problem = Union[MissingPart, DamagedPart, DamagedManifest]


def verify(history: History) -> list[Problem]:
    """Every problem of every record, each part read once."""
    checked: dict[str, str | None] = {}   # digest -> why it is not sound, None when it is
    problems: list[Problem] = []
    for path in history.manifest_files():
        try:
            manifest = history.read_header(path)
            contents = history.contents(manifest)
        except (OSError, StoreError) as exc:
            problems.append(DamagedManifest(path, one_line(exc)))
            continue
        for digest in dict.fromkeys(digest for _, digest in contents.parts):
            if digest not in checked:
                checked[digest] = part_problem(history, digest)
            why = checked[digest]
            if why == "missing":
                problems.append(MissingPart(manifest.id, digest))
            elif why is not None:
                problems.append(DamagedPart(manifest.id, digest, why))
    return problems


def one_line(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return getattr(exc, "strerror", None) or text.splitlines()[0]


def part_problem(history: History, digest: str) -> str | None:
    path = history.part_path(digest)
    try:
        decoded_part(read_bytes(path, max_snapshot_bytes()), digest, path)
    except FileNotFoundError:
        return "missing"
    except StoreError as exc:
        return "not a regular file" if "regular file" in str(exc) else \
            "not compressed data" if "not compressed" in str(exc) else \
            "its content does not match its name"
    except OSError as exc:
        return f"unreadable: {exc.strerror}"
    return None


# ---- gc -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Collected:
    """What gc deleted, or would delete (`dry_run`)."""

    dropped: tuple[Manifest, ...]   # records outside the rule
    kept: int                       # records left
    parts: tuple[str, ...]          # digests of the parts deleted
    bytes_freed: int
    dry_run: bool


def gc(history: History, rule: Retention = DEFAULT, *, dry_run: bool = False,
       now: float | None = None, grace_s: float = GRACE_S) -> Collected:
    started = file_system_now(history) if not dry_run else time.time()
    manifests = history.manifests()
    keep = kept(manifests, rule, time.time() if now is None else now)
    dropped = tuple(manifest for manifest in manifests if manifest.id not in keep)
    freed = 0
    if not dry_run:
        for manifest in dropped:
            path = history.manifest_path(manifest.id)
            freed += size_of(path)
            path.unlink(missing_ok=True)
    named = named_parts(history, leaving={manifest.id for manifest in dropped}
                        if dry_run else set())
    deleted = []
    for digest, path in stored_parts(history):
        if digest in named:
            continue
        size = size_of(path)
        if dry_run:
            if modified(path) < started - grace_s:
                deleted.append(digest)
                freed += size
        elif delete_unless_used(path, since=started - grace_s):
            deleted.append(digest)
            freed += size
    if not dry_run:
        remove_leftovers(history, before=started - grace_s)
    return Collected(dropped, len(manifests) - len(dropped), tuple(deleted), freed, dry_run)


def file_system_now(history: History) -> float:
    """The history folder's own clock (a shared folder's server may differ from this host):
    the time of a file made there now."""
    history.root.mkdir(parents=True, exist_ok=True)
    marker = history.root / f".gc-{os.getpid()}-{uuid.uuid4().hex}"
    try:
        create_entry(marker)
        return os.stat(marker).st_mtime
    except OSError as exc:
        raise StoreError(f"cannot write in {history.root}: {exc.strerror}") from None
    finally:
        marker.unlink(missing_ok=True)


def named_parts(history: History, leaving: set[str]) -> set[str]:
    """The digest of every part a manifest names, but those in `leaving`. A manifest that
    cannot be read protects nothing: what it named cannot be known nor loaded."""
    named: set[str] = set()
    for path in history.manifest_files():
        try:
            manifest = history.read_header(path)
            if manifest.id not in leaving:
                named.update(digest for _, digest in history.contents(manifest).parts)
        except (OSError, StoreError):
            continue
    return named


def stored_parts(history: History) -> Iterator[tuple[str, Path]]:
    top = history.root / PARTS
    for folder in sorted(top.iterdir()) if top.is_dir() else ():
        if folder.is_dir() and not folder.is_symlink():
            for path in sorted(folder.iterdir()):
                if DIGEST.match(path.name):
                    yield path.name, path


def size_of(path: Path) -> int:
    try:
        return os.lstat(path).st_size
    except OSError:
        return 0


def modified(path: Path) -> float:
    try:
        return os.lstat(path).st_mtime
    except OSError:
        return float("inf")


def delete_unless_used(path: Path, since: float) -> bool:
    """Delete a part unless a writer used it after `since`. Moved aside first, then judged
    by the time of what was moved, so a writer's use is never lost between a look and the
    delete; a part used meanwhile is put back (unless a writer wrote it again already)."""
    if modified(path) >= since:
        return False
    aside = path.with_name(f".{path.name}.gc-{os.getpid()}-{uuid.uuid4().hex}")
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return False
    if modified(aside) >= since:
        os.replace(aside, path)   # a writer that wrote it again meanwhile wrote these bytes
        return False
    aside.unlink()
    return True


def remove_leftovers(history: History, before: float) -> None:
    """Temporary files of writers that died before renaming them (older than `before`);
    what another gc has moved aside is its own to judge."""
    for top in (history.root / PARTS, history.root / MANIFESTS):
        for folder in top.iterdir() if top.is_dir() else ():
            if folder.is_dir() and not folder.is_symlink():
                for path in folder.glob(".*.tmp"):
                    if path.is_file() and modified(path) < before:
                        path.unlink(missing_ok=True)
