"""Pure parsers for the git collector: git's bytes in, snapshot data out.

Nothing here runs git or touches the disk, so every function is tested on literal bytes.
Outputs are NUL-separated (-z, %x00) because file names may hold any byte but NUL; names,
subjects and every other field are decoded with util.escaped, so undecodable bytes stay
visible and reversible, escaped as every other channel escapes them.
"""
from __future__ import annotations

from . import redact
from .util import escaped

TYPE_CHECKING = False   # typing's own, without its import: see runner.py
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional, Set, Tuple

# Starts each commit of the history log; a file name would have to begin with these exact
# bytes to be mistaken for a commit, so the NUL-split stream parses without ambiguity.
COMMIT_MARK = b"\x01envsnap-commit\x01"
HISTORY_FORMAT = "%x01envsnap-commit%x01%H%x00%P%x00%at%x00%an%x00%s"
STASH_FORMAT = "%H%x00%P%x00%ct%x00%gs"
STASH_FIELDS = 4


def text(raw: bytes) -> str:
    """git's bytes (a subject, an author, a ref) as text: util.escaped, as any channel."""
    return escaped(raw)


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
                             "behind": None, "tracked": {}, "untracked": [], "conflicted": [],
                             "submodules": {}}
    tokens = iter(split_nul(data))
    for token in tokens:
        if token.startswith(b"# "):
            apply_branch_header(state, text(token[2:]))
        elif token[:2] in (b"1 ", b"2 ", b"u "):
            xy, path = changed_entry(token)
            state["tracked"][escaped(path)] = xy
            sub = text(token.split(b" ", 3)[2])
            if sub.startswith("S"):  # a submodule: S, then commit moved, modified, untracked
                state["submodules"][escaped(path)] = sub
            if token.startswith(b"u "):  # unmerged: what `git diff --diff-filter=U` names
                state["conflicted"].append(escaped(path))
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


def parse_gitlinks(data: bytes) -> Dict[str, str]:
    """`git ls-files -s -z` -> {path: sha} of the gitlinks (mode 160000: submodules)."""
    links = {}
    for record in split_nul(data):
        info, _, path = record.partition(b"\t")
        fields = info.split(b" ")
        if len(fields) == 3 and fields[0] == b"160000":
            links[escaped(path)] = text(fields[1])
    return links


# ---- an operation stopped half-way: the files git leaves in the git dir ----------------------

# (file or directory in the git dir, operation), in the order `git status` checks them: a
# rebase stopped on a conflict also holds the CHERRY_PICK_HEAD of the commit it replays.
OPERATION_MARKERS = [("rebase-merge", "rebase"), ("rebase-apply", "rebase"),
                     ("MERGE_HEAD", "merge"), ("CHERRY_PICK_HEAD", "cherry-pick"),
                     ("REVERT_HEAD", "revert"), ("BISECT_LOG", "bisect")]


def operation_in_progress(present: List[str], conflicted: List[str],
                          details: Dict[str, str]) -> Optional[Dict[str, Any]]:
    """{operation, conflicted, and what git recorded (onto, branch, the commit replayed)}."""
    for marker, operation in OPERATION_MARKERS:
        if marker in present:
            if marker == "rebase-apply" and "applying" in present:
                operation = "am"
            state: Dict[str, Any] = {"operation": operation, "conflicted": sorted(conflicted)}
            state.update({k: v for k, v in sorted(details.items()) if v})
            return state
    return None


# ---- git log --name-only -z (history) -------------------------------------------------------

def parse_history(data: bytes) -> List[Dict[str, Any]]:
    """Commits newest first, each with its sha, parents, author time and name, subject, files."""
    commits: List[Dict[str, Any]] = []
    tokens = split_nul(data)
    index = 0
    repeated = False
    while index < len(tokens):
        token = tokens[index]
        if token.startswith(COMMIT_MARK):
            entry = history_entry(token[len(COMMIT_MARK):], tokens[index + 1:index + 5])
            # `log -m` shows a merge once per parent, first parent first: its files are what
            # it brought to the branch it was made on (conflict fixes included); later
            # repeats are skipped.
            repeated = bool(commits) and commits[-1]["sha"] == entry["sha"]
            if not repeated:
                commits.append(entry)
            index += 5
            continue
        if commits and not repeated:  # the first file after a header follows a newline
            name = token[1:] if token.startswith(b"\n") and not commits[-1]["files"] else token
            commits[-1]["files"].append(escaped(name))
        index += 1
    return commits


