"""Pythons for the tests whose answer depends on which sitecustomize.py runs.

Debian and Ubuntu ship a sitecustomize.py in the standard library's own folder
(/usr/lib/python3.X/sitecustomize.py, a link into /etc), and the standard library comes before
site-packages on sys.path: a venv made from that Python never runs a sitecustomize.py of its
own. A test that needs its venv's file to run makes that true on every Python with
`venv_with_own_sitecustomize` (a startup .pth line puts the venv's site-packages first, as
site.py runs .pth lines before it imports sitecustomize); a test of the shadowed case itself
takes `shadowing_python` (Debian's own /usr/bin/python3) and one of the case where the venv's
file runs takes `unshadowed_python`.
"""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

OWN_FIRST = "00-own-sitecustomize-first.pth"


def stdlib_sitecustomize(python: str) -> str | None:
    """The sitecustomize.py in `python`'s standard library folder, if it has one."""
    found = subprocess.run([python, "-c", "import os, sysconfig; p = os.path.join("
                            "sysconfig.get_paths()['stdlib'], 'sitecustomize.py'); "
                            "print(p if os.path.exists(p) else '')"],
                           capture_output=True, text=True, check=True).stdout.strip()
    return found or None


def make_venv(folder: Path, base: str = sys.executable) -> Path:
    """A venv without pip made from `base`: its python."""
    subprocess.run([base, "-m", "venv", "--without-pip", str(folder)], check=True)
    return folder / "bin" / "python"


def site_packages(python: Path) -> Path:
    return Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig."
                                "get_path('purelib'))"], capture_output=True, text=True,
                               check=True).stdout.strip())


def venv_with_own_sitecustomize(folder: Path, base: str = sys.executable) -> Path:
    """A venv (of the Python running the tests) whose own site-packages/sitecustomize.py is
    the one that runs, on every Python: where the standard library's would shadow it, a
    startup .pth line (OWN_FIRST) moves site-packages to the front of sys.path first."""
    python = make_venv(folder, base)
    own_sitecustomize_first(python)
    return python


def own_sitecustomize_first(python: Path) -> None:
    """Where the standard library's sitecustomize would shadow the venv's, a startup .pth
    line (OWN_FIRST) moves the venv's site-packages to the front of sys.path."""
    site = site_packages(python)
    if stdlib_sitecustomize(str(python)):
        (site / OWN_FIRST).write_text(
            f"import sys; p = {str(site)!r}; sys.path.insert(0, sys.path.pop(sys.path.index(p)))"
            " if p in sys.path else None\n")


def candidates() -> list[str]:
    found = ["/usr/bin/python3", "/usr/local/bin/python3", *sorted(glob.glob(
        os.path.expanduser("~/.pyenv/versions/3.*/bin/python3")), reverse=True)]
    on_path = shutil.which("python3")
    return [*found, *([on_path] if on_path else [])]


def shadowing_python() -> str:
    """Debian's or Ubuntu's own python3, whose stdlib sitecustomize.py shadows a venv's."""
    for python in candidates():
        if os.access(python, os.X_OK) and stdlib_sitecustomize(python):
            return python
    pytest.skip("no python3 here ships a sitecustomize.py in its standard library")


def unshadowed_python() -> str:
    """A python3 (3.8 or later) whose venvs run their own sitecustomize.py."""
    for python in candidates():
        if os.access(python, os.X_OK) and not stdlib_sitecustomize(python) and subprocess.run(
                [python, "-c", "import sys; assert sys.version_info >= (3, 8)"]).returncode == 0:
            return python
    pytest.skip("every python3 here ships a sitecustomize.py in its standard library")
