"""Files on the host through the transport: read exactly, write atomically with a backup.

Contents travel as base64 one way (a shell's stdout is text) and through `put` the other.
A write goes to a new file beside the target, which takes the old file's mode and owner,
and is renamed over it: a reader never sees half a file, and the old one is kept as
`<path>.envsnap-backup-<time>` first.
"""
from __future__ import annotations

import base64
import binascii
import difflib
import shlex
import uuid
from dataclasses import dataclass
from typing import Literal

from envsnap.errors import HostError
from envsnap.playbook.tasks.base import Context, ModuleResult, failed, last_line, quote_path

BACKUP_INFIX = ".envsnap-backup-"
MAX_DIFF_BYTES = 256 * 1024

READ = """p={path}
[ -L "$p" ] && p=$(readlink -f "$p")
if [ -f "$p" ]; then printf 'file %s\\n' "$(stat -c %a "$p")"; base64 < "$p"
elif [ -e "$p" ]; then echo other
else echo absent; fi"""

# An empty stamp means no backup; an empty mode keeps the old file's mode.
INSTALL = """set -e
t={path}; n={new}; stamp={stamp}; mode={mode}; b=
trap 'rm -f "$n"' EXIT
[ -L "$t" ] && t=$(readlink -f "$t")
if [ -e "$t" ]; then
  chmod --reference="$t" "$n" 2>/dev/null || true
  chown --reference="$t" "$n" 2>/dev/null || true
  if [ -n "$stamp" ]; then
    b="$t{infix}$stamp"; i=0
    while [ -e "$b" ]; do i=$((i+1)); b="$t{infix}$stamp.$i"; done
    cp -p "$t" "$b"
  fi
fi
[ -n "$mode" ] && chmod "$mode" "$n"
mv -f "$n" "$t"
printf '%s' "$b"
"""


@dataclass(frozen=True)
class FileState:
    kind: Literal["file", "absent", "other"]   # other: a directory, a device
    data: bytes = b""
    mode: str = ""

    @property
    def exists(self) -> bool:
        return self.kind != "absent"


def read_file(ctx: Context, path: str) -> FileState:
    result = ctx.sh(READ.format(path=quote_path(path)))
    if result.exit_code != 0:
        raise HostError(f"{ctx.host.name}: cannot read {path}: {last_line(result.stderr)}")
    header, _, body = result.stdout.partition("\n")
    kind, _, mode = header.partition(" ")
    if kind != "file":
        return FileState("absent" if kind == "absent" else "other")
    try:
        return FileState("file", base64.b64decode(body), mode.strip())
    except binascii.Error:
        raise HostError(f"{ctx.host.name}: unreadable content of {path}") from None


def put_path(path: str) -> str:
    """transport.put takes paths relative to the login home, as SFTP does."""
    return path[2:] if path.startswith("~/") else path


def write_file(ctx: Context, path: str, data: bytes, mode: str = "",
               backup: bool = True) -> str:
    """Install `data` at `path`; returns the backup's path ("" when nothing was there)."""
    folder = path.rsplit("/", 1)[0] or "/"
    made = ctx.sh(f"mkdir -p {quote_path(folder)}")
    if made.exit_code != 0:
        raise HostError(f"{ctx.host.name}: cannot create {folder}: {last_line(made.stderr)}")
    new = f"{path}.envsnap-new-{uuid.uuid4().hex[:12]}"
    ctx.transport.put(data, put_path(new))
    stamp = (ctx.timestamp or "now") if backup else ""
    script = INSTALL.format(path=quote_path(path), new=quote_path(new), infix=BACKUP_INFIX,
                            stamp=shlex.quote(stamp), mode=shlex.quote(mode))
    result = ctx.sh(script)
    if result.exit_code != 0:
        raise HostError(f"{ctx.host.name}: cannot write {path}: {last_line(result.stderr)}")
    return result.stdout.strip()


def unified_diff(path: str, before: FileState, after: bytes) -> str:
    old = before.data if before.kind == "file" else b""
    if len(old) > MAX_DIFF_BYTES or len(after) > MAX_DIFF_BYTES:
        return f"{path}: {len(old)} -> {len(after)} bytes (too large to show)\n"
    try:
        old_text, new_text = old.decode("utf-8"), after.decode("utf-8")
    except UnicodeDecodeError:
        return f"{path}: binary content, {len(old)} -> {len(after)} bytes\n"
    lines = difflib.unified_diff(old_text.splitlines(keepends=True),
                                 new_text.splitlines(keepends=True),
                                 fromfile=f"{path} (on host)" if before.exists else "/dev/null",
                                 tofile=f"{path} (after)")
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
                   for line in lines)


def install(ctx: Context, path: str, data: bytes, mode: str = "",
            backup: bool = True) -> ModuleResult:
    """The whole of copy/template/env_file: compare, diff, then (not in check mode) write."""
    before = read_file(ctx, path)
    if before.kind == "other":
        return failed(f"{path} exists and is not a regular file")
    if before.data == data and before.exists and (not mode or before.mode == mode.lstrip("0")):
        return ModuleResult(msg=f"{path} is already as wanted", data={"dest": path})
    diff = unified_diff(path, before, data) if ctx.diff else ""
    verb = "update" if before.exists else "create"
    if ctx.check:
        return ModuleResult(changed=True, diff=diff, msg=f"would {verb} {path}",
                            data={"dest": path})
    saved = write_file(ctx, path, data, mode, backup and before.exists)
    note = f" (previous kept as {saved})" if saved else ""
    return ModuleResult(changed=True, diff=diff, msg=f"{verb}d {path}{note}",
                        data={"dest": path, "backup": saved})
