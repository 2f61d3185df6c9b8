"""A snapshot's uncommitted patch on the host: decode it, upload it, check it, apply it.

Restore's git task, bisect (the good snapshot's patch at each commit) and explain (GOOD's
patch or the current one at each state) all apply a patch here, one way.

The check runs on the *target* commit's tree in a throw-away index (GIT_INDEX_FILE), so a
patch that will not apply is found before the user's work is stashed or HEAD moves.
A failure names the file and the hunk, from git's own "patch failed: FILE:LINE".
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass

from envsnap.agent.git import PATCH_FLAGS
from envsnap.errors import ArgError
from envsnap.hostops.git import GitFailure, command, complaint
from envsnap.hostops.shell import Shell, quote_path
from envsnap.hostops.shell import upload as upload_file
from envsnap.shape import is_object

DIFF_HEADER = re.compile(r"^diff --git a/(.*?) b/(.*)$")
HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,\d+)? \+\d+(?:,\d+)? @@")
FAILED_AT = re.compile(r"patch failed: (?P<file>.+):(?P<line>\d+)$", re.MULTILINE)
SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class Patch:
    data: bytes
    sha256: str          # of the patch as captured: what `git diff HEAD` hashed to

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", "replace")

    @property
    def files(self) -> list[str]:
        return [m.group(2) for m in map(DIFF_HEADER.match, self.text.splitlines()) if m]

    @property
    def new_files(self) -> list[str]:
        """The files the patch creates (a "new file mode" line right under their header)."""
        found, current = [], None
        for line in self.text.splitlines():
            header = DIFF_HEADER.match(line)
            if header:
                current = header.group(2)
            elif current and line.startswith("new file mode "):
                found.append(current)
        return found


def patch_from(value: object) -> Patch:
    """Plain patch text, or a snapshot blob {text | base64, sha256, truncated, redacted}."""
    if isinstance(value, str):
        data = value.encode("utf-8")
        return Patch(data, hashlib.sha256(data).hexdigest())
    blob = value if is_object(value) else {}
    if "error" in blob:
        raise GitFailure(f"the snapshot holds no patch for this checkout: {blob['error']}")
    if not ("text" in blob or "base64" in blob):
        raise ArgError("git: patch must be patch text or a snapshot blob ({text|base64, sha256})")
    refuse_unfaithful(blob)
    data = blob_bytes(blob)
    digest = hashlib.sha256(data).hexdigest()
    if blob.get("sha256") and blob["sha256"] != digest:
        raise GitFailure("the snapshot's patch does not match its recorded sha256 "
                         "(the snapshot file was edited?)")
    return Patch(data, digest)


def refuse_unfaithful(blob: Mapping[str, object]) -> None:
    if blob.get("truncated"):
        raise GitFailure(f"the snapshot's patch was cut at capture ({blob.get('bytes')} bytes, "
                         "not all kept): it cannot be applied; capture with a larger "
                         "--max-patch-bytes")
    if blob.get("redacted"):
        raise GitFailure("the snapshot's patch had secrets masked at capture: applying it "
                         "would write the masks into your files; redo those lines by hand")


def blob_bytes(blob: Mapping[str, object]) -> bytes:
    if "text" in blob:
        return str(blob["text"]).encode("utf-8", "surrogateescape")
    try:
        return base64.b64decode(str(blob["base64"]), validate=True)
    except binascii.Error:
        raise ArgError("git: the patch's base64 is not valid") from None


def expected_digest(value: object) -> str:
    """What `git diff HEAD` must hash to: a blob's recorded sha256 (kept exact even when the
    text was redacted), a bare sha256, or the hash of patch text."""
    if is_object(value) and SHA256.match(str(value.get("sha256", ""))):
        return str(value["sha256"])
    if isinstance(value, str) and SHA256.match(value):
        return value
    return patch_from(value).sha256


# ---- on the host ------------------------------------------------------------------------------

def upload(shell: Shell, patch: Patch) -> str:
    """Put the patch in a temp file on the host; returns it quoted for the shell."""
    return quote_path(upload_file(shell, patch.data, "patch", ".diff"))


def remove(shell: Shell, quoted: str) -> None:
    shell.sh(f"rm -f {quoted}")


def check_on_commit(shell: Shell, top: str, commit: str, patch: Patch) -> None:
    """Does the patch apply to `commit`? Asked of a private index: nothing else is touched
    (the patch is uploaded for the question and removed again); GitFailure if it does not."""
    quoted = upload(shell, patch)
    read_tree = command(shell, top, "read-tree", commit)
    check = command(shell, top, "apply", "--cached", "--check", "--binary")
    try:
        result = shell.sh(f'd=$(mktemp -d) && export GIT_INDEX_FILE="$d/index" && {read_tree} '
                          f'&& {check} {quoted}; rc=$?; rm -rf "$d"; exit $rc')
    finally:
        remove(shell, quoted)
    if result.exit_code != 0:
        raise GitFailure(f"{top}: the snapshot's patch does not apply to {commit[:12]}: "
                         f"{explain(result.stderr, patch)}")


def apply(shell: Shell, top: str, patch: Patch, quoted: str,
          staged: tuple[Patch, str] | None = None) -> None:
    """Every step is checked before the first one runs, so a failure leaves the tree as it was.

    Without the staged part (bisect's patch, an older snapshot): `--index`, so new files are
    tracked again and `git diff HEAD` comes back to the captured patch, all of it staged.
    With it (the staged patch and its quoted path): the index gets the staged part and the
    working tree the whole patch, so what was unstaged at capture is unstaged again."""
    steps: list[tuple[tuple[str, ...], Patch, str]] = [(("--index",), patch, quoted)]
    if staged is not None:
        steps = [((), patch, quoted)]   # the working tree only
        if staged[0].data:              # git apply refuses an empty patch
            steps.insert(0, (("--cached",), staged[0], staged[1]))
    for flags, part, path in steps:
        checked = shell.sh(f"{command(shell, top, 'apply', *flags, '--check', '--binary')} {path}")
        if checked.exit_code != 0:
            raise GitFailure(f"{top}: the snapshot's patch does not apply (nothing was "
                             f"changed): {explain(checked.stderr, part)}")
    for flags, _, path in steps:
        applied = shell.sh(f"{command(shell, top, 'apply', *flags, '--binary')} {path}")
        if applied.exit_code != 0:
            raise GitFailure(f"{top}: git apply failed after its check passed: "
                             f"{complaint(applied)}")
    if staged is not None:
        keep_intent_to_add(shell, top, patch, staged[0])


def take_out(shell: Shell, top: str, quoted: str) -> str | None:
    """A patch `apply` put in (without its staged part) taken back out, exactly: the tree was
    clean under it. None when it came out, else git's complaint."""
    undone = shell.sh(f"{command(shell, top, 'apply', '-R', '--index', '--binary')} {quoted}")
    return complaint(undone) if undone.exit_code != 0 else None


def keep_intent_to_add(shell: Shell, top: str, patch: Patch, staged: Patch) -> None:
    """A new file in `git diff HEAD` that the index did not hold was `git add -N`'d: mark it so
    again, or it would be untracked and missing from the patch."""
    in_index = set(staged.new_files)
    intended = [name for name in patch.new_files if name not in in_index]
    if not intended:
        return
    added = shell.sh(command(shell, top, "add", "--intent-to-add", "--", *intended))
    if added.exit_code != 0:
        raise GitFailure(f"{top}: git add --intent-to-add failed: {complaint(added)}")


def current_digest(shell: Shell, top: str) -> str:
    """sha256 of `git diff HEAD`, made exactly as the capture agent makes it."""
    diff = command(shell, top, "diff", "HEAD", *PATCH_FLAGS, "--")
    result = shell.sh(f'f=$(mktemp) && {diff} > "$f"; rc=$?; sha256sum < "$f"; rm -f "$f"; '
                      "exit $rc")
    if result.exit_code != 0:
        raise GitFailure(f"{top}: git diff failed: {complaint(result)}")
    return result.stdout.split()[0]


# ---- saying which hunk --------------------------------------------------------------------------

def explain(stderr: str, patch: Patch) -> str:
    found = FAILED_AT.search(stderr)
    if not found:
        return complaint_text(stderr)
    name, line = found["file"], int(found["line"])
    number, header = find_hunk(patch.text, name, line)
    hunk = f"hunk #{number} ({header})" if number else f"the hunk at line {line}"
    return f"{name}: {hunk} does not apply (git: {complaint_text(stderr)})"


def complaint_text(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.startswith("error:")]
    return "; ".join(lines) or stderr.strip() or "git apply refused the patch"


def find_hunk(text: str, name: str, old_start: int) -> tuple[int, str]:
    """(number of the hunk within its file, its @@ header); (0, "") if not found."""
    current, number = None, 0
    for line in text.splitlines():
        header = DIFF_HEADER.match(line)
        if header:
            current, number = header.group(2), 0
            continue
        hunk = HUNK_HEADER.match(line)
        if hunk and current == name:
            number += 1
            if int(hunk.group(1)) == old_start:
                return number, line.split(" @@")[0] + " @@"
    return 0, ""
