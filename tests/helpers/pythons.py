"""What the Python running the tests is like, where a test's answer depends on it.

Debian and Ubuntu ship a sitecustomize.py in the standard library's own folder
(/usr/lib/python3.X/sitecustomize.py, the apport hook). The standard library comes before
site-packages on sys.path, so a venv made from that Python never runs a sitecustomize.py of
its own: the stdlib one is imported instead. envsnap does not yet say so (issue 26: stock
Debian and Ubuntu Python as a first-class host), and the tests that plant a sitecustomize in
a venv fail there for that reason alone. They are marked with SHADOWED_SITECUSTOMIZE, strict:
once envsnap handles that Python, they pass and the mark must go.
"""
from __future__ import annotations

import sysconfig
from pathlib import Path

import pytest


def stdlib_sitecustomize() -> Path | None:
    """The sitecustomize.py in this Python's standard library folder, if it has one."""
    path = Path(sysconfig.get_paths()["stdlib"]) / "sitecustomize.py"
    return path if path.exists() else None


SHADOWED_SITECUSTOMIZE = pytest.mark.xfail(
    stdlib_sitecustomize() is not None, strict=True,
    reason=f"{stdlib_sitecustomize()} shadows a venv's sitecustomize.py (issue 26)")
