"""The suite does not depend on which python3 comes first on PATH.

`local` runs the agent with PATH's python3 unless told otherwise, and what that python3 is
changes what a capture records: Debian's own /usr/bin/python3 (first on PATH on a fresh
Debian or Ubuntu box, and in .ci/run) loads its standard library's sitecustomize.py, which a
restore must then neither list nor write; a pyenv or conda python3 loads none. The tests
that read PATH's python3 run here twice, once with each kind first, and pass both times.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.paths import ROOT
from helpers.pythons import shadowing_python, unshadowed_python

# tests that capture `local` with PATH's python3 and look at what a restore would write
SAMPLE = ["tests/cli/test_provenance.py::test_an_unsigned_snapshot_is_foreign",
          "tests/cli/test_cli_show.py"]


@pytest.mark.parametrize("first", [shadowing_python, unshadowed_python],
                         ids=["debians-python3-first", "another-python3-first"])
def test_the_suite_passes_whichever_python3_comes_first_on_path(
        tmp_path: Path, first: Callable[[], str]) -> None:
    python = first()
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "python3").symlink_to(python)
    env = {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"}
    # --basetemp of its own: without one, this pytest deletes the folders of older runs
    # (all but the three newest), which after a whole suite's run takes long
    ran = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p",
                          "no:cacheprovider", f"--basetemp={tmp_path / 'inner'}", *SAMPLE],
                         cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=540)
    assert ran.returncode == 0, ran.stdout[-4000:] + ran.stderr[-2000:]
    assert shutil.which("python3", path=env["PATH"]) == str(folder / "python3")
