"""envsnap installed from its wheel, not from the checkout: every module and the playbooks
travel in it, and `envsnap restore` finds restore.yml there."""
from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import ROOT, Cli
from helpers.gitrepos import Story
from helpers.restorestory import capture_good, moved_and_dirty

# one worker runs them all (tests/run.sh runs parallel workers):
# the module's wheel is built and installed once
pytestmark = pytest.mark.xdist_group("packaging")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # built from a copy: setuptools would reuse a stale build/ folder of the checkout
    source, folder = tmp_path_factory.mktemp("source"), tmp_path_factory.mktemp("wheel")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for name in ("envsnap", "playbooks"):
        shutil.copytree(ROOT / name, source / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w",
                            str(folder), str(source)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    (path,) = folder.glob("envsnap-*.whl")
    return path


def test_the_wheel_holds_every_module_and_playbook(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    # every file: modules, the Ansible collection's source, playbooks, the Slurm script
    modules = {p.relative_to(ROOT).as_posix() for p in shipped(ROOT / "envsnap")}
    playbooks = {"envsnap/" + p.relative_to(ROOT).as_posix() for p in shipped(ROOT / "playbooks")}
    assert "envsnap/playbooks/restore.yml" in playbooks
    assert "envsnap/playbooks/slurm/capture.sbatch" in playbooks
    assert "envsnap/ansible/examples/watch.yml" in modules
    # the prolog and epilog travel runnable: slurm.conf names them as they are installed
    archive = zipfile.ZipFile(wheel)
    for script in ("watch-prolog.sh", "watch-epilog.sh", "watch-job.sh"):
        name = f"envsnap/playbooks/slurm/{script}"
        assert name in playbooks and (archive.getinfo(name).external_attr >> 16) & 0o111
    assert "envsnap/ansible/collection/galaxy.yml" in modules
    assert modules - names == set() and playbooks - names == set()


def shipped(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"]


def test_restore_from_an_installed_wheel_finds_its_playbook(wheel: Path, cli: Cli,
                                                            tmp_path: Path) -> None:
    site = tmp_path / "site"
    installed = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                                "--target", str(site), str(wheel)], capture_output=True,
                               text=True)
    assert installed.returncode == 0, installed.stderr
    cli.env["PYTHONPATH"] = str(site)
    where = subprocess.run([sys.executable, "-c", "import envsnap; print(envsnap.__file__)"],
                           env=cli.env, cwd=tmp_path, capture_output=True, text=True)
    assert where.stdout.startswith(str(site)), where.stdout + where.stderr
    story = Story(tmp_path / "story")
    capture_good(cli, story, "local")
    moved_and_dirty(story)
    result = cli("restore", "good", "--check")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "plan for local (check mode: nothing changed)" in result.stdout


def test_version_from_an_installed_wheel_names_no_commit(wheel: Path, cli: Cli,
                                                         tmp_path: Path) -> None:
    """An installed envsnap is its release: no checkout holds it (envsnap/version.py)."""
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                    str(site), str(wheel)], check=True, capture_output=True)
    said = subprocess.run([sys.executable, "-m", "envsnap", "--version"], capture_output=True,
                          env=dict(cli.env, PYTHONPATH=str(site)), cwd=tmp_path, text=True)
    assert (said.returncode, said.stdout, said.stderr) == (0, "envsnap 0.1.0\n", "")


def test_restore_from_a_checkout_that_is_not_installed(cli: Cli, tmp_path: Path) -> None:
    """`python -m envsnap` from a bare checkout (as on a GPU host one has only copied it to):
    no package envsnap.playbooks exists there, and restore reads the checkout's folder."""
    checkout = tmp_path / "checkout"
    for name in ("envsnap", "playbooks"):
        shutil.copytree(ROOT / name, checkout / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    site_packages = next(p for p in map(Path, sys.path) if p.name == "site-packages")
    # -S: no .pth files, so the editable install of the checkout under test is not seen
    cli.env["PYTHONPATH"] = f"{checkout}:{site_packages}"
    story = Story(tmp_path / "story")
    capture_good(cli, story, "local")
    moved_and_dirty(story)
    result = subprocess.run([sys.executable, "-S", "-m", "envsnap", "restore", "good", "--check"],
                            env=cli.env, cwd=cli.cwd, capture_output=True, text=True)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "plan for local (check mode: nothing changed)" in result.stdout
