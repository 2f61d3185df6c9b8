"""A host's history: every snapshot recorded as a small manifest of content-addressed parts.

Layout, under the store's `history/` folder:

    parts/<first 2 hex>/<sha256>            one part (parts.py), zlib-compressed; immutable
    manifests/<host label>/<UTC time>.json   one record: a header line, then its parts

A part is written beside its name and renamed into place (entries.write_entry), so a reader
meets a whole part or none; two writers of one part write the same bytes. A manifest is
linked into place under a name no other has (store.write_new): two records of one second
get a numbered suffix each, never one over the other. So any number of processes, on any
number of hosts sharing the folder, may record at once.

A part already there is checked before it is used again (a damaged one is written anew)
and its time is set to now: `gc` never deletes a part used after it began (gc.py).
"""
from __future__ import annotations

import bisect
import json
import os
import re
import stat
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from envsnap.errors import DamagedHistoryError, StoreError
from envsnap.history.parts import Part, Place, canonical, digest_of, join, split
from envsnap.shape import is_object
from envsnap.snapshot import provenance
from envsnap.snapshot.document import captured_at, host, set_signature, validate
from envsnap.snapshot.entries import write_entry
from envsnap.snapshot.store import (
    LABEL_PART,
    Store,
    label_from_name,
    max_snapshot_bytes,
    write_new,
)
from envsnap.text import did_you_mean

if TYPE_CHECKING:
    from envsnap.snapshot.records import Snapshot

FOLDER = "history"
PARTS = "parts"
MANIFESTS = "manifests"
FORMAT = 1
TIME_FORMAT = "%Y%m%dT%H%M%S.%fZ"
TIME_NAME = re.compile(r"^\d{8}T\d{6}\.\d{6}Z(-[1-9]\d{0,5})?$")
DIGEST = re.compile(r"^[0-9a-f]{64}$")
HEADER_LIMIT = 64 << 10   # a header line is a few hundred bytes


@dataclass(frozen=True)
class Manifest:
    id: str             # "<host label part>/<UTC %Y%m%dT%H%M%S.%fZ>", unique, sorts by time
    host: str           # snapshot.document.host(document)
    captured_at: float  # epoch seconds of the capture (the document's meta.captured_at)
    reason: str         # why it was recorded: "every 10m", "process 1917 started", "migrated"


@dataclass(frozen=True)
class Recorded:
    manifest: Manifest
    bytes_added: int    # what this record added to the disk (new parts + the manifest)


@dataclass(frozen=True)
class Span:
    """The records of one host a window of time reads: those inside it, the last one before
    it (what held when it began) and the first one after it."""

    before: Manifest | None
    inside: list[Manifest]
    after: Manifest | None


@dataclass(frozen=True)
class Contents:
    """A manifest's body: what is left of the document, and each part at its place."""

    rest: dict[str, object]
    parts: tuple[tuple[Place, str], ...]   # (place, digest), in the order they are set


def epoch_of(document: Snapshot) -> float:
    """The capture's time as epoch seconds; a document that records none (or none that
    reads as a time) is taken as captured now, when it is recorded."""
    recorded = captured_at(document)
    try:
        when = datetime.fromisoformat(recorded) if recorded else None
    except ValueError:
        when = None
    if when is None:
        return datetime.now(timezone.utc).timestamp()
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.timestamp()


def time_name(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).strftime(TIME_FORMAT)


def check_id(manifest_id: str) -> tuple[str, str]:
    """(host folder, time name) of a well-formed id; StoreError for any other (an id names a
    file: nothing may climb out of the history)."""
    folder, _, name = manifest_id.partition("/")
    if not LABEL_PART.match(folder) or ".." in folder or not TIME_NAME.match(name):
        raise StoreError(f"no history record {manifest_id!r}: an id is HOST/TIME, as "
                         "`envsnap history list` prints it")
    return folder, name


def header_text(manifest: Manifest) -> str:
    return json.dumps({"format": FORMAT, "id": manifest.id, "host": manifest.host,
                       "captured_at": manifest.captured_at, "reason": manifest.reason},
                      sort_keys=True, ensure_ascii=True)


def body_text(rest: dict[str, object], parts: list[Part]) -> str:
    return canonical({"rest": rest, "parts": [[list(part.at), part.digest] for part in parts]}
                     ).decode("ascii")


def manifest_of_header(line: str, source: str) -> Manifest:
    try:
        header = json.loads(line)
    except ValueError:
        header = None
    fields = header if is_object(header) else {}
    found = fields.get("id"), fields.get("host"), fields.get("captured_at"), \
        fields.get("reason")
    manifest_id, host_name, when, reason = found
    if fields.get("format") != FORMAT or not isinstance(manifest_id, str) or \
            not isinstance(host_name, str) or not isinstance(when, (int, float)) or \
            isinstance(when, bool) or not isinstance(reason, str):
        raise StoreError(f"{source}: not a history manifest envsnap wrote (its first line "
                         "is no header of format 1)")
    return Manifest(manifest_id, host_name, float(when), reason)


