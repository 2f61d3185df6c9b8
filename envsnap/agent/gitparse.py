"""Pure parsers for the git collector: git's bytes in, snapshot data out.

Nothing here runs git or touches the disk, so every function is tested on literal bytes.
Outputs are NUL-separated (-z, %x00) because file names may hold any byte but NUL; names
are decoded with util.decode_path so undecodable bytes stay visible and reversible.
"""
from __future__ import annotations

import base64
import hashlib
from typing import Any, Dict, List, Optional, Tuple

from . import redact
from .util import decode_path

# Starts each commit of the history log; a file name would have to begin with these exact
# bytes to be mistaken for a commit, so the NUL-split stream parses without ambiguity.
COMMIT_MARK = b"\x01envsnap-commit\x01"
HISTORY_FORMAT = "%x01envsnap-commit%x01%H%x00%P%x00%at%x00%an%x00%s"
STASH_FORMAT = "%H%x00%P%x00%ct%x00%gs"
STASH_FIELDS = 4


def text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def split_nul(data: bytes) -> List[bytes]:
    """NUL-terminated (or -separated) records; the empty tail after the last NUL is dropped."""
    tokens = data.split(b"\0")
    if tokens and tokens[-1] == b"":
        tokens.pop()
    return tokens


# ---- git status --porcelain=v2 --branch -z -uall --------------------------------------------

def parse_status(data: bytes) -> Dict[str, Any]:
    """Branch, upstream, ahead/behind, changed tracked paths and untracked paths (raw bytes)."""
    state: Dict[str, Any] = {"head": None, "branch": None, "upstream": None, "ahead": None,
                             "behind": None, "tracked": {}, "untracked": []}
    tokens = iter(split_nul(data))
    for token in tokens:
        if token.startswith(b"# "):
            apply_branch_header(state, text(token[2:]))
        elif token[:2] in (b"1 ", b"2 ", b"u "):
            xy, path = changed_entry(token)
            state["tracked"][decode_path(path)] = xy
            if token.startswith(b"2 "):
                next(tokens, None)  # a rename carries its original path as the next record
        elif token.startswith(b"? "):
            state["untracked"].append(token[2:])
    return state


# Fields before the path: "1 XY sub mH mI mW hH hI path", "2 ... X<score> path",
# "u XY sub m1 m2 m3 mW h1 h2 h3 path"; the path itself may contain spaces.
FIELDS_BEFORE_PATH = {b"1": 8, b"2": 9, b"u": 10}


def changed_entry(token: bytes) -> Tuple[str, bytes]:
    fields = token.split(b" ", FIELDS_BEFORE_PATH[token[:1]])
    return text(fields[1]), fields[-1]


def apply_branch_header(state: Dict[str, Any], header: str) -> None:
    key, _, value = header.partition(" ")
    if key == "branch.oid":
        state["head"] = None if value == "(initial)" else value
    elif key == "branch.head":
        state["branch"] = None if value == "(detached)" else value
    elif key == "branch.upstream":
        state["upstream"] = value
    elif key == "branch.ab":
        ahead, behind = value.split()
        state["ahead"], state["behind"] = int(ahead), -int(behind)


# ---- git log --name-only -z (history) -------------------------------------------------------

def parse_history(data: bytes) -> List[Dict[str, Any]]:
    """Commits newest first, each with its sha, parents, author time and name, subject, files."""
    commits: List[Dict[str, Any]] = []
    tokens = split_nul(data)
    index = 0
    while index < len(tokens):
        token = tokens[index]
        if token.startswith(COMMIT_MARK):
            commits.append(history_entry(token[len(COMMIT_MARK):], tokens[index + 1:index + 5]))
            index += 5
            continue
        if commits:  # the first file after a header is preceded by a newline
            name = token[1:] if token.startswith(b"\n") and not commits[-1]["files"] else token
            commits[-1]["files"].append(decode_path(name))
        index += 1
    return commits


def history_entry(sha: bytes, fields: List[bytes]) -> Dict[str, Any]:
    parents, when, author, subject = (fields + [b""] * 4)[:4]
    return {"sha": text(sha), "parents": text(parents).split(), "time": int(when or 0),
            "author": text(author), "subject": redact.redact_text(text(subject)), "files": []}


# ---- reflog files: "<old> <new> <name> <<email>> <time> <tz>\t<message>" ------------------

