"""`envsnap restore --repo PATH --at TIME`: one checkout back at its reflog's state of TIME,
through restore's own safety net, on a real clone whose reflog holds a real `git pull` and a
real branch checkout (each git command a recorded second later: helpers/gitrepos.py)."""
from __future__ import annotations

import json
import re
import shlex
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml
from conftest import Cli
from helpers.benchscript import write_bench
from helpers.folded import words
from helpers.gitrepos import Story
from helpers.sshd import Sshd

METRIC = r"gen throughput \(token/s\): ([0-9.]+)"


def iso(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def reflog_times(story: Story) -> list[int]:
    """HEAD's reflog times, newest first, as git wrote them."""
    return [int(line) for line in story.checkout.git("reflog", "--format=%gd",
                                                     "--date=unix").replace("HEAD@{", "")
            .replace("}", "").split()]


@pytest.fixture
def pulled(tmp_path: Path) -> tuple[Story, int]:
    """A clone at the good commit, then a real pull of nine commits, then work in progress;
    the time (from the reflog) at which the clone stood, before the pull."""
    story = Story(tmp_path / "story")
    cloned = reflog_times(story)[0]
    story.upstream_moves()
    story.pull()
    story.checkout.write("README.md", "sglang\nmy work in progress\n")
    return story, cloned


def undo_line(cli: Cli, host: str, story: Story) -> list[str]:
    """The command the timeline prints to undo the pull, as words."""
    found = cli("timeline", host, "--repo", str(story.checkout.path),
                "--since", "2025-06-01T00:00:00Z", "--json")
    assert found.returncode == 0, found.stderr
    pull = next(event for event in json.loads(found.stdout)["events"]
                if event["kind"] == "checkout" and event["what"].startswith("pull in"))
    undo = re.search(r"undo: (envsnap restore .*)$", pull["test"])
    assert undo is not None, pull["test"]
    return shlex.split(undo.group(1))


def test_the_timelines_undo_line_previews_then_restores_with_the_safety_net(
        cli: Cli, pulled: tuple[Story, int]) -> None:
    """The command the timeline prints for the pull, run: --check first, then for real."""
    story, cloned = pulled
    pulled_head, status = story.checkout.head(), story.checkout.git("status", "--porcelain")
    argv = undo_line(cli, "local", story)
    assert argv[:-1] == ["envsnap", "restore", "--repo", str(story.checkout.path), "--at"]
    at, moment = argv[1:], argv[-1]
    assert iso(cloned) <= moment < iso(reflog_times(story)[0])   # after the clone, before the pull
    check = cli(*at, "--check")
    out = " ".join(check.stdout.split())
    assert check.returncode == 1, check.stdout + check.stderr
    assert f"{story.checkout.path} at {moment}: {story.good[:12]} on main" in out
    assert "uncommitted work is not in a reflog" in out
    assert "plan for local (check mode: nothing changed)" in out and "would stash" in out
    assert story.checkout.head() == pulled_head
    assert story.checkout.git("status", "--porcelain") == status

    # no terminal here to say yes at: --yes is that yes
    result = cli(*at, "--yes")
    assert result.returncode == 0, result.stdout + result.stderr
    # main moved on with the pull: restore checks the commit out detached, never moves main
    assert story.checkout.head() == story.good
    assert story.checkout.git("rev-parse", "main") == pulled_head
    stashes = story.checkout.git("stash", "list", "--format=%gs")
    assert "envsnap: work saved before restoring reflog-sglang-" in stashes
    rollback = re.search(r"rollback point: envsnap restore (\S+)", result.stdout)
    assert rollback is not None, result.stdout
    back = cli("restore", rollback.group(1), "--yes")
    assert back.returncode == 0, back.stdout + back.stderr
    assert story.checkout.head() == pulled_head
    assert "my work in progress" in (story.checkout.path / "README.md").read_text()


def test_the_branch_and_the_benchmark_of_a_snapshots_time_come_back(
        cli: Cli, pulled: tuple[Story, int], tmp_path: Path) -> None:
    """--at a snapshot label: its capture time; --rerun benches again against its numbers."""
    story, _ = pulled
    story.checkout.git("checkout", "-q", "--", "README.md")
    recorded = cli("bench", "local", "--cmd", write_bench(tmp_path / "bench"), "--metric",
                   METRIC, "--repeat", "3", "--label", "good-bench", "--repo",
                   str(story.checkout.path))
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    captured = yaml.safe_load((Path(cli.env["ENVSNAP_STORE"]) / "good-bench.yaml")
                              .read_text())["meta"]["captured_at"]
    later = int(datetime.fromisoformat(captured.replace("Z", "+00:00")).timestamp()) + 2
    env = dict(story.env, GIT_COMMITTER_DATE=f"@{later} +0000", GIT_AUTHOR_DATE=f"@{later} +0000")
    for args in (["checkout", "-q", "-b", "experiment"], ["commit", "-q", "--allow-empty",
                                                         "-m", "try something"]):
        subprocess.run(["git", *args], cwd=story.checkout.path, env=env, check=True)
    result = cli("restore", "--repo", str(story.checkout.path), "--at", "good-bench",
                 "--rerun", "--yes")
    assert result.returncode == 0, result.stdout + result.stderr
    assert story.checkout.git("symbolic-ref", "--short", "HEAD") == "main"
    assert "benchmark rerun: same" in result.stdout


def test_a_time_before_the_reflog_and_a_label_are_refused(cli: Cli,
                                                          pulled: tuple[Story, int]) -> None:
    story, cloned = pulled
    early = cli("restore", "--repo", str(story.checkout.path), "--at", iso(cloned - 3600))
    assert early.returncode == 2
    assert f"records no state at {iso(cloned - 3600)}" in early.stderr
    both = cli("restore", "good", "--repo", str(story.checkout.path), "--at", "2h")
    assert both.returncode == 2 and "exactly one --repo PATH and no LABEL" in both.stderr
    head = story.checkout.head()
    unbenched = cli("restore", "--repo", str(story.checkout.path), "--at", iso(cloned),
                    "--rerun-cmd", "true", "--yes")
    assert unbenched.returncode == 2 and "no snapshot of local captured by" in unbenched.stderr
    assert story.checkout.head() == head


def test_the_undo_line_of_a_remote_timeline_names_its_host_and_works(
        ssh_cli: Cli, sshd: Sshd, pulled: tuple[Story, int]) -> None:
    story, _ = pulled
    host = sshd.addresses[0]
    argv = undo_line(ssh_cli, host, story)
    assert argv[:-2] == ["envsnap", "restore", "--host", host, "--repo",
                         str(story.checkout.path)]
    result = ssh_cli(*argv[1:], "--yes")
    assert result.returncode == 0, result.stdout + result.stderr
    assert story.checkout.head() == story.good


def test_an_interrupted_restore_at_says_the_command_that_resumes_it(
        cli: Cli, pulled: tuple[Story, int]) -> None:
    """A post-checkout hook that fails stops the restore after its stash (git's own exit
    status is the hook's): the journal stays, and its way out, named to any other restore of
    the checkout, is this restore again (its target is made, not stored under its label)."""
    story, cloned = pulled
    hook = story.checkout.path / ".git" / "hooks" / "post-checkout"
    hook.write_text("#!/bin/sh\nexit 1\n")
    hook.chmod(0o755)
    failed = cli("restore", "--repo", str(story.checkout.path), "--at", iso(cloned), "--yes")
    assert failed.returncode == 3, failed.stdout + failed.stderr
    other = cli("restore", "--repo", str(story.checkout.path), "--at", "1s", "--yes")
    said = " ".join(other.stderr.split())
    assert other.returncode == 2 and "an interrupted restore of 'reflog-sglang-" in said
    resume = re.search(r"run `(envsnap restore [^`]*)` to resume it", said)
    assert resume is not None, said
    assert resume.group(1) == f"envsnap restore --repo {story.checkout.path} --at {iso(cloned)}"
    hook.unlink()
    resumed = cli(*shlex.split(resume.group(1))[1:], "--yes")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"verified: checkout {story.checkout.path} and " in words(resumed.stdout)
    assert story.checkout.head() == story.good
    assert not list((Path(cli.env["ENVSNAP_STORE"]) / ".journal").rglob("*.json"))
