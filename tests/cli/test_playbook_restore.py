"""playbooks/restore.yml through the real CLI on real git repositories, locally and over sshd.

The STORY (docs/STORY.md) in miniature: a good state (a commit plus local patches) is
captured, then a pull moves HEAD and the user starts new work; restore must stash that work
(recoverable with `git stash pop --index`), check out the good commit and re-apply the good
patch. Each bad input (a patch that does not apply, a commit that is nowhere) stops before
anything changes.
"""
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
    edit_snapshot,
    moved_and_dirty,
    patch_that_no_longer_applies,
    snapshot_of_tree,
    stash_messages,
)
from helpers.sshd import Sshd

RESTORE = str(ROOT / "playbooks" / "restore.yml")


@pytest.fixture
def story(tmp_path: Path) -> Story:
    return Story(tmp_path / "story")


def assert_restored(story: Story, good: str, output: str) -> None:
    repo = story.checkout.path
    assert story.checkout.head() == good
    assert (repo / ENGINE).read_text() == GOOD_PATCH
    assert (repo / "bench_one.py").exists()
    assert "my work" not in (repo / "README.md").read_text() and not (repo / "mine.txt").exists()
    assert stash_messages(story)[0].startswith("On main: envsnap: work saved before restoring good")
    assert "get them back with: git -C" in output
    assert "matches the snapshot" in output


def assert_work_recovered(story: Story) -> None:
    story.checkout.git("stash", "pop")
    assert "my work in progress" in (story.checkout.path / "README.md").read_text()
    assert (story.checkout.path / "mine.txt").read_text() == "new file of mine\n"
    assert (story.checkout.path / ENGINE).read_text() == GOOD_PATCH


def test_restore_a_dirty_tree_that_moved_locally(cli: Cli, story: Story) -> None:
    good = capture_good(cli, story, "local")
    moved_and_dirty(story)
    result = cli("play", RESTORE, "-e", "snapshot=good", "-l", "local")
    assert result.returncode == 0, result.stdout + result.stderr
    assert_restored(story, good, result.stdout)
    again = cli("play", RESTORE, "-e", "snapshot=good", "-l", "local")
    assert again.returncode == 0 and "changed=0" in again.stdout, again.stdout
    assert_work_recovered(story)


@pytest.mark.ssh
def test_restore_a_dirty_tree_that_moved_over_ssh(ssh_cli: Cli, sshd: Sshd, story: Story) -> None:
    host = sshd.addresses[0]
    good = capture_good(ssh_cli, story, host)
    moved_and_dirty(story)
    plan = ssh_cli("play", RESTORE, "-e", "snapshot=good", "-l", host, "--check", "--diff")
    assert plan.returncode == 0, plan.stdout + plan.stderr
    assert "would stash 1 changed file and 1 untracked file" in plan.stdout
    assert "Fix PCG MoE Error" in plan.stdout and f"+{GOOD_PATCH}" in plan.stdout
    assert "my work" in (story.checkout.path / "README.md").read_text()
    result = ssh_cli("play", RESTORE, "-e", "snapshot=good", "-l", host)
    assert result.returncode == 0, result.stdout + result.stderr
    assert_restored(story, good, result.stdout)
    assert_work_recovered(story)


def test_a_patch_that_does_not_apply_stops_before_any_change(cli: Cli, story: Story) -> None:
    patch_that_no_longer_applies(cli, story)
    before = snapshot_of_tree(story)
    result = cli("play", RESTORE, "-e", "snapshot=good", "-l", "local")
    assert result.returncode == 3, result.stdout + result.stderr
    assert f"{ENGINE}: hunk #1 (@@ -1 +1 @@) does not apply" in result.stdout
    assert snapshot_of_tree(story) == before


