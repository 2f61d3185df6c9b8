"""The write policy on the controller side: every file restore or explain writes from a
snapshot, reads back, backs up or puts back goes through treefile_host.py, run by the
host's python.

A path is a trusted root (a checkout's top folder as git reports it, a site-packages folder
as the host's python reports it) plus a relative path from the snapshot, which the host
side walks with O_NOFOLLOW, never under `.git`, never outside. A refusal is TreeRefused.
Requests and answers are treefile_host.py's TypedDicts, the one definition of the wire.
"""
from __future__ import annotations

import base64
import binascii
import functools
import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from envsnap.errors import HostError
from envsnap.hostops.files import FileState
from envsnap.hostops.git import GIT_ENV
from envsnap.hostops.git import flags as git_flags
from envsnap.hostops.hostwide import host_wide_words
from envsnap.hostops.shell import Shell, last_line, quote_path, upload
from envsnap.hostops.treefile_host import (
    Answer,
    FileAnswer,
    NoteStashAnswer,
    PutBackAnswer,
    ReadManyAnswer,
    RemoveAnswer,
    Request,
    SavedAnswer,
    SiteDirsAnswer,
    WriteAnswer,
)
from envsnap.shape import is_object

BACKUP_DIR = "~/.cache/envsnap/restore-backup"


class TreeRefused(Exception):
    """The write policy refuses this path; the message says which and why."""


@functools.lru_cache(maxsize=1)
def host_source() -> str:
    return (Path(__file__).parent / "treefile_host.py").read_text(encoding="utf-8")


def backup_dir(rollback_label: str) -> str:
    """Where a restore keeps what it overwrites: named after its rollback point, so that
    `envsnap restore <rollback point>` finds them."""
    return f"{BACKUP_DIR}/{rollback_label}"


def drop_backup(shell: Shell, backup: str) -> None:
    """A backup folder (`backup_dir`) removed once what it kept is back in place."""
    shell.sh(f"rm -rf {quote_path(backup)}")


def call(shell: Shell, request: Request) -> Answer:
    """Run one operation on the host; its JSON answer, or TreeRefused. The answer is checked
    to be an object here, once; each caller reads the fields of its operation's answer and
    converts them (the host's python sent them, not this process)."""
    request_path = upload(shell, json.dumps(request).encode("utf-8"), "treefile")
    command = (f"{shlex.quote(shell.host.python)} -c {shlex.quote(host_source())} "
               f'"$HOME"/{shlex.quote(request_path[2:])}')
    result = shell.sh(command)
    lines = result.stdout.strip().splitlines()
    if result.exit_code != 0 or not lines:
        what = str(request.get("path") or request.get("root") or "")
        raise HostError(f"{shell.host.name}: {request['op']} {what} failed: "
                        f"{last_line(result.stderr) or f'exit {result.exit_code}'}")
    try:
        answer = json.loads(lines[-1])
    except ValueError:
        answer = None
    if not is_object(answer):
        raise HostError(f"{shell.host.name}: unreadable answer from the host's python: "
                        f"{lines[-1][:200]}")
    if "refused" in answer:
        raise TreeRefused(str(answer["refused"]))
    return cast("Answer", answer)


def file_state(shell: Shell, where: str, answer: FileAnswer) -> FileState:
    if answer.get("kind") != "file":
        return FileState("absent")
    try:
        return FileState("file", base64.b64decode(str(answer["base64"])),
                         f"{int(answer['mode']):o}")
    except (binascii.Error, KeyError, ValueError):
        raise HostError(f"{shell.host.name}: unreadable content of {where}") from None


def read_many(shell: Shell, root: str, paths: list[str]) -> dict[str, FileState]:
    """read() of many paths under one root, in one call on the host."""
    answer = cast("ReadManyAnswer", call(shell, {"op": "read_many", "root": root,
                                                  "paths": paths}))
    states = answer.get("states")
    if not (is_object(states) and all(map(is_object, states.values()))):
        raise HostError(f"{shell.host.name}: unreadable answer from the host's python")
    found = cast("dict[str, FileAnswer]", states)   # what file_state reads, checked there
    return {path: file_state(shell, f"{root}/{path}", found.get(path) or {"kind": "absent"})
            for path in paths}


def write_many(shell: Shell, root: str, files: dict[str, bytes], backup: str | None) -> None:
    """write() of many files under one root, in one call; all refused if one is."""
    call(shell, {"op": "write_many", "root": root, "backup": backup,
                 "files": {path: base64.b64encode(data).decode("ascii")
                           for path, data in files.items()}})


