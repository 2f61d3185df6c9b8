"""`envsnap restore` of a checkout with a submodule, and `restore --abort`, through the real CLI
on real git repositories (a superproject with a local file submodule)."""
from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import Cli
from helpers.folded import words
from helpers.gitrepos import Repo, git_env, init

SUB = "third_party/lib"


@dataclass
class Project:
    top: Repo
    sub: Repo
    lib_commits: list[str]


@pytest.fixture
def project(tmp_path: Path) -> Project:
    home = tmp_path / "home-git"
    home.mkdir()
    env = git_env(home)
    lib = init(tmp_path / "lib", env)
    commits = [lib.commit(f"lib {n}", {"kernel.cu": f"{n}\n"}) for n in (1, 2, 3)]
    top = init(tmp_path / "top", env)
    top.commit("top", {"README.md": "top\n"})
    lib.git("checkout", "-q", commits[1])     # the superproject records lib 2
    top.git("-c", "protocol.file.allow=always", "submodule", "add", "-q",
            f"file://{lib.path}", SUB)
    top.commit("add lib")
    return Project(top, Repo(top.path / SUB, env), commits)


def capture(cli: Cli, label: str, project: Project) -> None:
    result = cli("capture", "local", "--label", label, "--repo", str(project.top.path))
    assert result.returncode == 0, result.stdout + result.stderr


def tree_bytes(root: Path) -> dict[str, str]:
    """Every file under root (but .git), by its sha256: byte-identical or not."""
    found = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in files:
            path = Path(folder) / name
            if name != ".git":
                found[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def rollback_label(cli: Cli) -> str:
    (label,) = sorted(p.stem for p in Path(cli.env["ENVSNAP_STORE"]).glob("pre-restore-*.yaml"))
    return label


def test_a_moved_submodule_alone_is_restored_and_rolled_back(cli: Cli,
                                                             project: Project) -> None:
    good = project.sub.head()
    capture(cli, "good", project)
    project.sub.git("checkout", "-q", project.lib_commits[2])   # only the submodule moves
    moved = project.sub.head()

    plan = cli("restore", "good", "--check")
    assert plan.returncode == 1, plan.stdout + plan.stderr
    assert f"{SUB}: would check out {good[:12]}" in plan.stdout, plan.stdout

    result = cli("restore", "good", "--yes")
    assert result.returncode == 0, result.stdout + result.stderr
    assert project.sub.head() == good
    assert "verified: checkout " in words(result.stdout), result.stdout
    assert "NOT restored" not in result.stdout
    assert project.top.git("status", "--porcelain") == ""

    back = cli("restore", rollback_label(cli), "--yes")
    assert back.returncode == 0, back.stdout + back.stderr
    assert project.sub.head() == moved
    assert "verified" in back.stdout


def test_a_submodules_own_work_is_stashed_and_given_back_by_the_rollback(
        cli: Cli, project: Project) -> None:
    good = project.sub.head()
    capture(cli, "good", project)
    project.sub.git("checkout", "-q", project.lib_commits[0])
    project.sub.write("kernel.cu", "my tuning\n")
    project.sub.write("notes/try.bin", b"\x00\x01binary\xff")
    project.top.write("README.md", "top, edited\n")
    before = (project.sub.head(), tree_bytes(project.top.path))

    plan = cli("restore", "good", "--check")
    assert "would stash its own 1 changed file and 1 untracked file" in plan.stdout, plan.stdout

    result = cli("restore", "good", "--yes")
    assert result.returncode == 0, result.stdout + result.stderr
    assert project.sub.head() == good
    assert project.sub.git("status", "--porcelain") == ""
    assert (project.sub.path / "kernel.cu").read_text() == "2\n"
    assert "envsnap: work saved before restoring good" in project.sub.git("stash", "list")

    back = cli("restore", rollback_label(cli), "--yes")
    assert back.returncode == 0, back.stdout + back.stderr
    assert (project.sub.head(), tree_bytes(project.top.path)) == before


def failing_hook(repo: Repo) -> Path:
    """A post-checkout hook that fails (git checkout then exits non-zero): a step that fails
    half-way through a restore, for root too."""
    hooks = Path(repo.git("rev-parse", "--absolute-git-dir")) / "hooks"
    hooks.mkdir(exist_ok=True)
    hook = hooks / "post-checkout"
    hook.write_text("#!/bin/sh\necho 'hook: refusing' >&2\nexit 1\n")
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR)
    return hook


