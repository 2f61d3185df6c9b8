"""Runs on the host (`python -c <this file> REQUEST`): the only way restore and explain write
a file a snapshot names (the write policy's host side).

Stdlib only, Python >= 3.8, no imports from envsnap: treefile.py sends this source whole.

Every path is a folder the controller vouches for (a checkout's top folder as git reports
it, a site-packages folder as the host's python reports it) plus a relative path from a
snapshot, which is not trusted: it must not be absolute, hold `..` or `.`, or name `.git`
in any case, and each of its folders is opened with O_NOFOLLOW from the one above, so a
symlink anywhere below the root (one the snapshot's own patch made, say) stops the write
instead of leading it outside. The last step is a rename inside that opened folder.

Whatever is overwritten or deleted is copied first into a backup folder with a manifest
(one per root): the rollback's `put_back` writes those files back the same way.

REQUEST is a JSON file (deleted once read); one JSON line comes back on stdout. A path the
policy refuses is {"refused": why} with exit 0: the caller turns it into a failed task.
The request and answer of each operation are the TypedDicts below, which treefile.py, the
controller's side, imports: one definition for both ends of the wire.
"""
from __future__ import annotations

import base64
import errno
import hashlib
import importlib.util
import json
import os
import site
import stat
import subprocess
import sys
import uuid
from typing import Any, Callable, Literal, TypedDict, Union, cast

MANIFEST = "manifest.json"
READ_CAP = 64 << 20


# ---- the wire: one request and one answer per operation -----------------------------------------
# Typing names from `typing` only where Python 3.8 evaluates them (aliases, not annotations).

class ReadRequest(TypedDict):
    op: Literal["read"]
    root: str
    path: str
    follow_last: bool


class WriteRequest(TypedDict):
    op: Literal["write"]
    root: str
    path: str
    source: str               # the uploaded content's path on the host, deleted once read
    backup: str | None
    record_absent: bool


class ReadManyRequest(TypedDict):
    op: Literal["read_many"]
    root: str
    paths: list[str]


class WriteManyRequest(TypedDict):
    op: Literal["write_many"]
    root: str
    backup: str | None
    files: dict[str, str]     # path -> base64 content


class BackupRepoRequest(TypedDict):
    op: Literal["backup_repo"]
    root: str
    sha: str | None           # the commit the checkout moves to
    names: list[str]
    backup: str
    git_flags: list[str]      # git's -c flags, built where every git command is (gitsafe.py)
    git_env: dict[str, str]   # set for git; every other GIT_* variable is unset


class BackupFileRequest(TypedDict):
    op: Literal["backup_file"]
    root: str
    path: str
    backup: str


class NoteStashRequest(TypedDict):
    op: Literal["note_stash"]
    root: str
    stash: str
    backup: str


class RemoveRequest(TypedDict):
    op: Literal["remove"]
    root: str
    path: str
    backup: str | None


class PutBackRequest(TypedDict):
    op: Literal["put_back"]
    root: str
    source: str               # the backup folder of the restore being undone
    backup: str | None
    dry: bool


class SiteDirsRequest(TypedDict):
    op: Literal["site_dirs"]


Request = Union[ReadRequest, WriteRequest, ReadManyRequest, WriteManyRequest,
                BackupRepoRequest, BackupFileRequest, NoteStashRequest, RemoveRequest,
                PutBackRequest, SiteDirsRequest]

FileKind = Literal["file", "absent", "other"]
WriteStatus = Literal["created", "updated", "same"]


class _Kind(TypedDict):
    kind: FileKind


class FileAnswer(_Kind, total=False):
    mode: int                 # a file's permission bits
    base64: str               # a file's content


class WriteAnswer(TypedDict):
    status: WriteStatus


class ReadManyAnswer(TypedDict):
    states: dict[str, FileAnswer]


class WriteManyAnswer(TypedDict):
    statuses: dict[str, WriteStatus]


class SavedAnswer(TypedDict):
    saved: list[str]


class NoteStashAnswer(TypedDict):
    stash: str                # the stash kept (the first one noted)


class RemoveAnswer(TypedDict):
    removed: bool


class PutBackAnswer(TypedDict):
    restored: list[str]
    removed: list[str]
    stash: str | None


