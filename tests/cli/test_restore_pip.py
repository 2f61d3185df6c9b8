"""`envsnap restore --pip`: drifted packages are pinned back with the host's own pip."""
from __future__ import annotations

import subprocess
import venv
from pathlib import Path

import pytest
from conftest import Cli
from helpers.wheels import make_wheel


@pytest.fixture
def ml_env(tmp_path: Path) -> Path:
    venv.EnvBuilder(with_pip=True, symlinks=True).create(tmp_path / "ml-env")  # offline
    python = tmp_path / "ml-env" / "bin" / "python3"
    make_wheel(tmp_path, "1.0")
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-index",
                    "--find-links", str(tmp_path), "tinypkg==1.0"], check=True)
    make_wheel(tmp_path, "2.0")
    return python


def installed_version(python: Path) -> str:
    return subprocess.run([str(python), "-c", "import tinypkg; print(tinypkg.VERSION)"],
                          capture_output=True, text=True, check=True).stdout.strip()


def test_pip_pins_a_drifted_package_back(cli: Cli, ml_env: Path, tmp_path: Path) -> None:
    assert cli("capture", "local", "--label", "good", "--python", str(ml_env)).returncode == 0
    subprocess.run([str(ml_env), "-m", "pip", "install", "-q", "--no-index",
                    "--find-links", str(tmp_path), "tinypkg==2.0"], check=True)
    assert installed_version(ml_env) == "2.0"

    without = cli("restore", "good", "--check")
    assert without.returncode == 1
    assert "packages.tinypkg: now 2.0, snapshot 1.0" in without.stdout and "--pip" in without.stdout

    # The host's pip installs from where the host is told to (here: a folder, no index).
    cli.env.update(PIP_NO_INDEX="1", PIP_FIND_LINKS=str(tmp_path))
    plan = cli("restore", "good", "--check", "--pip")
    assert "pip install tinypkg==1.0" in plan.stdout, plan.stdout
    assert installed_version(ml_env) == "2.0"          # --check changed nothing
    applied = cli("restore", "good", "--yes", "--pip")
    assert installed_version(ml_env) == "1.0", applied.stdout + applied.stderr
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert "still different" not in applied.stdout
