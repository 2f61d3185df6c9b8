"""A snapshot captured as `user@host` (an ad-hoc target, not an inventory name) is restored to
that host as that user, as `envsnap capture user@host` reached it: the same ~/.ssh/config
alias, no --host needed. Through the real CLI against the real sshd."""
from __future__ import annotations

from pathlib import Path

import pytest
from conftest import Cli
from helpers.gitrepos import Story
from helpers.paths import ROOT
from helpers.restorestory import (
    ENGINE,
    GOOD_PATCH,
    capture_good,
    moved_and_dirty,
    snapshot_of_tree,
)
from helpers.sshd import Sshd

from envsnap.errors import ExitCode

ALIAS = "gpu-box"
TARGET = f"root@{ALIAS}"   # the sshd logs in as root (its config's User root)
RESTORE = str(ROOT / "playbooks" / "restore.yml")


@pytest.fixture
def story(tmp_path: Path) -> Story:
    return Story(tmp_path / "story")


@pytest.fixture
def alias_cli(ssh_cli: Cli, sshd: Sshd) -> Cli:
    """ssh_cli with `gpu-box` an alias in ~/.ssh/config: only OpenSSH knows where it is."""
    config = Path(ssh_cli.env["HOME"]) / ".ssh" / "config"
    config.write_text(f"Host {ALIAS}\n  HostName {sshd.addresses[0]}\n\n" + config.read_text())
    return ssh_cli


@pytest.mark.ssh
@pytest.mark.parametrize("with_port", [False, True])
def test_check_of_a_user_at_host_snapshot_plans_for_that_target(alias_cli: Cli, sshd: Sshd,
                                                                  story: Story,
                                                                  with_port: bool) -> None:
    target = f"{TARGET}:{sshd.port}" if with_port else TARGET   # no host pattern, a target
    capture_good(alias_cli, story, target)
    moved_and_dirty(story)
    moved = story.checkout.head()
    result = alias_cli("restore", "good", "--check")
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"plan for {target} (check mode: nothing changed)" in result.stdout
    assert story.checkout.head() == moved


@pytest.mark.ssh
def test_restore_of_a_user_at_host_snapshot_moves_the_checkout_back(alias_cli: Cli,
                                                                    story: Story) -> None:
    good = capture_good(alias_cli, story, TARGET)
    moved_and_dirty(story)
    result = alias_cli("restore", "good", "--yes")
    assert result.returncode == 0, result.stdout + result.stderr
    assert story.checkout.head() == good
    assert (story.checkout.path / ENGINE).read_text() == GOOD_PATCH
    assert "verified" in result.stdout


@pytest.mark.ssh
def test_play_restore_limited_to_the_user_at_host_it_was_captured_as(alias_cli: Cli,
                                                                      story: Story) -> None:
    good = capture_good(alias_cli, story, TARGET)
    moved_and_dirty(story)
    plan = alias_cli("play", RESTORE, "-e", "snapshot=good", "-l", TARGET, "--check")
    assert plan.returncode == 0, plan.stdout + plan.stderr
    assert story.checkout.head() != good
    result = alias_cli("play", RESTORE, "-e", "snapshot=good", "-l", TARGET)
    assert result.returncode == 0, result.stdout + result.stderr
    assert story.checkout.head() == good


@pytest.mark.ssh
def test_the_inventory_name_with_that_login_is_the_same_target(alias_cli: Cli, story: Story,
                                                               tmp_path: Path) -> None:
    """`gpu-box` with ansible_user=root is how an inventory says `root@gpu-box`."""
    good = capture_good(alias_cli, story, TARGET)
    moved_and_dirty(story)
    inventory(tmp_path, "root")
    result = alias_cli("play", RESTORE, "--inventory", "hosts.yml", "-e", "snapshot=good",
                       "-l", ALIAS)
    assert result.returncode == 0, result.stdout + result.stderr
    assert story.checkout.head() == good


@pytest.mark.ssh
@pytest.mark.parametrize(("inventory_user", "other"), [
    (None, "nobody@gpu-box"), (None, "gpu-box"), ("nobody", "gpu-box")])
def test_another_login_on_that_host_is_not_taken_for_the_same_target(
        alias_cli: Cli, story: Story, tmp_path: Path, inventory_user: str | None,
        other: str) -> None:
    """Another user, or none named (the SSH config would pick one): not the login the
    snapshot was captured as, so the playbook's own check refuses it before any change."""
    capture_good(alias_cli, story, TARGET)
    moved_and_dirty(story)
    before = snapshot_of_tree(story)
    given = ["--inventory", inventory(tmp_path, inventory_user)] if inventory_user else []
    result = alias_cli("play", RESTORE, *given, "-e", "snapshot=good", "-l", other)
    assert result.returncode == 3, result.stdout + result.stderr
    assert f"was taken on {TARGET}, not {other}" in result.stdout
    assert snapshot_of_tree(story) == before


@pytest.mark.ssh
def test_a_target_that_is_no_host_is_refused_in_one_line(alias_cli: Cli, story: Story) -> None:
    capture_good(alias_cli, story, TARGET)
    moved_and_dirty(story)
    before = snapshot_of_tree(story)
    result = alias_cli("restore", "good", "--check", "--host", "root@gpu/box")
    assert result.returncode == ExitCode.USAGE, result.stdout + result.stderr
    assert result.stderr == ("envsnap: error: not a host: 'root@gpu/box' (expected "
                             "[user@]host[:port], an inventory name, or 'local')\n")
    assert snapshot_of_tree(story) == before


def inventory(folder: Path, user: str) -> str:
    """hosts.yml naming the alias, with `user` as its ansible_user."""
    (folder / "hosts.yml").write_text(f"all:\n  hosts:\n    {ALIAS}:\n"
                                      f"      ansible_user: {user}\n")
    return "hosts.yml"