class SiteDirsAnswer(TypedDict, total=False):
    site_dirs: list[str]
    own_dirs: list[str]           # those inside this python's own prefix (a venv), no link out
    sitecustomize: str | None
    sitecustomize_real: str | None
    sitecustomize_own: bool       # the one loaded now is inside the own prefix
    shadows_own: bool             # ... and it is not, and comes before the own folders
    version: str                  # "3.11"


class Refusal(TypedDict):
    refused: str


Answer = Union[FileAnswer, WriteAnswer, ReadManyAnswer, WriteManyAnswer, SavedAnswer,
               NoteStashAnswer, RemoveAnswer, PutBackAnswer, SiteDirsAnswer, Refusal]


class ManifestEntry(TypedDict, total=False):
    absent: bool              # nothing was there: the rollback removes the file
    file: str                 # else the saved copy's name in the backup folder
    mode: int


class _Files(TypedDict):
    files: dict[str, ManifestEntry]


class Manifest(_Files, total=False):
    root: str
    stash: str                # a submodule's work, stashed in its own repository


def empty_manifest() -> Manifest:
    return {"root": "", "files": {}}


class Refused(Exception):
    """The policy says no; the message names the path and why."""


def parts_of(path: str) -> list[str]:
    if not path or "\0" in path:
        raise Refused("an empty path")
    if path.startswith("/"):
        raise Refused(f"{path}: absolute, outside the folder")
    parts = path.split("/")
    for part in parts:
        if part in ("", ".", ".."):
            raise Refused(f"{path}: '{part or '//'}' in the path, not a plain path inside")
        if part.lower() == ".git":
            raise Refused(f"{path}: under .git (git's own files are never written)")
    return parts


def open_root(root: str) -> int:
    try:
        return os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        raise Refused(f"{root}: {exc.strerror}") from None


def open_folder(parent: int, name: str, shown: str, create: bool) -> int | None:
    """The folder `name` in `parent`, never through a symlink; None if absent (not created)."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    try:
        return os.open(name, flags, dir_fd=parent)
    except FileNotFoundError:
        if not create:
            return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise Refused(f"{shown} is a symlink or a file, not a folder: nothing is written "
                          "through it") from None
        raise Refused(f"{shown}: {exc.strerror}") from None
    os.mkdir(name, 0o777, dir_fd=parent)
    return os.open(name, flags, dir_fd=parent)


def walk(root: str, path: str, create: bool) -> tuple[int | None, str]:
    """(fd of the folder that holds `path`, its last name); fd None when a folder is absent."""
    parts = parts_of(path)
    fd: int | None = open_root(root)
    for depth, name in enumerate(parts[:-1]):
        assert fd is not None
        try:
            child = open_folder(fd, name, "/".join(parts[:depth + 1]), create)
        finally:
            os.close(fd)
        fd = child
        if fd is None:
            break
    return fd, parts[-1]


def lstat_in(folder: int, name: str, shown: str) -> os.stat_result | None:
    """The entry, not followed; None if absent; refused unless a regular file."""
    try:
        found = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(found.st_mode):
        raise Refused(f"{shown} is a symlink: nothing is written through it")
    if not stat.S_ISREG(found.st_mode):
        raise Refused(f"{shown} exists and is not a regular file")
    return found


def read_in(folder: int, name: str) -> bytes:
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=folder)
    with os.fdopen(fd, "rb") as handle:
        return handle.read(READ_CAP + 1)


# ---- backups ------------------------------------------------------------------------------------

def backup_folder(backup: str, root: str) -> str:
    """One folder per root under the restore's backup folder, made private."""
    folder = os.path.join(os.path.expanduser(backup),
                          hashlib.sha256(root.encode("utf-8", "surrogateescape")).hexdigest()[:16])
    os.makedirs(folder, mode=0o700, exist_ok=True)
    return folder