def contents_of_body(line: str, source: str) -> Contents:
    bad = DamagedHistoryError(f"{source}: a damaged history manifest (its parts cannot be "
                              "read)")
    try:
        body = json.loads(line)
    except ValueError:
        raise bad from None
    rest = body.get("rest") if is_object(body) else None
    listed = body.get("parts") if is_object(body) else None
    if not is_object(rest) or not isinstance(listed, list):
        raise bad
    placed = []
    for entry in listed:
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], list)
                and all(isinstance(key, str) for key in entry[0])
                and isinstance(entry[1], str) and DIGEST.match(entry[1])):
            raise bad
        placed.append((tuple(entry[0]), entry[1]))
    return Contents(rest, tuple(placed))


def read_bytes(path: Path, limit: int) -> bytes:
    """A regular file's bytes (never through a link, never a FIFO), at most `limit`."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc.strerror}") from None
    with os.fdopen(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise StoreError(f"{path}: not a regular file, refused")
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise StoreError(f"{path}: larger than {limit / (1 << 20):g} MiB, refused unread")
    return data


def decoded_part(data: bytes, digest: str, path: Path) -> bytes:
    """The canonical bytes of a stored part; StoreError when they are not those its name
    promises (damaged on disk, or replaced)."""
    try:
        plain = zlib.decompress(data)
    except zlib.error:
        raise DamagedHistoryError(f"history part {path} is damaged (not compressed data): "
                                  "envsnap history verify lists every damaged record") \
            from None
    if digest_of(plain) != digest:
        raise DamagedHistoryError(f"history part {path} is damaged (its content does not "
                                  "match its name): envsnap history verify lists every "
                                  "damaged record")
    return plain


class History:
    """The history folder of a store (`History.of_store`), or any folder."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    @classmethod
    def of_store(cls, store: Store) -> History:
        return cls(store.root / FOLDER)

    # ---- where things are -------------------------------------------------------------

    def part_path(self, digest: str) -> Path:
        return self.root / PARTS / digest[:2] / digest

    def manifest_path(self, manifest_id: str) -> Path:
        folder, name = check_id(manifest_id)
        return self.root / MANIFESTS / folder / f"{name}.json"

    # ---- recording ----------------------------------------------------------------------

    def record(self, document: Snapshot, *, reason: str, sign: bool = True) -> Recorded:
        """Keep `document` as a manifest of parts. An unsigned document is signed first, as
        Store.save signs (stamped on `document` too, so a load gives back what it holds);
        a signed one is kept as it is. `sign` False keeps an unsigned one unsigned (a
        migrated snapshot that was foreign stays so)."""
        validate(document, "snapshot (not recorded)")
        if sign and not is_object(provenance.recorded_signature(document)):
            set_signature(document, **provenance.signature(document, provenance.user_key()))
        try:
            provenance.check_plain(document)
        except provenance.NotPlainData as exc:
            raise StoreError(f"cannot record this snapshot: {exc}") from None
        rest, parts = split(document)
        added = 0
        written: set[str] = set()
        for part in parts:
            if part.digest not in written:
                written.add(part.digest)
                added += self.put_part(part)
        epoch = epoch_of(document)
        host_name = host(document)
        body = body_text(rest, parts)
        manifest, size = self.claim(Manifest("", host_name, epoch, reason), body)
        return Recorded(manifest, added + size)

    def put_part(self, part: Part) -> int:
        """Store one part unless a sound copy is there already; the bytes it added."""
        path = self.part_path(part.digest)
        try:
            if stat.S_ISREG(os.lstat(path).st_mode):
                decoded_part(read_bytes(path, max_snapshot_bytes()), part.digest, path)
                os.utime(path)   # used now: a gc running meanwhile keeps it
                return 0
        except FileNotFoundError:
            pass
        except StoreError:
            pass   # damaged or no file: written anew below
        data = zlib.compress(part.data, 9)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_entry(path, data)
        except OSError as exc:
            raise StoreError(f"cannot write {path}: {exc.strerror}") from None
        return len(data)

    def claim(self, draft: Manifest, body: str) -> tuple[Manifest, int]:
        """Link the manifest into place under the first free name of its second; (the
        manifest, its size)."""
        folder = label_from_name(draft.host)
        base = time_name(draft.captured_at)
        where = self.root / MANIFESTS / folder
        try:
            where.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot write {where}: {exc.strerror}") from None
        for number in range(1, 100_000):
            name = base if number == 1 else f"{base}-{number}"
            manifest = Manifest(f"{folder}/{name}", draft.host, draft.captured_at, draft.reason)
            text = f"{header_text(manifest)}\n{body}\n"
            try:
                if write_new(where / f"{name}.json", text):
                    return manifest, len(text.encode("ascii"))
            except OSError as exc:
                raise StoreError(f"cannot write {where / name}.json: {exc.strerror}") from None
        raise StoreError(f"{where}: no free name left for a record of {base}")

    # ---- reading ------------------------------------------------------------------------

    def manifest_files(self, host_name: str | None = None) -> Iterator[Path]:
        top = self.root / MANIFESTS
        folders = [top / label_from_name(host_name)] if host_name is not None else \
            sorted(top.iterdir()) if top.is_dir() else []
        for folder in folders:
            if folder.is_dir() and not folder.is_symlink():
                yield from sorted(path for path in folder.glob("*.json")
                                  if TIME_NAME.match(path.stem))

    def manifests(self, host: str | None = None) -> list[Manifest]:
        """Every record (of `host` alone, as the documents name it), oldest first. Only
        each manifest's first line is read; one that cannot be read is left out here
        (`verify` names it)."""
        found = []
        for path in self.manifest_files(host):
            try:
                manifest = self.read_header(path)
            except (OSError, StoreError):
                continue
            if host is None or manifest.host == host:
                found.append(manifest)
        return sorted(found, key=lambda manifest: (manifest.captured_at, manifest.id))

    def span(self, host: str, since: float, until: float) -> Span:
        """`host`'s records of the window from `since` to `until`. A manifest's name is its
        capture time, so only the window's own headers are read, and as many next to it as it
        takes to find the one before and the one after: a timeline over a month of records
        reads a day's."""
        paths = list(self.manifest_files(host))
        names = [path.stem for path in paths]
        first = bisect.bisect_left(names, time_name(since))
        end = bisect.bisect_left(names, time_name(until) + "~")   # "~" sorts after "-N"

        def readable(chosen: Iterable[Path]) -> Iterator[Manifest]:
            for path in chosen:
                try:
                    manifest = self.read_header(path)
                except (OSError, StoreError):
                    continue
                if manifest.host == host:
                    yield manifest

        inside = sorted((manifest for manifest in readable(paths[first:end])
                         if since <= manifest.captured_at <= until),
                        key=lambda manifest: (manifest.captured_at, manifest.id))
        return Span(next(readable(reversed(paths[:first])), None), inside,
                    next(readable(paths[end:]), None))

    def read_header(self, path: Path) -> Manifest:
        data = read_bytes(path, HEADER_LIMIT + max_snapshot_bytes())
        line = data.split(b"\n", 1)[0].decode("ascii", "replace")
        manifest = manifest_of_header(line, str(path))
        if self.manifest_path(manifest.id) != path:
            raise StoreError(f"{path}: its header names another record ({manifest.id})")
        return manifest

    def find(self, manifest_id: str) -> Manifest:
        """The record of an id, as `history list` prints it."""
        path = self.manifest_path(manifest_id)
        try:
            return self.read_header(path)
        except FileNotFoundError:
            known = [manifest.id for manifest in self.manifests()]
            raise StoreError(f"no history record {manifest_id!r} in {self.root}"
                             f"{did_you_mean(manifest_id, known)}; envsnap history list "
                             "shows what there is") from None

    def contents(self, manifest: Manifest) -> Contents:
        path = self.manifest_path(manifest.id)
        try:
            data = read_bytes(path, HEADER_LIMIT + max_snapshot_bytes())
        except FileNotFoundError:
            raise StoreError(f"no history record {manifest.id!r} in {self.root} (envsnap "
                             "history list shows what there is)") from None
        lines = data.decode("ascii", "replace").split("\n")
        if len(lines) < 2:
            raise DamagedHistoryError(f"{path}: a damaged history manifest (it ends early)")
        return contents_of_body(lines[1], str(path))

    def read_part(self, digest: str) -> object:
        path = self.part_path(digest)
        try:
            data = read_bytes(path, max_snapshot_bytes())
        except FileNotFoundError:
            raise DamagedHistoryError(f"history part {path} is missing: envsnap history verify "
                                      "lists every damaged record") from None
        return json.loads(decoded_part(data, digest, path))

    def load(self, manifest: Manifest) -> Snapshot:
        """The document as recorded, checked as any snapshot is (document.validate)."""
        contents = self.contents(manifest)
        cache: dict[str, object] = {}
        placed = []
        for at, digest in contents.parts:
            if digest in cache:   # one part at two places: each gets its own copy
                placed.append((at, json.loads(json.dumps(cache[digest]))))
            else:
                cache[digest] = self.read_part(digest)
                placed.append((at, cache[digest]))
        try:
            document = join(contents.rest, placed)
        except ValueError as exc:
            raise DamagedHistoryError(f"history record {manifest.id}: a damaged manifest "
                                      f"({exc})") from None
        return validate(document, f"history record {manifest.id}")
