"""The task modules a playbook can name (`git:`, `copy:`, `envsnap_capture:`, ...), by name.

The registry stands beside the tasks/ package rather than in its `__init__`: a task module
that uses a sibling (`from envsnap.playbook.tasks import treefile`) then reads a package that
imports nothing, never the registry that imports every module back.
"""
from __future__ import annotations

from typing import Any

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
from envsnap.playbook.tasks.base import Module

# Each module checks its own TypedDict of arguments; the runner hands on what normalize made.
MODULES: dict[str, Module[Any]] = {module.name: module for module in (
    git.MODULE, files.COPY, files.TEMPLATE, env_file.MODULE, shell.MODULE, facts.CAPTURE,
    facts.ASSERT_FACTS, bench.MODULE, control.FAIL, control.DEBUG, sitecustomize.MODULE)}
