"""What restore says is the same every time, in one notation (issue 24): an untracked file
whose content the snapshot did not keep is named with its reason before a restore, after it
and on every run after; a plan says "now X, snapshot Y", a diff "before -> after". Real git
repositories, locally and over the real sshd."""
from __future__ import annotations

from pathlib import Path

import pytest
from conftest import Cli
from helpers.folded import words
from helpers.gitrepos import Story
from helpers.restorestory import capture_good, moved_and_dirty

WEIGHTS = b"\x00\x01not text\xff" * 64   # binary: a snapshot describes it, never keeps it


@pytest.mark.parametrize("over_ssh", [False, True], ids=["local", "ssh"])
def test_what_restore_cannot_write_back_is_said_the_same_every_time(
        request: pytest.FixtureRequest, cli: Cli, tmp_path: Path, over_ssh: bool) -> None:
    host = "local"
    if over_ssh:
        sshd = request.getfixturevalue("sshd")
        sshd.write_home(Path(cli.env["HOME"]))
        host = sshd.addresses[0]
    story = Story(tmp_path / "story")
    (story.checkout.path / "weights.bin").write_bytes(WEIGHTS)
    good = capture_good(cli, story, host)
    moved_and_dirty(story)         # the stash takes weights.bin with the user's other files
    # the same words every time (folded to 80 columns: read as words)
    said = f"{story.checkout.path}: weights.bin (binary content not recorded)"
    plan = cli("restore", "good", "--check")
    assert plan.returncode == 1, plan.stdout + plan.stderr
    assert said in words(plan.stdout)
    assert f"HEAD now {story.checkout.head()[:12]}, target {good[:12]}" in plan.stdout
    for attempt in range(2):
        result = cli("restore", "good", "--yes")
        assert said in words(result.stdout), (attempt, result.stdout + result.stderr)
        assert result.returncode == 1   # drift is left, whether or not this run moved anything
        assert "NOT restored" not in result.stdout
        assert "already match the snapshot" not in words(result.stdout).replace(
            "already match the snapshot, but for what envsnap cannot write back", "")
    assert story.checkout.head() == good
    again = cli("restore", "good", "--check")
    assert said in words(again.stdout) and again.returncode == 1


def test_a_plan_says_now_and_snapshot_and_a_diff_before_and_after(cli: Cli,
                                                                   tmp_path: Path) -> None:
    story = Story(tmp_path / "story")
    cli.env["NCCL_PROTO"] = "LL"
    capture_good(cli, story, "local")
    del cli.env["NCCL_PROTO"]
    plan = cli("restore", "good", "--check")
    assert "  env: shell.NCCL_PROTO: now (absent), snapshot LL" in plan.stdout.splitlines()
    assert cli("capture", "local", "--label", "now").returncode == 0
    row = next(line for line in cli("diff", "good", "now").stdout.splitlines()
               if "shell.NCCL_PROTO" in line)
    assert row.split()[-3:] == ["LL", "->", "(absent)"]
