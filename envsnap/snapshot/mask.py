"""Masking for what leaves the machine in a report or a bundle.

Secrets were redacted on the host at capture (agent/redact.py). A report is meant to be
pasted into a public issue, so it goes further: identifiers of this particular hardware and
this particular user are masked too, by default.

- GPU and MIG UUIDs: `GPU-d3208dcb-53e8-...` -> `GPU-<masked>`; any value under a key named
  `uuid` or with `serial` as a word of it (board, chassis, module serials) -> `<masked>`;
  package names are names (`pyserial`, even `uuid`), never ids.
- MAC-like ids (six or more `aa:bb:...` octets: NIC MACs, InfiniBand GUIDs).
- Home paths: `/home/alice/x`, `/Users/alice/x`, `/root/x` -> `~/x`.
- Secrets again, always (even with --no-mask, which never shows a secret): the agent's own
  detector runs once more (a snapshot of an older envsnap), so both passes agree on what a
  secret is. Markers the agent made (`<secret:4f2a09c1>`) stay as they are: their short hash,
  keyed by `masking_key()`, lets a diff say "HF_TOKEN changed" without showing it.

Masking a string never changes a key's meaning for the reader: `/root/sglang` becomes
`~/sglang` as a key and as a value alike, so a masked snapshot still diffs.
"""
from __future__ import annotations

import dataclasses
import hashlib
import hmac
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from envsnap.agent.redact import MARKER, REDACTED, is_marker, is_secret_name, redact_patch
from envsnap.agent.vendors import is_placeholder
from envsnap.snapshot.spec import is_object

if TYPE_CHECKING:
    from envsnap.snapshot.records import Snapshot

MASKED = "<masked>"
GPU_UUID = re.compile(r"\b(GPU|MIG)-[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}\b")
# Six or more two-digit hex octets, ':'-separated (a MAC; 8 or 20 octets: GUIDs, IPoIB),
# or a MAC written with '-'. Bus ids (0000:19:00.0) and times (12:00:00) have fewer.
MAC_LIKE = re.compile(r"(?<![0-9A-Fa-f:-])(?:(?:[0-9A-Fa-f]{2}:){5,}[0-9A-Fa-f]{2}"
                      r"|(?:[0-9A-Fa-f]{2}-){5}[0-9A-Fa-f]{2})(?![0-9A-Fa-f:-])")
# A home folder at the start of a path: not inside a longer name (/srv/home/x stays).
HOME_PATH = re.compile(r"(?<![\w.~-])(?:/home/[^/\s:'\"]+|/Users/[^/\s:'\"]+|/root)"
                       r"(?=/|\s|$|[:'\",;)\]}])")
# A key that names a hardware id: `uuid`, or `serial` as a word of it (nvidia-smi's `serial`,
# `board_serial`, `chassis_serial_number`, `SerialNumber`), never inside another word: the
# package `pyserial` or `ast-serialize` is a name, not an id.
ID_KEY = re.compile(r"^uuid$|(?:^|[_.\s])serial(?:_?number)?(?=$|[_.\s])", re.IGNORECASE)
ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")


@dataclasses.dataclass(frozen=True)
class Masker:
    """mask=False keeps hardware ids and home paths; secrets are always redacted."""

    mask: bool = True

    def text(self, value: str) -> str:
        value = redact_patch(value)
        if not self.mask:
            return value
        value = GPU_UUID.sub(lambda m: f"{m.group(1)}-{MASKED}", value)
        value = MAC_LIKE.sub(MASKED, value)
        return HOME_PATH.sub("~", value)

    def value_of(self, key: str, value: Any) -> Any:
        """A value seen under its key: ids and secrets by name, the rest by content."""
        if isinstance(value, str) and ENV_NAME.match(key) and is_secret_name(key) \
                and not is_marker(value) and value != "" and not is_placeholder(value):
            return REDACTED
        if key == "packages" and is_object(value):
            # name -> version: PyPI has packages called `uuid` and `serial`
            return {self.text(k) if isinstance(k, str) else k: self.tree(v)
                    for k, v in value.items()}
        if self.mask and ID_KEY.search(key) and isinstance(value, (str, int)) and value != "":
            masked = GPU_UUID.sub(lambda m: f"{m.group(1)}-{MASKED}", str(value))
            return masked if masked != str(value) else MASKED
        return self.tree(value)

    def tree(self, value: Any) -> Any:
        """Every string inside a value (mapping keys too) masked; dataclasses and NamedTuples
        rebuilt as themselves."""
        if isinstance(value, str):
            return self.text(value)
        if is_object(value):
            return {self.text(k) if isinstance(k, str) else k: self.value_of(str(k), v)
                    for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            items = [self.tree(item) for item in value]
            if isinstance(value, list):
                return items
            # a NamedTuple (a record: findings, store entries) is rebuilt as its own type
            return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            changes = {f.name: self.tree(getattr(value, f.name))
                       for f in dataclasses.fields(value)}
            return dataclasses.replace(value, **changes)
        return value


def masked_document(document: Snapshot, masker: Masker) -> Snapshot:
    """A snapshot fit for a bundle: masked, with its digests recomputed so that a diff of
    two masked snapshots stays right (the diff trusts recorded digests). Masking rewrites
    strings only, so the copy keeps the document's shape."""
    from envsnap.snapshot.document import section_digest

    shown: Snapshot = masker.tree(document)
    if "digests" in shown:
        sections: Mapping[str, object] = shown["facts"]
        shown["digests"] = {name: section_digest(section) for name, section in sections.items()}
    return shown


MASKING_KEY_PURPOSE = b"envsnap masking key v1"


def masking_key(env: Mapping[str, str] | None = None) -> bytes:
    """The key of the short hashes in secret markers: derived from the user's own key
    (snapshot/provenance.py, $XDG_CONFIG_HOME/envsnap/key), never that key itself, so a
    marker tells nothing about a signature. It stays on this machine: the agent sends
    digests, and hosts/capture.py rekeys them under this key before anything is written."""
    from envsnap.snapshot import provenance

    return hmac.new(provenance.user_key(env), MASKING_KEY_PURPOSE, hashlib.sha256).digest()




def escape_markers(markdown: str) -> str:
    """`<masked>` outside code as `\\<masked\\>`, so GitHub shows it instead of eating it
    (an unknown tag is dropped; `<secret:4f2a09c1>` would be taken for a link).

    Code (fences, indented blocks, `spans`) shows text as it is, so it is left alone."""
    out, fence = [], 0
    for line in markdown.split("\n"):
        stripped = line.strip()
        ticks = len(stripped) - len(stripped.lstrip("`"))
        if fence:  # only a bare run of at least as many backticks closes a fence
            fence = 0 if ticks >= fence and stripped == "`" * ticks else fence
            out.append(line)
        elif ticks >= 3:
            fence = ticks
            out.append(line)
        else:
            out.append(line if line.startswith("    ") else escape_outside_spans(line))
    return "\n".join(out)


def escape_outside_spans(line: str) -> str:
    parts = line.split("`")
    for index in range(0, len(parts), 2):  # even parts lie outside `code spans`
        parts[index] = parts[index].replace(MASKED, "\\" + MASKED[:-1] + "\\>")
        parts[index] = MARKER.sub(lambda m: "\\" + m.group(0)[:-1] + "\\>", parts[index])
    return "`".join(parts)
