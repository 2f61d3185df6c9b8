"""`envsnap --version`: the commit of the git checkout envsnap runs from, read from .git's
files as real git wrote them (a branch, packed refs, a detached HEAD, a worktree), and the
release alone where there is no checkout (an installed wheel: tests/e2e/test_packaging.py)."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, Cli
from helpers.gitrepos import Repo, git_env, init

from envsnap import __version__, version


def with_envsnap(folder: Path) -> Path:
    """`folder` holding a copy of the envsnap package under test, as a checkout holds it."""
    shutil.copytree(ROOT / "envsnap", folder / "envsnap",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return folder


def said(folder: Path, cli: Cli) -> str:
    """What `python -m envsnap --version` prints, run from the envsnap copied into `folder`."""
    env = dict(cli.env, PYTHONPATH=str(folder))
    done = subprocess.run([sys.executable, "-m", "envsnap", "--version"], cwd=cli.cwd, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return done.stdout


def test_a_checkout_names_its_commit(cli: Cli, tmp_path: Path) -> None:
    repo = init(tmp_path / "checkout", git_env(tmp_path))
    with_envsnap(repo.path)
    repo.commit("first", {"README.md": "envsnap\n"})
    head = repo.commit("second", {"README.md": "envsnap, again\n"})
    assert said(repo.path, cli) == f"envsnap {__version__} (commit {head[:12]})\n"


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Repo:
    """A real git checkout that envsnap takes for its own (the package's folder's parent)."""
    repo = init(tmp_path / "checkout", git_env(tmp_path))
    monkeypatch.setattr(version, "CHECKOUT", repo.path)
    return repo


def test_packed_refs_a_detached_head_and_a_worktree(cli: Cli, checkout: Repo,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    expected = f"envsnap {__version__} (commit {{}})\n"
    first = checkout.commit("first", {"a": "1\n"})
    assert cli("--version").stdout == expected.format(first[:12])
    second = checkout.commit("second", {"a": "2\n"})
    checkout.git("pack-refs", "--all")   # refs/heads/main now only in packed-refs
    assert not (checkout.path / ".git" / "refs" / "heads" / "main").exists()
    assert cli("--version").stdout == expected.format(second[:12])
    checkout.git("checkout", "-q", "--detach", first)
    assert cli("--version").stdout == expected.format(first[:12])
    checkout.git("checkout", "-q", "main")
    checkout.git("worktree", "add", "-q", "-b", "side", "../side")
    side = Repo(checkout.path.parent / "side", checkout.env)
    assert (side.path / ".git").is_file()   # `gitdir: ...`, the branch in the shared folder
    third = side.commit("third", {"a": "3\n"})
    monkeypatch.setattr(version, "CHECKOUT", side.path)
    assert cli("--version").stdout == expected.format(third[:12])


def test_no_checkout_or_one_that_cannot_be_read_this_way_gives_the_release(
        cli: Cli, checkout: Repo) -> None:
    plain = f"envsnap {__version__}\n"
    assert cli("--version").stdout == plain   # an unborn branch: no commit yet
    (checkout.path / ".git" / "HEAD").write_text("ref: ../../outside\n")
    assert cli("--version").stdout == plain
    shutil.rmtree(checkout.path / ".git")
    assert cli("--version").stdout == plain
