"""A snapshot cut into content-addressed parts, and put back together.

Each section of facts and volatile is a part, and so are meta, digests and bench. A section
whose collection grows with the host is cut finer, so one change stores one small part: a
repository, a process, a GPU each on its own; the package list apart from the rest of the
Python facts. A part is canonical JSON (sorted keys, ASCII, no whitespace), named by the
sha256 of those bytes: equal content is one part, whichever snapshot holds it.

What is left once the parts are cut (the schema number, the empty mappings they go into)
is `rest`; the document is `rest` with each part set at its place, in order (a section
before the entries cut out of it).
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from envsnap.shape import is_object

Place = tuple[str, ...]

# Top-level mappings cut one part per section.
SECTIONED = ("facts", "volatile")
# (top, section) -> (its collection, whether each entry is a part of its own or the whole
# collection one part): packages are many and tiny, a part each would cost more than it saves.
FINER: dict[Place, tuple[str, bool]] = {
    ("facts", "git"): ("repos", True),
    ("facts", "env"): ("processes", True),
    ("facts", "nvidia"): ("gpus", True),
    ("volatile", "nvidia"): ("gpus", True),
    ("facts", "python_env"): ("packages", False),
}


def canonical(value: object) -> bytes:
    """The bytes a part is named by and stored as. ASCII with escapes keeps every string
    exact, a lone surrogate too; a float is written as Python reads it back."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=True).encode("ascii")


def digest_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Part:
    at: Place     # where it stands in the document
    data: bytes   # canonical JSON

    @property
    def digest(self) -> str:
        return digest_of(self.data)


def split(document: Mapping[str, object]) -> tuple[dict[str, object], list[Part]]:
    """(rest, parts) of a document of plain data (provenance.check_plain first)."""
    rest: dict[str, object] = {}
    parts: list[Part] = []
    for key, value in document.items():
        if key in SECTIONED and is_object(value):
            rest[key] = {}
            for name, section in value.items():
                parts += cut((key, name), section)
        elif is_object(value) or isinstance(value, list):
            parts += cut((key,), value)
        else:
            rest[key] = value
    return rest, parts


def cut(at: Place, value: object) -> list[Part]:
    finer = FINER.get(at)
    entries = value.get(finer[0]) if finer is not None and is_object(value) else None
    if finer is None or not is_object(value) or not is_object(entries):
        return [Part(at, canonical(value))]
    collection, each = finer
    parts = [Part(at, canonical({**value, collection: {}}))]
    if each:
        return parts + [Part((*at, collection, name), canonical(entry))
                        for name, entry in entries.items()]
    return [*parts, Part((*at, collection), canonical(entries))]


def join(rest: Mapping[str, object],
         placed: Iterable[tuple[Place, object]]) -> dict[str, object]:
    """The document: `rest` with each value set at its place. ValueError where a place does
    not lead into a mapping (a manifest that is not what record wrote)."""
    document: dict[str, object] = json.loads(json.dumps(rest))   # a copy of its own
    for at, value in placed:
        if not at:
            raise ValueError("a part with no place")
        parent: object = document
        for key in at[:-1]:
            parent = parent.get(key) if is_object(parent) else None
        if not is_object(parent):
            raise ValueError(f"a part's place {'.'.join(at)} is in no mapping")
        parent[at[-1]] = value
    return document