def test_a_commit_missing_here_is_fetched_from_the_remote(cli: Cli, story: Story) -> None:
    capture_good(cli, story, "local")
    later = story.dev.commit("Later, on the remote only", {"docs/later.md": "later\n"})
    story.dev.git("push", "-q", "origin", "main")
    edit_snapshot(cli, head=later)
    result = cli("play", RESTORE, "-e", "snapshot=good", "-l", "local")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "fetched from origin" in result.stdout
    assert story.checkout.head() == later
    assert (story.checkout.path / ENGINE).read_text() == GOOD_PATCH


def test_a_commit_that_is_nowhere_is_a_clear_error_before_any_change(cli: Cli,
                                                                      story: Story) -> None:
    capture_good(cli, story, "local")
    moved_and_dirty(story)
    edit_snapshot(cli, head="0123456789abcdef0123456789abcdef01234567")
    before = snapshot_of_tree(story)
    result = cli("play", RESTORE, "-e", "snapshot=good", "-l", "local")
    assert result.returncode == 3, result.stdout + result.stderr
    assert "commit 0123456789abcdef0123456789abcdef01234567 is neither here nor on the " \
           "remotes" in result.stdout
    assert "nothing was changed" in result.stdout
    assert snapshot_of_tree(story) == before


@pytest.mark.ssh
def test_a_snapshot_of_another_host_is_refused(ssh_cli: Cli, sshd: Sshd, story: Story) -> None:
    capture_good(ssh_cli, story, "local")
    moved_and_dirty(story)
    before = snapshot_of_tree(story)
    result = ssh_cli("play", RESTORE, "-e", "snapshot=good", "-l", sshd.addresses[1])
    assert result.returncode == 3
    assert f"was taken on local, not {sshd.addresses[1]}" in result.stdout
    assert snapshot_of_tree(story) == before


@pytest.mark.ssh
def test_copy_and_template_over_ssh_back_up_and_diff(ssh_cli: Cli, sshd: Sshd,
                                                     tmp_path: Path) -> None:
    target = tmp_path / "etc" / "bench.conf"
    target.parent.mkdir()
    target.write_text("repeat = 3\n")
    (tmp_path / "bench.conf.j2").write_text("repeat = {{ repeat }}\n"
                                            "host = {{ inventory_hostname }}\n")
    (tmp_path / "files.yml").write_text(f"""- hosts: all
  tasks:
    - template: {{src: bench.conf.j2, dest: {target}}}
    - copy: {{dest: {target}.copy, content: "plain\\n", mode: "0600"}}
""")
    host = sshd.addresses[0]
    result = ssh_cli("play", "files.yml", "-l", host, "-e", "repeat=5", "--diff")
    assert result.returncode == 0, result.stdout + result.stderr
    assert target.read_text() == f"repeat = 5\nhost = {host}\n"
    assert "-repeat = 3\n+repeat = 5\n" in result.stdout
    backups = list(target.parent.glob("bench.conf.envsnap-backup-*"))
    assert [backup.read_text() for backup in backups] == ["repeat = 3\n"]
    assert oct((target.parent / "bench.conf.copy").stat().st_mode & 0o777) == "0o600"


@pytest.mark.parametrize(("text", "line", "message"), [
    ("- hosts: all\n  tasks:\n    - debug: {msg: 'a'\n", 4, "YAML error"),
    ("- hosts: all\n  tasks:\n    - name: x\n      shel: ls\n", 4, "unknown module 'shel'"),
    ("- hosts: all\n  tasks:\n    - debug: '{{ foo }}'\n", 3, "undefined variable 'foo'"),
])
def test_an_invalid_playbook_is_one_line_and_exit_4(cli: Cli, text: str, line: int,
                                                    message: str) -> None:
    (cli.cwd / "bad.yml").write_text(text)
    result = cli("play", "bad.yml", "-l", "local")
    assert result.returncode == 4
    assert result.stdout == ""
    assert result.stderr.startswith(f"envsnap: error: bad.yml:{line}: {message}")
    assert result.stderr.count("\n") == 1
