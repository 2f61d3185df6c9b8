"""The `git` task's arguments, shared by its actions (git.py and the action modules beside it).

Each value is what the playbook gave after templating (`object`): restore.yml passes the
snapshot's records (`patch`, `staged`: the repo's uncommitted record; `files`: its untracked
files; `submodules`: its submodules) and each action checks what it reads.
"""
from __future__ import annotations

from typing import TypedDict


class _Required(TypedDict):
    repo: object         # the checkout on the host: absolute or ~/...
    action: object       # one of git.ACTIONS


class GitArgs(_Required, total=False):
    sha: object          # the commit to be at
    branch: object       # its branch at capture, taken when it still points there
    fetch: object        # fetch from the remotes when the commit is missing
    patch: object        # the uncommitted changes to apply, or to verify
    staged: object       # their staged part
    base: object         # the commit the patch was taken on
    message: object      # a stash's message
    files: object        # untracked files, by path
    backup: object       # the restore's backup folder on the host
    source: object       # the backup folder of the restore being undone
    submodules: object   # the snapshot's submodules, by path