def parse_reflog(lines: List[bytes], ref: str = "HEAD") -> List[Dict[str, Any]]:
    """Reflog lines oldest first (as in the file) -> entries newest first with their selector."""
    entries = []
    for position, line in enumerate(reversed(lines)):
        entry = reflog_entry(line)
        if entry is not None:
            entry["selector"] = "%s@{%d}" % (ref, position)
            entries.append(entry)
    return entries


def reflog_entry(line: bytes) -> Optional[Dict[str, Any]]:
    head, _, message = line.rstrip(b"\n").partition(b"\t")
    fields = head.split(b" ")
    if len(fields) < 4 or not fields[-2].isdigit():
        return None
    # Messages like "clone: from https://user:token@host/x" carry the remote's credentials.
    return {"old": text(fields[0]), "new": text(fields[1]), "time": int(fields[-2]),
            "tz": text(fields[-1]), "message": redact.redact_text(text(message))}


def detached_state(head: Optional[str], reflog: List[Dict[str, Any]]) -> Dict[str, str]:
    """Like `git status`: "detached at X" while HEAD is still where the checkout put it."""
    for entry in reflog:
        message = entry["message"]
        if message.startswith("checkout: moving from ") and " to " in message:
            target = message.rsplit(" to ", 1)[1]
            key = "detached_at" if entry["new"] == head else "detached_from"
            return {key: target}
    return {}


# ---- git stash list -z --format=STASH_FORMAT ------------------------------------------------

def parse_stash_list(data: bytes) -> Dict[str, Dict[str, Any]]:
    tokens = split_nul(data)
    stashes = {}
    for position in range(len(tokens) // STASH_FIELDS):
        sha, parents, when, subject = tokens[position * 4:position * 4 + 4]
        parent_list = text(parents).split()
        stashes["stash@{%d}" % position] = {
            "sha": text(sha), "base": parent_list[0] if parent_list else None,
            "has_untracked": len(parent_list) > 2, "time": int(when or 0),
            "message": redact.redact_text(text(subject))}
    return stashes


# ---- git config -z --get-regexp ---------------------------------------------------------------

def parse_remotes(data: bytes) -> Dict[str, str]:
    """remote.<name>.url -> {name: url}, credentials redacted; names may contain dots."""
    remotes = {}
    for record in split_nul(data):
        key, _, value = text(record).partition("\n")
        if key.startswith("remote.") and key.endswith(".url"):
            remotes[key[len("remote."):-len(".url")]] = redact.redact_text(value)
    return remotes


# ---- capped blobs (patches, file contents) ----------------------------------------------------

def encode_blob(head: bytes, size: int, sha256: str, truncated: bool) -> Dict[str, Any]:
    """The kept bytes as text (or base64 when not UTF-8), with the whole thing's size and hash.

    Secrets are masked in what is kept; the hash stays that of the original, so a restore
    can tell an exact patch from a redacted one.
    """
    kept = redact.redact_text(head.decode("utf-8", "surrogateescape"))
    data = kept.encode("utf-8", "surrogateescape")
    blob: Dict[str, Any] = {"bytes": size, "sha256": sha256, "truncated": truncated}
    if data != head:
        blob["redacted"] = True
    decoded = utf8_text(data, truncated)
    if decoded is None:
        blob["base64"] = base64.b64encode(data).decode("ascii")
    else:
        blob["text"] = decoded
    return blob


def utf8_text(data: bytes, truncated: bool) -> Optional[str]:
    """UTF-8 text, forgiving only a character cut in half by truncation at the very end."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if truncated and exc.start >= len(data) - 3 and exc.reason == "unexpected end of data":
            return data[:exc.start].decode("utf-8")
        return None


def blob_of(data: bytes) -> Dict[str, Any]:
    return encode_blob(data, len(data), hashlib.sha256(data).hexdigest(), False)


def uncommitted_digest(patch_sha256: str, untracked: Dict[str, Dict[str, Any]]) -> str:
    """One hash of the whole uncommitted state: tracked patch plus every untracked file."""
    digest = hashlib.sha256(patch_sha256.encode())
    for path, info in sorted(untracked.items()):
        mark = info.get("sha256") or info.get("symlink") or info.get("bytes")
        digest.update(b"\0%s\0%s" % (path.encode("utf-8", "surrogateescape"), str(mark).encode()))
    return digest.hexdigest()
