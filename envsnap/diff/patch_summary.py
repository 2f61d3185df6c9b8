"""Patches and other recorded blobs, as a reader should see them.

A blob in a snapshot is {bytes, sha256, truncated, text | base64} (snapshot.records.Blob;
`base64` and `redacted` are fields the schema keeps as a record's rest, read here by name).
A 1 MB patch in a diff report buries everything else, so by default it is summarised (size,
hash, files); binary content (base64 blobs, `GIT binary patch` hunks) is never shown raw,
even in full output.
"""
from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from envsnap.snapshot.spec import is_object

if TYPE_CHECKING:
    from typing import TypeGuard

    from envsnap.snapshot.records import Blob, PatchFile

HEADER = "diff --git "
DIFF_HEADER = re.compile(r"^diff --git a/(.*?) b/(.*)$")
# From the marker to the next file's header: both the forward and the reverse hunk.
BINARY_HUNK = re.compile(r"^GIT binary patch\n.*?(?=^diff --git |\Z)", re.MULTILINE | re.DOTALL)
BINARY_MARKERS = ("GIT binary patch", "\nBinary files ")


def is_blob(value: object) -> TypeGuard[Blob]:
    """A recorded blob, wherever it sits in a tree of facts (a walk meets every kind)."""
    return is_object(value) and "sha256" in value and ("text" in value or "base64" in value)


def rest_field(blob: Blob, name: str) -> Any:
    """A field the schema keeps as the record's rest (`base64`, `redacted`)."""
    fields: Mapping[str, Any] = blob
    return fields.get(name)


def patch_files(text: str) -> list[str]:
    """The files a patch touches, in its order (`--no-renames`: a/ and b/ name one file).

    str.find hops from header to header at C speed; a multiline regex over a 1 MB patch
    costs ten times more and this runs once per patch shown.
    """
    files = []
    start = 0 if text.startswith(HEADER) else next_header(text, 0)
    while start >= 0:
        end = text.find("\n", start)
        match = DIFF_HEADER.match(text[start:end if end >= 0 else len(text)])
        if match:
            files.append(match.group(2))
        start = next_header(text, end) if end >= 0 else -1
    return files


def next_header(text: str, after: int) -> int:
    found = text.find("\n" + HEADER, after)
    return found + 1 if found >= 0 else -1


def file_sections(text: str) -> dict[str, str]:
    """{file: its part of the patch}, split at each header at C speed."""
    parts = ("\n" + text).split("\n" + HEADER)[1:]
    found = {}
    for part in parts:
        match = DIFF_HEADER.match(HEADER + part.split("\n", 1)[0])
        found[match.group(2) if match else part[:80]] = part
    return found


def measured_files(blob: Blob) -> dict[str, PatchFile] | None:
    """{file: {bytes, sha256}} measured at capture over the whole patch, or None: a snapshot
    older than that, where only the kept text can tell."""
    return blob.get("files")


def file_changes(before: Blob, after: Blob) -> dict[str, list[str]]:
    """Which files' hunks differ between two patches: what a reader wants from a 1 MB change.

    By the per-file hashes the agent took over the whole patch; when a side has none, by the
    text kept, where a file cut off by the cap is unknown, never "no longer changed"."""
    measured = measured_files(before), measured_files(after)
    if measured[0] is not None and measured[1] is not None:
        old_hash = {f: str(v.get("sha256")) for f, v in measured[0].items()}
        new_hash = {f: str(v.get("sha256")) for f, v in measured[1].items()}
        return {"changed": [f for f in new_hash if f in old_hash and old_hash[f] != new_hash[f]],
                "added": [f for f in new_hash if f not in old_hash],
                "removed": [f for f in old_hash if f not in new_hash]}
    old, new = file_sections(readable(before)), file_sections(readable(after))
    if before.get("truncated") or after.get("truncated"):
        return {"changed": [f for f in new if f in old and old[f] != new[f]],
                "added": [f for f in new if f not in old and not before.get("truncated")],
                "removed": [f for f in old if f not in new and not after.get("truncated")]}
    return {"changed": [f for f in new if f in old and old[f] != new[f]],
            "added": [f for f in new if f not in old],
            "removed": [f for f in old if f not in new]}


def count_files(text: str) -> int:
    return text.count("\n" + HEADER) + text.startswith(HEADER)


def files_in(blob: Blob) -> int:
    """How many files a patch touches: measured over the whole patch, else in the text kept."""
    total = blob.get("files_total")
    return total if total is not None else count_files(readable(blob))


def is_binary(blob: Blob) -> bool:
    text = blob.get("text")
    return "base64" in blob or (text is not None and any(m in text for m in BINARY_MARKERS))


def readable(blob: Blob) -> str:
    """The blob's text; a base64 one (not UTF-8) decoded with replacement characters, which
    keeps its ASCII diff headers readable."""
    if "base64" in blob:
        try:
            return base64.b64decode(str(rest_field(blob, "base64"))).decode("utf-8", "replace")
        except (ValueError, TypeError):
            return ""
    return blob.get("text") or ""


def summary(blob: Any) -> Any:
    """A blob as size, hash, files and flags; anything that is not a blob is kept as is."""
    if not is_blob(blob):
        return blob
    text = readable(blob)
    measured = measured_files(blob)
    files = list(measured) if measured is not None else patch_files(text)
    out = {"bytes": blob.get("bytes"), "sha256": blob.get("sha256"), "files": files,
           "binary": is_binary(blob)}
    total = blob.get("files_total")
    if total is not None and total > len(files):
        out["files_total"] = total
    if blob.get("truncated"):
        out["truncated"] = True
    if rest_field(blob, "redacted"):
        out["redacted"] = True
    return out


def shown_text(blob: Blob) -> str:
    """The text of a blob fit to print: each binary hunk replaced by a one-line note."""
    note = "[not UTF-8: shown with replacement characters]\n" if "base64" in blob else ""
    return note + BINARY_HUNK.sub(elided, readable(blob))


def elided(match: re.Match[str]) -> str:
    return f"[GIT binary patch: {len(match.group(0))} bytes not shown]\n"


def summarise_tree(value: Any) -> Any:
    """Every blob inside a value replaced by its summary (for --json without --all)."""
    if is_blob(value):
        return summary(value)
    if is_object(value):
        return {key: summarise_tree(item) for key, item in value.items()}
    if isinstance(value, list):
        return [summarise_tree(item) for item in value]
    return value


def safe_tree(value: Any) -> Any:
    """Every blob inside a value with binary parts elided (for --json --all)."""
    if is_blob(value):
        shown = {k: v for k, v in value.items() if k not in ("text", "base64")}
        shown["text"] = shown_text(value)
        return shown
    if is_object(value):
        return {key: safe_tree(item) for key, item in value.items()}
    if isinstance(value, list):
        return [safe_tree(item) for item in value]
    return value


def blobs_in(value: Any, prefix: str = "") -> list[tuple[str, Blob]]:
    """(where, blob) for each blob inside a value: the long parts a renderer may fold."""
    if is_blob(value):
        return [(prefix or "patch", value)]
    found: list[tuple[str, Blob]] = []
    if is_object(value):
        for key, item in value.items():
            found += blobs_in(item, f"{prefix}.{key}" if prefix else str(key))
    return found
