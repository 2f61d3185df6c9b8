"""Two paths to one interpreter binary are one interpreter, through the real CLI: Ansible
discovers `/usr/bin/python3.11` where `envsnap capture` runs `python3`, and a snapshot of each
must not differ on it (pairwise and in a fleet); a venv of that binary still does."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import Cli


def two_names_of_one_python(tmp_path: Path) -> tuple[str, str]:
    """A python and a second path to the very same file (a link, as python3 -> python3.11)."""
    real = os.path.realpath(sys.executable)
    link = tmp_path / "bin" / "python3-another-name"
    link.parent.mkdir()
    link.symlink_to(real)
    return real, str(link)


def test_another_path_to_the_same_python_is_no_change(cli: Cli, tmp_path: Path) -> None:
    real, link = two_names_of_one_python(tmp_path)
    assert cli("capture", "local", "--python", real, "--label", "by-real").returncode == 0
    assert cli("capture", "local", "--python", link, "--label", "by-link").returncode == 0
    result = cli("diff", "by-real", "by-link")
    assert result.returncode == 0, result.stdout
    assert "executable" not in result.stdout
    fleet = cli("diff", "--fleet", "by-real", "by-link")
    assert fleet.returncode == 0, fleet.stdout
    assert "executable" not in fleet.stdout


def test_a_venv_of_that_python_is_still_another_environment(cli: Cli, tmp_path: Path) -> None:
    real, _ = two_names_of_one_python(tmp_path)
    venv = tmp_path / "venv"
    subprocess.run([real, "-m", "venv", "--without-pip", str(venv)], check=True)
    assert cli("capture", "local", "--python", real, "--label", "base").returncode == 0
    assert cli("capture", "local", "--python", str(venv / "bin" / "python"),
               "--label", "in-venv").returncode == 0
    result = cli("diff", "base", "in-venv")
    assert result.returncode == 1
    assert "python prefix" in result.stdout or "python venv" in result.stdout, result.stdout
