"""Plain files on the host through the transport: read exactly, write atomically with a backup.

What a playbook's copy, template and env_file tasks write (a path the playbook names, not
one from a snapshot: those go through the write policy, treefile.py). Contents travel as
base64 one way (a shell's stdout is text) and through `put` the other. A write goes to a
new file beside the target, which takes the old file's mode and owner, and is renamed over
it: a reader never sees half a file, and the old one is kept as
`<path>.envsnap-backup-<time>` first.
"""
from __future__ import annotations

import base64
import binascii
import shlex
import uuid
from dataclasses import dataclass
from typing import Literal

from envsnap.errors import HostError
from envsnap.hostops.shell import Shell, last_line, quote_path

BACKUP_INFIX = ".envsnap-backup-"

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


def read_file(shell: Shell, path: str) -> FileState:
    result = shell.sh(READ.format(path=quote_path(path)))
    if result.exit_code != 0:
        raise HostError(f"{shell.host.name}: cannot read {path}: {last_line(result.stderr)}")
    header, _, body = result.stdout.partition("\n")
    kind, _, mode = header.partition(" ")
    if kind != "file":
        return FileState("absent" if kind == "absent" else "other")
    try:
        return FileState("file", base64.b64decode(body), mode.strip())
    except binascii.Error:
        raise HostError(f"{shell.host.name}: unreadable content of {path}") from None


def put_path(path: str) -> str:
    """transport.put takes paths relative to the login home, as SFTP does."""
    return path[2:] if path.startswith("~/") else path


def write_file(shell: Shell, path: str, data: bytes, mode: str = "", stamp: str = "") -> str:
    """Install `data` at `path`, the file it replaces kept as `<path>.envsnap-backup-<stamp>`
    (no backup when `stamp` is empty); returns the backup's path ("" when none was made)."""
    folder = path.rsplit("/", 1)[0] or "/"
    made = shell.sh(f"mkdir -p {quote_path(folder)}")
    if made.exit_code != 0:
        raise HostError(f"{shell.host.name}: cannot create {folder}: {last_line(made.stderr)}")
    new = f"{path}.envsnap-new-{uuid.uuid4().hex[:12]}"
    shell.transport.put(data, put_path(new))
    script = INSTALL.format(path=quote_path(path), new=quote_path(new), infix=BACKUP_INFIX,
                            stamp=shlex.quote(stamp), mode=shlex.quote(mode))
    result = shell.sh(script)
    if result.exit_code != 0:
        raise HostError(f"{shell.host.name}: cannot write {path}: {last_line(result.stderr)}")
    return result.stdout.strip()
