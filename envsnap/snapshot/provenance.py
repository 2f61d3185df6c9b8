"""Whose snapshot is this: signed by this user's envsnap, or foreign.

A snapshot envsnap captured for this user (capture, bench, a restore's rollback point, a
playbook's capture) carries `meta.signature`: an HMAC-SHA256, under a key only this user can
read, of the document's canonical bytes (JSON, sorted keys, no whitespace, ASCII, every field
but the signature itself). Anything else is *foreign*: unsigned (a hand-made file, a bug
report's bundle, an older envsnap), signed with another key (a colleague's), or changed since
it was signed (edited by hand). Foreign snapshots are data to read, never a plan to run
unseen: restore shows them whole and asks first (restore/run.py).

The key is 32 random bytes, hex, in $XDG_CONFIG_HOME/envsnap/key (default
~/.config/envsnap/key), made on first signing: folder 0700, file 0600, created with a link
so two envsnaps starting at once agree on one key. A key others can read signs nothing. The
run that makes it records so (made_keys), and the CLI says where it is and why to keep it.
"""
from __future__ import annotations

import hmac
import json
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, NamedTuple

from envsnap.errors import SnapshotError, UsageError
from envsnap.snapshot.spec import is_object

if TYPE_CHECKING:
    from envsnap.snapshot.records import Signature

ALGORITHM = "hmac-sha256"
SIGNATURE_FIELD = "signature"   # in meta
KEY_FILE = "key"
KEY_BYTES = 32

ForeignReason = Literal["unsigned", "signed by another key", "content changed",
                        "imported from pasted outputs"]


@dataclass(frozen=True)
class Provenance:
    """mine (foreign is None), or foreign and why."""

    foreign: ForeignReason | None = None

    @property
    def mine(self) -> bool:
        return self.foreign is None

    def describe(self) -> str:
        return "mine (signed with your key)" if self.mine else f"foreign ({self.foreign})"


MINE = Provenance()


# ---- the key --------------------------------------------------------------------------------

def config_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME") or os.path.join(env.get("HOME") or "~", ".config")
    return Path(os.path.expanduser(base)) / "envsnap"


def key_path(env: Mapping[str, str] | None = None) -> Path:
    return config_dir(env) / KEY_FILE


def read_key(env: Mapping[str, str] | None = None) -> bytes | None:
    """The user's key, or None when none was made yet (then nothing is theirs)."""
    path = key_path(env)
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UsageError(f"cannot read the signing key {path}: {exc.strerror}") from None
    with os.fdopen(handle, "rb") as key_file:
        info = os.fstat(key_file.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise UsageError(f"signing key {path} is not a regular file")
        if info.st_mode & 0o077 or info.st_uid != os.getuid():
            # Whoever can read it can make snapshots that restore takes for the user's own.
            raise UsageError(f"signing key {path} is open to others (mode "
                             f"{stat.S_IMODE(info.st_mode):04o}): chmod 600 {path}")
        text = key_file.read(4 * KEY_BYTES).decode("ascii", "replace").strip()
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) != KEY_BYTES:
        raise UsageError(f"signing key {path} is damaged (expected {2 * KEY_BYTES} hex "
                         f"digits): remove it to make a new one")
    return key


class KeyMade(NamedTuple):
    """A signing key this process made: the first run that signed something."""

    path: Path


# The keys made by this process (make_key), until the CLI takes them (taken_keys) to tell the
# person once where theirs is. Signing runs deep inside capture, bench, restore and import,
# whose results say nothing of keys, so the fact is kept here rather than threaded up.
made_keys: list[KeyMade] = []


def taken_keys() -> list[KeyMade]:
    """The keys made since last asked; each is told once."""
    taken = list(made_keys)
    made_keys.clear()
    return taken


def user_key(env: Mapping[str, str] | None = None) -> bytes:
    """The user's key, made on first use."""
    key = read_key(env)
    return key if key is not None else make_key(env)


def make_key(env: Mapping[str, str] | None = None) -> bytes:
    import tempfile

    folder = config_dir(env)
    path = folder / KEY_FILE
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        try:
            folder.mkdir(mode=0o700)
            os.chmod(folder, 0o700)   # mkdir's mode passes through the umask
        except FileExistsError:
            pass
        handle, temporary = tempfile.mkstemp(dir=folder, prefix=".key.")   # 0600
        try:
            with os.fdopen(handle, "w", encoding="ascii") as out:
                out.write(os.urandom(KEY_BYTES).hex() + "\n")
                out.flush()
                os.fsync(out.fileno())
            try:   # a link never replaces: a key another envsnap made meanwhile wins
                os.link(temporary, path)
                made_keys.append(KeyMade(path))
            except FileExistsError:
                pass
        finally:
            os.unlink(temporary)
    except OSError as exc:
        raise UsageError(f"cannot make the signing key {path}: {exc.strerror}") from None
    key = read_key(env)
    assert key is not None, "the key was just linked into place"
    return key


