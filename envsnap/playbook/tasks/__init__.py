"""Task modules for playbooks, by name. See base.py for what a module is.

restore.py can call a module's functions directly (tasks.git.stash(ctx, top, args), ...)
or through a playbook; both get the same checks, check mode and results.
"""
from __future__ import annotations

from envsnap.playbook.tasks import bench, control, env_file, facts, files, git, shell
from envsnap.playbook.tasks.base import ArgError, Context, Module, ModuleResult

MODULES: dict[str, Module] = {module.name: module for module in (
    git.MODULE, files.COPY, files.TEMPLATE, env_file.MODULE, shell.MODULE, facts.CAPTURE,
    facts.ASSERT_FACTS, bench.MODULE, control.FAIL, control.DEBUG)}

__all__ = ["MODULES", "ArgError", "Context", "Module", "ModuleResult"]
