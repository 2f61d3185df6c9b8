"""Task modules for playbooks, by name. See base.py for what a module is.

A task is a thin adapter over envsnap.hostops, which does the work on the host: it reads
its arguments, honours check and diff mode, and says what it did. Restore
(envsnap/restore/run.py) uses them only through playbooks/restore.yml, like any playbook;
bisect and explain call hostops directly, without the playbook engine.
"""
from __future__ import annotations

from envsnap.errors import ArgError
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
from envsnap.playbook.tasks.base import Context, Module, ModuleResult

MODULES: dict[str, Module] = {module.name: module for module in (
    git.MODULE, files.COPY, files.TEMPLATE, env_file.MODULE, shell.MODULE, facts.CAPTURE,
    facts.ASSERT_FACTS, bench.MODULE, control.FAIL, control.DEBUG, sitecustomize.MODULE)}

__all__ = ["MODULES", "ArgError", "Context", "Module", "ModuleResult"]
