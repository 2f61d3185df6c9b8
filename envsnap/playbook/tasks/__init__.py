"""Task modules for playbooks, by name. See base.py for what a module is.

Restore (envsnap/restore/run.py) uses them only through playbooks/restore.yml, like any
playbook. Bisect (envsnap/bisect/tree.py) calls the git helpers in gitcmd.py and gitpatch.py
directly, without the playbook engine.
"""
from __future__ import annotations

from envsnap.playbook.tasks import (
    bench,
    control,
    env_file,
    facts,
    files,
    git,
    shell,
    sitecustomize,
)
from envsnap.playbook.tasks.base import ArgError, Context, Module, ModuleResult

MODULES: dict[str, Module] = {module.name: module for module in (
    git.MODULE, files.COPY, files.TEMPLATE, env_file.MODULE, shell.MODULE, facts.CAPTURE,
    facts.ASSERT_FACTS, bench.MODULE, control.FAIL, control.DEBUG, sitecustomize.MODULE)}

__all__ = ["MODULES", "ArgError", "Context", "Module", "ModuleResult"]