def test_a_failed_step_names_abort_which_rolls_back_and_unblocks(
        cli: Cli, project: Project) -> None:
    good = project.sub.head()
    capture(cli, "good", project)
    capture(cli, "other", project)
    project.top.commit("more top", {"README.md": "top 2\n"})
    pulled = project.top.head()
    project.sub.git("checkout", "-q", project.lib_commits[2])
    project.sub.write("kernel.cu", "my tuning\n")
    before = (project.top.head(), project.sub.head(), tree_bytes(project.top.path))
    hook = failing_hook(project.sub)

    failed = cli("restore", "good", "--yes")
    assert failed.returncode == 3, failed.stdout + failed.stderr
    assert "envsnap restore --abort" in failed.stdout, failed.stdout
    journals = list((Path(cli.env["ENVSNAP_STORE"]) / ".journal").rglob("*.json"))
    assert journals, "a failed step leaves its journal"
    blocked = cli("restore", "other", "--yes")
    assert "envsnap restore --abort" in blocked.stderr, blocked.stderr

    hook.unlink()   # the cause is fixed; the journal is what is left
    aborted = cli("restore", "--abort")
    assert aborted.returncode == 0, aborted.stdout + aborted.stderr
    assert "rolled back" in aborted.stdout and "good" in aborted.stdout, aborted.stdout
    # one line, folded to 80 columns: the lines after the first stand deeper
    assert all(line.startswith("  ") for line in aborted.stdout.strip().splitlines()[1:])
    assert (project.top.head(), project.sub.head(), tree_bytes(project.top.path)) == before
    assert project.top.head() == pulled
    assert not list((Path(cli.env["ENVSNAP_STORE"]) / ".journal").rglob("*.json"))

    nothing = cli("restore", "--abort")
    assert nothing.returncode == 0, nothing.stdout + nothing.stderr
    assert "no interrupted restore" in nothing.stdout, nothing.stdout

    again = cli("restore", "good", "--yes")
    assert again.returncode == 0, again.stdout + again.stderr
    assert project.sub.head() == good


def test_abort_without_a_rollback_point_clears_the_journal(cli: Cli,
                                                           project: Project) -> None:
    capture(cli, "good", project)
    project.sub.git("checkout", "-q", project.lib_commits[2])
    hook = failing_hook(project.sub)
    failed = cli("restore", "good", "--yes")
    assert failed.returncode == 3, failed.stdout + failed.stderr
    hook.unlink()
    (Path(cli.env["ENVSNAP_STORE"]) / f"{rollback_label(cli)}.yaml").unlink()

    aborted = cli("restore", "--abort", "--host", "local", "good")
    assert aborted.returncode == 0, aborted.stdout + aborted.stderr
    assert "cleared" in aborted.stdout and "left as it is" in words(aborted.stdout), aborted.stdout
    again = cli("restore", "good", "--yes")
    assert again.returncode == 0, again.stdout + again.stderr


def test_a_failed_restore_is_resumed_by_running_it_again_then_rolled_back(
        cli: Cli, project: Project) -> None:
    good = project.sub.head()
    capture(cli, "good", project)
    project.sub.git("checkout", "-q", project.lib_commits[0])
    project.sub.write("kernel.cu", "my tuning\n")
    before = (project.sub.head(), tree_bytes(project.top.path))
    hook = failing_hook(project.sub)
    failed = cli("restore", "good", "--yes")
    assert failed.returncode == 3, failed.stdout + failed.stderr

    hook.unlink()
    resumed = cli("restore", "good", "--yes")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "verified" in resumed.stdout, resumed.stdout
    assert project.sub.head() == good
    assert not list((Path(cli.env["ENVSNAP_STORE"]) / ".journal").rglob("*.json"))

    back = cli("restore", rollback_label(cli), "--yes")
    assert back.returncode == 0, back.stdout + back.stderr
    assert (project.sub.head(), tree_bytes(project.top.path)) == before