def history_entry(sha: bytes, fields: List[bytes]) -> Dict[str, Any]:
    parents, when, author, subject = (fields + [b""] * 4)[:4]
    return {"sha": text(sha), "parents": text(parents).split(), "time": int(when or 0),
            "author": text(author), "subject": redact.redact_text(text(subject)), "files": []}


def mark_boundary(commits: List[Dict[str, Any]], boundary: Set[str]) -> None:
    """A commit on the shallow edge is logged with no parents, so git lists its whole tree as
    its files: they are not what it changed. Its files are unknown, and it says so."""
    for commit in commits:
        if commit["sha"] in boundary:
            commit["shallow_boundary"] = True
            commit["files"] = []


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


ZERO_SHA = frozenset(["0" * 40, "0" * 64])


def oldest_position(entries: List[Dict[str, Any]]) -> Optional[str]:
    """Where HEAD stood at the oldest entry given: its old sha, or its new one when it was
    born there (a clone, a first commit: the old sha is all zeros)."""
    if not entries:
        return None
    entry = entries[-1]
    sha = entry["old"] if entry["old"] not in ZERO_SHA else entry["new"]
    return sha if sha not in ZERO_SHA and all(c in "0123456789abcdef" for c in sha) else None


def detached_state(head: Optional[str], reflog: List[Dict[str, Any]]) -> Dict[str, str]:
    """Like `git status`: "detached at X" while HEAD is still where the checkout put it.

    X is the sha the checkout went to; the name it was given (`HEAD~7`, a tag) goes beside
    it as a label only, since `HEAD~7` means another commit as soon as anything moves."""
    for entry in reflog:
        message = entry["message"]
        if message.startswith("checkout: moving from ") and " to " in message:
            target = message.rsplit(" to ", 1)[1]
            key = "detached_at" if entry["new"] == head else "detached_from"
            state = {key: entry["new"]}
            if target != entry["new"]:
                state[key + "_name"] = target
            return state
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


# ---- a patch's files, read as it streams past the cap ------------------------------------------

PATCH_HEADER = b"\ndiff --git "
MAX_PATCH_FILES = 10000   # files listed per patch; past that they are only counted


class PatchFiles:
    """Each file's part of a patch (from its `diff --git` line to the next): bytes and sha256.

    Fed the whole stream, not only the kept head, so a 7 MB patch over 19 files is 19 files
    after a 1 MiB cap, and a file whose hunks did not change keeps its hash whatever came
    before it. Headers are found with bytes.find, so a 1 GB binary patch costs no line split.
    """

    def __init__(self) -> None:
        self.files: List[Tuple[bytes, int, Any]] = []   # (header, bytes, sha256 object)
        self.total = 0
        self.carry = b"\n"  # as if a line ended just before the stream: a header at 0 is found

    def feed(self, block: bytes) -> None:
        data = self.carry + block
        position = 0
        while True:
            found = data.find(PATCH_HEADER, position)
            if found < 0:
                break
            end = data.find(b"\n", found + 1)
            if end < 0:  # the header line goes on in the next block: keep it whole
                self.add(data[position:found])
                self.carry = data[found:]
                return
            self.add(data[position:found + 1])
            self.start(data[found + 1:end])
            position = found + 1
        keep = max(position, len(data) - len(PATCH_HEADER) + 1)
        self.add(data[position:keep])
        self.carry = data[keep:]

    def start(self, header: bytes) -> None:
        self.total += 1
        if len(self.files) < MAX_PATCH_FILES:
            import hashlib  # on use, as base64 below: a capture of no repo needs neither

            self.files.append((header, 0, hashlib.sha256()))

    def add(self, data: bytes) -> None:
        if data and self.files and self.total == len(self.files):
            header, size, digest = self.files[-1]
            digest.update(data)
            self.files[-1] = (header, size + len(data), digest)

    def finish(self) -> Dict[str, Any]:
        """{files: {path: {bytes, sha256}}, files_total} once the stream has ended."""
        if self.carry.startswith(PATCH_HEADER):  # the stream ended inside a header line
            self.add(b"\n")
            self.start(self.carry[1:])
            self.add(self.carry[1:])
        else:
            self.add(self.carry)
        self.carry = b""
        files = {patch_path(header): {"bytes": size, "sha256": digest.hexdigest()}
                 for header, size, digest in self.files}
        return {"files": files, "files_total": self.total}