def read_manifest(folder: str) -> Manifest:
    try:
        with open(os.path.join(folder, MANIFEST), encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError:
        return empty_manifest()
    # The one shape check on a file from disk; what passes is the manifest this script wrote.
    if isinstance(data, dict) and isinstance(data.get("files"), dict):
        return cast("Manifest", data)
    return empty_manifest()


def write_manifest(folder: str, manifest: Manifest) -> None:
    temporary = os.path.join(folder, f".{MANIFEST}.{uuid.uuid4().hex}")
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(manifest, handle, sort_keys=True)
    os.replace(temporary, os.path.join(folder, MANIFEST))


def save_old(backup: str, root: str, path: str, data: bytes | None,
             mode: int = 0o644) -> None:
    """Record what `path` held before this restore touched it (None: it did not exist).
    The first record wins: a resumed restore must not back up its own half-done work."""
    folder = backup_folder(backup, root)
    manifest = read_manifest(folder)
    manifest["root"] = root
    if path in manifest["files"]:
        return
    if data is None:
        manifest["files"][path] = {"absent": True}
    else:
        name = uuid.uuid4().hex
        with open(os.path.join(folder, name), "wb") as handle:
            handle.write(data)
        manifest["files"][path] = {"file": name, "mode": mode}
    write_manifest(folder, manifest)


# ---- operations ---------------------------------------------------------------------------------

def op_read(request: ReadRequest) -> FileAnswer:
    return read_state(request["root"], request["path"], bool(request.get("follow_last")))


def read_state(root: str, path: str, follow_last: bool = False) -> FileAnswer:
    """What `path` holds. `follow_last` reads through a last symlink (only to compare: a
    write never goes through one); folders above it are never followed."""
    folder, name = walk(root, path, create=False)
    if folder is None:
        return {"kind": "absent"}
    try:
        if follow_last:
            return read_followed(folder, name)
        found = lstat_in(folder, name, path)
        if found is None:
            return {"kind": "absent"}
        return {"kind": "file", "mode": stat.S_IMODE(found.st_mode),
                "base64": base64.b64encode(read_in(folder, name)).decode("ascii")}
    finally:
        os.close(folder)


def read_followed(folder: int, name: str) -> FileAnswer:
    try:
        fd = os.open(name, os.O_RDONLY, dir_fd=folder)
    except FileNotFoundError:
        return {"kind": "absent"}
    with os.fdopen(fd, "rb") as handle:
        found = os.fstat(handle.fileno())
        if not stat.S_ISREG(found.st_mode):
            return {"kind": "other"}
        return {"kind": "file", "mode": stat.S_IMODE(found.st_mode),
                "base64": base64.b64encode(handle.read(READ_CAP + 1)).decode("ascii")}


def replace_in(folder: int, name: str, data: bytes, old: os.stat_result | None,
               mode: int | None) -> None:
    """A new file beside `name` in the opened folder, renamed over it: atomic, no link."""
    temporary = f".{name}.envsnap-new-{uuid.uuid4().hex[:12]}"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                 0o666 if mode is None else mode, dir_fd=folder)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
            elif old is not None:
                os.fchmod(handle.fileno(), stat.S_IMODE(old.st_mode))
                try:
                    os.fchown(handle.fileno(), old.st_uid, old.st_gid)
                except OSError:
                    pass   # another owner's file: ours now, as with any editor's save
        os.rename(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        try:
            os.unlink(temporary, dir_fd=folder)
        except OSError:
            pass
        raise


def write_one(root: str, path: str, data: bytes, mode: int | None,
              backup: str | None, record_absent: bool = False) -> WriteStatus:
    """created, updated or same. With `backup`, what is replaced is saved first; that the
    file did not exist is saved only with `record_absent` (a sitecustomize: the rollback
    removes it). In a checkout the rollback's own checkout and stash deal with new files, and
    a file that is missing only because this restore's checkout removed it must not be
    removed again from the tree the rollback brings back."""
    folder, name = walk(root, path, create=True)
    assert folder is not None
    try:
        old = lstat_in(folder, name, path)
        if old is not None and read_in(folder, name) == data and \
                (mode is None or stat.S_IMODE(old.st_mode) == mode):
            return "same"
        if backup and old is not None:
            save_old(backup, root, path, read_in(folder, name), stat.S_IMODE(old.st_mode))
        elif backup and record_absent:
            save_old(backup, root, path, None)
        replace_in(folder, name, data, old, mode)
        return "updated" if old is not None else "created"
    finally:
        os.close(folder)


def op_write(request: WriteRequest) -> WriteAnswer:
    source = os.path.expanduser(request["source"])
    try:
        with open(source, "rb") as handle:
            data = handle.read()
    finally:
        os.unlink(source)
    return {"status": write_one(request["root"], request["path"], data, None,
                                request.get("backup"), bool(request.get("record_absent")))}


def op_read_many(request: ReadManyRequest) -> ReadManyAnswer:
    """op_read for each path of one root: one python start for a checkout's untracked files."""
    return {"states": {path: read_state(request["root"], path) for path in request["paths"]}}


def op_write_many(request: WriteManyRequest) -> WriteManyAnswer:
    """Each of `files` (path -> base64) written under `root`; every path is checked first,
    so a refused one leaves the others unwritten too."""
    root, files = request["root"], request["files"]
    for path in files:
        read_state(root, path)
    return {"statuses": {path: write_one(root, path, base64.b64decode(data), None,
                                         request.get("backup"))
                         for path, data in files.items()}}


def git_names(request: BackupRepoRequest, *args: str) -> list[str]:
    root = request["root"]
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env.update(request["git_env"])
    done = subprocess.run(["git", "--no-pager", "-C", root] + request["git_flags"] + list(args),
                          env=env, capture_output=True, check=False)
    if done.returncode != 0:
        raise Refused(f"{root}: git {args[0]} failed: "
                      f"{done.stderr.decode('utf-8', 'replace').strip()[-200:]}")
    return [name for name in done.stdout.decode("utf-8", "surrogateescape").split("\0") if name]


def op_backup_repo(request: BackupRepoRequest) -> SavedAnswer:
    """Before a checkout moves: every file in the tree that git does not keep safe and this
    restore may overwrite: untracked ones (the stash takes them, a rollback could not give
    binary ones back), and ignored ones that the target commit tracks or the snapshot's
    patch or untracked files name (checkout and writes replace those without a word)."""
    root, backup = request["root"], request["backup"]
    tracked = set(git_names(request, "ls-files", "-z"))
    wanted = set(git_names(request, "ls-files", "-z", "--others", "--exclude-standard"))
    sha = request.get("sha")
    if sha:
        wanted.update(git_names(request, "ls-tree", "-r", "-z", "--name-only", sha))
    wanted.update(str(name) for name in request.get("names") or [])
    saved = []
    for path in sorted(wanted - tracked):
        try:
            folder, name = walk(root, path, create=False)
        except Refused:
            continue       # never read through a link either; the write step refuses it
        if folder is None:
            continue
        try:
            found = os.stat(name, dir_fd=folder, follow_symlinks=False)
            if stat.S_ISREG(found.st_mode):
                save_old(backup, root, path, read_in(folder, name), stat.S_IMODE(found.st_mode))
                saved.append(path)
        except FileNotFoundError:
            pass
        finally:
            os.close(folder)
    return {"saved": saved}


def op_backup_file(request: BackupFileRequest) -> SavedAnswer:
    """One file as it is now, or that it is absent (so a rollback deletes it again)."""
    root, path = request["root"], request["path"]
    state = read_state(root, path)
    data = base64.b64decode(state["base64"]) if state["kind"] == "file" else None
    save_old(request["backup"], root, path, data, int(state.get("mode") or 0o644))
    return {"saved": [path] if data is not None else []}


def op_note_stash(request: NoteStashRequest) -> NoteStashAnswer:
    """A submodule's work, stashed in its own repository before it moved: the stash's sha,
    kept beside the files saved for that root so the rollback of this restore applies it.
    The first note wins, as for files: a resumed restore must not name its own stash."""
    root, stash = request["root"], str(request["stash"])
    folder = backup_folder(request["backup"], root)
    manifest = read_manifest(folder)
    manifest["root"] = root
    manifest.setdefault("stash", stash)
    write_manifest(folder, manifest)
    return {"stash": manifest["stash"]}


def remove_one(root: str, path: str, backup: str | None) -> bool:
    folder, name = walk(root, path, create=False)
    if folder is None:
        return False
    try:
        old = lstat_in(folder, name, path)
        if old is None:
            return False
        if backup:
            save_old(backup, root, path, read_in(folder, name), stat.S_IMODE(old.st_mode))
        os.unlink(name, dir_fd=folder)
        return True
    finally:
        os.close(folder)


def op_remove(request: RemoveRequest) -> RemoveAnswer:
    """One file deleted, what it held saved in `backup` first."""
    return {"removed": remove_one(request["root"], request["path"], request.get("backup"))}


def op_put_back(request: PutBackRequest) -> PutBackAnswer:
    """A rollback: the files an earlier restore saved for `root`, written back exactly (and
    the ones it created, removed), each backed up in turn into this run's own backup."""
    root = request["root"]
    folder = os.path.join(os.path.expanduser(request["source"]),
                          hashlib.sha256(root.encode("utf-8", "surrogateescape")).hexdigest()[:16])
    manifest = read_manifest(folder)
    dry = bool(request.get("dry"))      # check mode: say what would change, change nothing
    restored, removed = [], []
    for path, entry in sorted(manifest["files"].items()):
        state = read_state(root, path)
        if entry.get("absent"):
            if state["kind"] == "file" and (dry or remove_one(root, path, request.get("backup"))):
                removed.append(path)
            continue
        with open(os.path.join(folder, os.path.basename(str(entry["file"]))), "rb") as handle:
            data = handle.read()
        mode = int(entry.get("mode") or 0o644)
        if state["kind"] == "file" and base64.b64decode(state["base64"]) == data and \
                state["mode"] == mode:
            continue
        if not dry:
            write_one(root, path, data, mode, request.get("backup"))
        restored.append(path)
    return {"restored": restored, "removed": removed, "stash": manifest.get("stash")}


def op_site_dirs(_request: SiteDirsRequest) -> SiteDirsAnswer:
    """The folders this python itself reads sitecustomize from (as the capture agent sees
    them: site-packages, then the user site), and the sitecustomize it would load now."""
    folders = list(getattr(site, "getsitepackages", lambda: [])())
    if site.ENABLE_USER_SITE:
        folders.append(site.getusersitepackages())
    sys.path[:] = sys.path[1:]     # `-c` put the working folder first: not the target's
    spec = importlib.util.find_spec("sitecustomize")
    found = getattr(spec, "origin", None) if spec else None
    folders = [folder for folder in folders if os.path.isdir(folder)]
    own_dirs = [folder for folder in folders if own(folder)]
    return {"site_dirs": folders, "own_dirs": own_dirs,
            "shadows_own": bool(found and not own(found) and own_dirs
                                and search_index(os.path.dirname(found))
                                < min(search_index(folder) for folder in own_dirs)),
            "sitecustomize": found,
            "sitecustomize_real": os.path.realpath(found) if found else None,
            "sitecustomize_own": bool(found and own(found)),
            "version": f"{sys.version_info[0]}.{sys.version_info[1]}"}


def search_index(folder: str) -> int:
    """Where `folder` is on sys.path (import looks there in this order); past the end if not."""
    entries = [os.path.abspath(entry) for entry in sys.path if entry]
    folder = os.path.abspath(folder)
    return entries.index(folder) if folder in entries else len(entries)


# A prefix every python of the host shares: what is written there is host-wide.
SYSTEM_PREFIXES = ("/", "/usr", "/usr/local")


def own(path: str) -> bool:
    """`path` is this python's own (inside its prefix, a venv's folder, a link leading
    nowhere else), not a file every python of the host loads."""
    prefix = os.path.realpath(sys.prefix)
    if prefix in SYSTEM_PREFIXES:
        return False
    inside = (os.path.abspath(path) + "/").startswith(os.path.abspath(sys.prefix) + "/")
    return inside and (os.path.realpath(path) + "/").startswith(prefix + "/")


# Each operation reads the request the controller wrote for it (its `op`).
OPERATIONS: dict[str, Callable[[Any], Answer]] = {
    "read": op_read, "write": op_write, "read_many": op_read_many, "write_many": op_write_many,
    "backup_repo": op_backup_repo, "backup_file": op_backup_file, "put_back": op_put_back,
    "remove": op_remove, "note_stash": op_note_stash, "site_dirs": op_site_dirs}


def main(request_path: str) -> int:
    try:
        with open(request_path, encoding="utf-8") as handle:
            request = json.load(handle)
    finally:
        os.unlink(request_path)
    answer: Answer
    try:
        answer = OPERATIONS[request["op"]](request)
    except Refused as exc:
        answer = {"refused": str(exc)}
    except OSError as exc:
        sys.stderr.write(f"{exc.filename or ''}: {exc.strerror}\n")
        return 1
    sys.stdout.write(json.dumps(answer) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
