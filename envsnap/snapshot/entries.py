"""The one writer of what envsnap keeps: store entries and its caches, never written through.

Everything envsnap writes into the store or its own caches goes through here: snapshots,
a fleet's retry file (STORE/LABEL.retry), the journals of bisect, explain and restore, a
benchmark's record, the store's .gitignore, the files the local transport hands to its
agent. Whatever stands at the path may have been put there by someone else: a link to the
user's ~/.bashrc, a FIFO that would hang the writer, a device.

- A whole file (`write_entry`) is written to a new file beside it (O_EXCL: nothing there is
  opened) and renamed into place: a link is replaced itself, its target left as it was; a
  crash never leaves half a file. What stands there and is no regular file, nor a link to
  one (a FIFO, a device, a folder), is refused first, in one line (StoreError).
- A file that grows (`append_entry`: a journal) is opened without following a link
  (O_NOFOLLOW), without waiting on a FIFO (O_NONBLOCK), and written only when fstat says it
  is a regular file; `create_entry` makes one that must not exist yet.
"""
from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

from envsnap.errors import StoreError

APPEND = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def kind_of(mode: int) -> str:
    kinds = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
             (stat.S_ISDIR, "a folder"), (stat.S_ISLNK, "a link"))
    return next((name for test, name in kinds if test(mode)), "not a file")


def refused(path: Path, mode: int) -> StoreError:
    return StoreError(f"{path}: the store entry is not a regular file ({kind_of(mode)}), "
                      "refused: move it away")


def check_entry(path: Path) -> None:
    """A store entry that exists is a regular file (or a link to one), else it is refused: a
    FIFO would hang the reader, and a device or a link to one would be written through."""
    try:
        mode = path.stat().st_mode
    except OSError:   # free (a dangling link too: a write replaces the link, not its target),
        return        # or a folder on the way gone: the write that follows says so
    if not stat.S_ISREG(mode):
        raise refused(path, mode)


def write_entry(path: Path, content: str | bytes, mode: int | None = None) -> None:
    """`content` as the whole of the entry at `path`: checked (check_entry), written beside
    it (0600 unless `mode` says otherwise), renamed into place. StoreError for what stands
    there; OSError for a failing disk or folder, the caller says which file."""
    check_entry(path)
    data = content.encode("utf-8") if isinstance(content, str) else content
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            if mode is not None:
                os.fchmod(out.fileno(), mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def opened(path: Path, flags: int, mode: int = 0o600) -> int:
    """A descriptor of the regular file at `path`, never through a link nor waiting on a
    FIFO; StoreError for anything else."""
    try:
        descriptor = os.open(path, flags, mode)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO):   # a link; a FIFO nobody reads
            raise refused(path, os.lstat(path).st_mode) from None
        raise
    found = os.fstat(descriptor).st_mode
    if not stat.S_ISREG(found):
        os.close(descriptor)
        raise refused(path, found)
    return descriptor


def create_entry(path: Path) -> None:
    """A new, empty entry of this user's alone; FileExistsError when anything is there (a
    link too: O_EXCL never follows one)."""
    os.close(opened(path, CREATE))


def append_entry(path: Path, text: str) -> None:
    """`text` added at the end of the regular file at `path`, synced to disk."""
    descriptor = opened(path, APPEND)
    try:
        data = text.encode("utf-8")
        while data:
            data = data[os.write(descriptor, data):]
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