def read(shell: Shell, root: str, path: str, follow_last: bool = False) -> FileState:
    """What root/path holds; TreeRefused where a write would be refused. follow_last: read
    through a last symlink, only to compare (a write never follows one)."""
    answer = cast("FileAnswer", call(shell, {"op": "read", "root": root, "path": path,
                                             "follow_last": follow_last}))
    return file_state(shell, f"{root}/{path}", answer)


def write(shell: Shell, root: str, path: str, data: bytes, backup: str | None,
          record_absent: bool = False) -> str:
    """created, updated or same; what it replaced is saved in `backup` first, and with
    record_absent that nothing was there (so that a rollback removes the file)."""
    source = upload(shell, data, "content")
    answer = cast("WriteAnswer", call(shell, {"op": "write", "root": root, "path": path,
                                              "source": source, "backup": backup,
                                              "record_absent": record_absent}))
    return str(answer.get("status"))


def remove(shell: Shell, root: str, path: str, backup: str | None) -> bool:
    """root/path deleted (False: there was none); what it held saved in `backup` first."""
    answer = cast("RemoveAnswer", call(shell, {"op": "remove", "root": root, "path": path,
                                               "backup": backup}))
    return bool(answer.get("removed"))


def backup_repo(shell: Shell, root: str, sha: str | None, names: list[str],
                backup: str) -> list[str]:
    # git's flags come from the one place that builds them (hostops/git.py, agent/gitsafe.py):
    # listing files is a read, with every configured command switched off
    answer = cast("SavedAnswer", call(shell, {"op": "backup_repo", "root": root, "sha": sha,
                                              "names": names, "backup": backup,
                                              "git_flags": git_flags(shell, root, ("ls-files",)),
                                              "git_env": dict(GIT_ENV)}))
    return [str(name) for name in answer.get("saved") or []]


def backup_file(shell: Shell, root: str, path: str, backup: str) -> None:
    call(shell, {"op": "backup_file", "root": root, "path": path, "backup": backup})


def note_stash(shell: Shell, root: str, stash: str, backup: str) -> str:
    """Record a submodule's stash in the restore's backup folder; the stash kept there (the
    first one noted) is returned."""
    answer = cast("NoteStashAnswer", call(shell, {"op": "note_stash", "root": root,
                                                  "stash": stash, "backup": backup}))
    return str(answer.get("stash") or stash)


@dataclass(frozen=True)
class PutBack:
    restored: list[str]
    removed: list[str]
    stash: str | None = None     # a submodule's work the restore being undone had stashed


def put_back(shell: Shell, root: str, source: str, backup: str | None,
             dry: bool = False) -> PutBack:
    """The files saved in `source` for `root` written back (`dry`: which would be)."""
    answer = cast("PutBackAnswer", call(shell, {"op": "put_back", "root": root,
                                                "source": source, "backup": backup,
                                                "dry": dry}))
    stash = answer.get("stash")
    return PutBack([str(name) for name in answer.get("restored") or []],
                   [str(name) for name in answer.get("removed") or []],
                   str(stash) if isinstance(stash, str) and stash else None)


@dataclass(frozen=True)
class SitePython:
    """The folders a python reads sitecustomize from, which of them are its own (inside its
    venv, no link out), and the sitecustomize it loads now, its real path and whether it is
    its own; any other is host-wide: every python of that version on the host loads it."""

    site_dirs: list[str]
    sitecustomize: str | None
    own_dirs: list[str] = field(default_factory=list)
    sitecustomize_real: str | None = None
    sitecustomize_own: bool = False
    version: str = "3"
    shadows_own: bool = False     # the one loaded now, not its own, comes before its own folders

    @property
    def host_wide_words(self) -> str:
        return host_wide_words(self.version)


def site_python(shell: Shell) -> SitePython:
    answer = cast("SiteDirsAnswer", call(shell, {"op": "site_dirs"}))
    found, real = answer.get("sitecustomize"), answer.get("sitecustomize_real")
    return SitePython([str(folder) for folder in answer.get("site_dirs") or []],
                      str(found) if found else None,
                      [str(folder) for folder in answer.get("own_dirs") or []],
                      str(real) if real else None, answer.get("sitecustomize_own") is True,
                      str(answer.get("version") or "3"), answer.get("shadows_own") is True)