def patch_path(header: bytes) -> str:
    """The file a `diff --git a/X b/X` line names (--no-renames: X twice, so the halves are
    equal and a name with spaces needs no guessing); C-quoted when it holds odd bytes."""
    rest = header[len(b"diff --git "):].rstrip(b"\r")
    second = rest[(len(rest) + 1) // 2:]
    if second.startswith(b'"') and second.endswith(b'"'):
        second = unquote_c(second[1:-1])
    return escaped(second[2:] if second.startswith(b"b/") else second)


C_ESCAPES = {ord("a"): 7, ord("b"): 8, ord("t"): 9, ord("n"): 10, ord("v"): 11, ord("f"): 12,
             ord("r"): 13, ord('"'): 34, ord("\\"): 92}


def unquote_c(quoted: bytes) -> bytes:
    """git's C-style quoting of a path: \\t, \\", \\\\ and octal bytes such as \\303."""
    out = bytearray()
    index = 0
    while index < len(quoted):
        byte = quoted[index]
        if byte == 92 and index + 1 < len(quoted):
            code = quoted[index + 1]
            if 48 <= code <= 55 and index + 4 <= len(quoted):
                out.append(int(quoted[index + 1:index + 4], 8) & 0xFF)
                index += 4
                continue
            out.append(C_ESCAPES.get(code, code))
            index += 2
            continue
        out.append(byte)
        index += 1
    return bytes(out)


# ---- capped blobs (patches, file contents) ----------------------------------------------------

def encode_blob(head: bytes, size: int, sha256: str, truncated: bool,
                path: Optional[str] = None) -> Dict[str, Any]:
    """The kept bytes as text (or base64 when not UTF-8), with the whole thing's size and hash.

    Secrets are masked in what is kept; the hash stays that of the original, so a restore
    can tell an exact patch from a redacted one.
    """
    shown = head.decode("utf-8", "surrogateescape")
    # a patch is read file by file, a file as what its name says (code or configuration)
    kept = redact.redact_patch(shown) if path is None else redact.redact_file(shown, path)
    data = kept.encode("utf-8", "surrogateescape")
    blob: Dict[str, Any] = {"bytes": size, "sha256": sha256, "truncated": truncated}
    if data != head:
        blob["redacted"] = True
    decoded = utf8_text(data, truncated)
    if decoded is None:
        import base64

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


def blob_of(data: bytes, path: Optional[str] = None) -> Dict[str, Any]:
    import hashlib

    return encode_blob(data, len(data), hashlib.sha256(data).hexdigest(), False, path)


def uncommitted_digest(patch_sha256: str, untracked: Dict[str, Dict[str, Any]]) -> str:
    """One hash of the whole uncommitted state: tracked patch plus every untracked file."""
    import hashlib

    digest = hashlib.sha256(patch_sha256.encode())
    for path, info in sorted(untracked.items()):
        mark = info.get("sha256") or info.get("symlink") or \
            "%s:%s" % (info.get("bytes"), info.get("mtime_ns", ""))
        digest.update(b"\0%s\0%s" % (path.encode("utf-8", "surrogateescape"), str(mark).encode()))
    return digest.hexdigest()