def key_id(key: bytes) -> str:
    import hashlib

    return hashlib.sha256(b"envsnap key id\0" + key).hexdigest()[:16]


# ---- signing and checking -------------------------------------------------------------------

class NotPlainData(SnapshotError):
    """The document holds something JSON cannot say exactly (a non-string key, a date):
    envsnap never writes such a document, so it cannot be one envsnap signed."""


def meta_of(document: Mapping[str, object]) -> Mapping[str, object]:
    """The document's meta, {} where it has none: what signing and checking read of a
    document, which may be a hand-made file or a timeline as well as a checked snapshot."""
    meta = document.get("meta")
    return meta if is_object(meta) else {}


def unsigned(document: Mapping[str, object]) -> dict[str, object]:
    """The document without its signature (a copy; the original is left alone)."""
    copy = dict(document)
    meta = meta_of(copy)
    if SIGNATURE_FIELD in meta:
        copy["meta"] = {name: value for name, value in meta.items() if name != SIGNATURE_FIELD}
    return copy


def canonical_bytes(document: Mapping[str, object]) -> bytes:
    """What the signature covers: every field but meta.signature, as canonical JSON."""
    check_plain(document)
    try:
        text = json.dumps(unsigned(document), sort_keys=True, separators=(",", ":"),
                          ensure_ascii=True, allow_nan=True)
    except (TypeError, ValueError, RecursionError) as exc:
        raise NotPlainData(f"cannot sign this snapshot: {exc}") from None
    return text.encode("ascii")


def check_plain(value: object) -> None:
    """Mappings with string keys, lists, strings, numbers, booleans and null only: anything
    else would reach the JSON text as something it is not (a key 1 as "1")."""
    stack = [value]
    while stack:
        item = stack.pop()
        if is_object(item):
            if not all(isinstance(key, str) for key in item):
                raise NotPlainData("cannot sign a snapshot with a mapping key that is not a "
                                   "string")
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif item is not None and not isinstance(item, (str, int, float)):
            raise NotPlainData(f"cannot sign a snapshot holding a {type(item).__name__} "
                               "value")


def signature(document: Mapping[str, object], key: bytes) -> Signature:
    import hashlib

    digest = hmac.new(key, canonical_bytes(document), hashlib.sha256).hexdigest()
    made: Signature = {"algorithm": ALGORITHM, "key": key_id(key), "digest": digest}
    return made


def signed(document: Mapping[str, object], key: bytes) -> dict[str, object]:
    """A copy of the document carrying its signature under `key` in meta.signature."""
    copy = unsigned(document)
    copy["meta"] = {**meta_of(copy), SIGNATURE_FIELD: dict(signature(copy, key))}
    return copy


def recorded_signature(document: Mapping[str, object]) -> object:
    return meta_of(document).get(SIGNATURE_FIELD)


def verify(document: Mapping[str, object], key: bytes | None) -> Provenance:
    """Mine when signed with `key` and unchanged since; otherwise foreign, and why. An
    imported snapshot (`envsnap import`) is signed when stored, yet its text is whoever
    pasted it: it stays foreign, so every gate shows what would come of it."""
    if meta_of(document).get("imported"):
        return Provenance("imported from pasted outputs")
    recorded = recorded_signature(document)
    if not is_object(recorded) or not recorded.get("digest"):
        return Provenance("unsigned")
    if key is None or recorded.get("key") != key_id(key) or recorded.get("algorithm") != ALGORITHM:
        return Provenance("signed by another key")
    try:
        expected = signature(document, key)["digest"]
    except NotPlainData:
        return Provenance("content changed")
    if not hmac.compare_digest(str(recorded.get("digest")), expected):
        return Provenance("content changed")
    return MINE


def verify_as_user(document: Mapping[str, object],
                   env: Mapping[str, str] | None = None) -> Provenance:
    """verify() with the user's key (read, never made: reading a snapshot writes nothing)."""
    return verify(document, read_key(env))
