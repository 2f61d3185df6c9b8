"""`envsnap restore` through the real CLI: plan, apply, verify, rollback, lock, journal.

Uses the STORY in miniature from restorestory.py (a good commit with a local patch,
then a pull and new work) on real git repositories, locally and over the real sshd.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, Cli
from helpers.folded import words
from helpers.gitrepos import Story
from helpers.restorestory import (
    ENGINE,
    GOOD_PATCH,
    capture_good,
    moved_and_dirty,
    patch_that_no_longer_applies,
    snapshot_of_tree,
    stash_messages,
)
from helpers.sshd import Sshd

from envsnap.errors import ExitCode


@pytest.fixture
def story(tmp_path: Path) -> Story:
    return Story(tmp_path / "story")


def store(cli: Cli) -> Path:
    return Path(cli.env["ENVSNAP_STORE"])


def pre_restore_labels(cli: Cli) -> list[str]:
    return sorted(p.stem for p in store(cli).glob("pre-restore-*.yaml"))


def test_check_shows_the_plan_and_changes_nothing(cli: Cli, story: Story) -> None:
    capture_good(cli, story, "local")
    moved_and_dirty(story)
    before = snapshot_of_tree(story)
    result = cli("restore", "good", "--check")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "plan for local (check mode: nothing changed)" in result.stdout
    assert "stash current work" in result.stdout and "check out" in result.stdout
    assert "would stash" in result.stdout and "will " not in result.stdout
    assert snapshot_of_tree(story) == before and pre_restore_labels(cli) == []


def test_restore_stashes_work_applies_and_verifies_then_rolls_back(cli: Cli,
                                                                   story: Story) -> None:
    good = capture_good(cli, story, "local")
    moved_and_dirty(story)
    pulled = story.checkout.head()
    result = cli("restore", "good", "--yes")
    assert result.returncode == 0, result.stdout + result.stderr
    assert story.checkout.head() == good
    assert (story.checkout.path / ENGINE).read_text() == GOOD_PATCH
    assert re.search(rf"verified: checkout {re.escape(str(story.checkout.path))} and (the "
                     r"sitecustomize that runs \(\S+\)|no sitecustomize \(none runs, as in the "
                     r"snapshot\)) match the snapshot", words(result.stdout)), result.stdout
    assert stash_messages(story)[0].startswith("On main: envsnap: work saved before restoring")
    (rollback,) = pre_restore_labels(cli)
    assert f"rollback point: envsnap restore {rollback}" in result.stdout

    again = cli("restore", "good", "--yes")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "already match the snapshot" in words(again.stdout)
    assert pre_restore_labels(cli) == [rollback]      # an empty plan moves nothing

    back = cli("restore", rollback, "--yes")
    assert back.returncode == 0, back.stdout + back.stderr
    assert story.checkout.head() == pulled
    assert "my work in progress" in (story.checkout.path / "README.md").read_text()


def test_without_yes_and_without_a_terminal_it_refuses(cli: Cli, story: Story) -> None:
    capture_good(cli, story, "local")
    moved_and_dirty(story)
    before = snapshot_of_tree(story)
    result = cli("restore", "good")
    assert result.returncode == ExitCode.DECLINED
    assert result.stderr.startswith("envsnap: declined: nothing was changed on local: ")
    assert "pass --yes" in result.stderr.splitlines()[-1]
    assert snapshot_of_tree(story) == before


def test_a_patch_that_does_not_apply_stops_before_any_change(cli: Cli, story: Story) -> None:
    patch_that_no_longer_applies(cli, story)
    before = snapshot_of_tree(story)
    result = cli("restore", "good", "--yes")
    assert result.returncode == 3, result.stdout + result.stderr
    assert "stopped before changing anything" in result.stdout
    assert f"{ENGINE}: hunk #1 (@@ -1 +1 @@) does not apply" in words(result.stdout)
    assert snapshot_of_tree(story) == before and pre_restore_labels(cli) == []


def test_a_snapshot_of_another_host_is_refused_unless_forced(cli: Cli, story: Story) -> None:
    capture_good(cli, story, "local")
    moved_and_dirty(story)
    path = store(cli) / "good.yaml"
    document = yaml.safe_load(path.read_text())
    document["facts"]["system"]["hostname"] = "gpu-box-07"
    document["facts"]["system"]["boot_id"] = "a-boot-before-a-reboot"
    path.write_text(yaml.safe_dump(document))  # by hand: the digests are left stale
    # edited: foreign, so its checkout is restored only when named
    named = ("--trust-foreign", "--repo", str(story.checkout.path))
    refused = cli("restore", "good", "--yes", "--host", "local", *named)
    assert refused.returncode == 2
    assert "taken on gpu-box-07" in refused.stderr and "--force-host" in refused.stderr
    # forced, but onto the snapshot's own host: that is no host the user named
    unnamed = cli("restore", "good", "--yes", "--force-host", *named)
    assert unnamed.returncode == 2 and "--host" in unnamed.stderr, unnamed.stderr
    forced = cli("restore", "good", "--yes", "--force-host", "--host", "local", *named)
    # which machine and which boot are no drift left to fix by hand
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert "still different" not in forced.stdout


def checkout_lock(cli: Cli, checkout: Path) -> Path:
    """The lock folder of one checkout on the `local` host (safety.CheckoutLocks)."""
    real = str(checkout.resolve())
    name = f"{checkout.name}-{hashlib.sha256(real.encode()).hexdigest()[:16]}.lock"
    return Path(cli.env["HOME"]) / ".cache" / "envsnap" / "locks" / name


def test_a_second_restore_while_one_runs_is_locked_out(cli: Cli, story: Story) -> None:
    capture_good(cli, story, "local")
    moved_and_dirty(story)
    lock = checkout_lock(cli, story.checkout.path)
    lock.mkdir(parents=True)
    (lock / "owner").write_text("other-controller 4242\n")   # as envsnap wrote it before
    before = snapshot_of_tree(story)
    result = cli("restore", "good", "--yes")
    assert result.returncode == 3
    assert (f"another envsnap holds the lock on {story.checkout.path} "
            "(pid 4242 on other-controller)") in result.stderr
    assert snapshot_of_tree(story) == before
    assert lock.exists()                       # someone else's lock is not ours to drop


def test_wait_says_who_it_waits_for_and_a_bisect_is_named_so(cli: Cli, story: Story) -> None:
    """The lock's owner file records the holder's command: a checkout held by a bisect is
    said to be, when restore waits and when it gives up, and by --check."""
    capture_good(cli, story, "local")
    moved_and_dirty(story)
    lock = checkout_lock(cli, story.checkout.path)
    lock.mkdir(parents=True)
    holder = {"controller": "other-controller", "pid": 4242, "started": "2026-12-01T10:00:00Z",
              "command": "envsnap bisect good bad --cmd 'python bench.py'"}
    (lock / "owner").write_text(json.dumps(holder) + "\n")
    who = ("envsnap bisect (pid 4242 on other-controller, \"envsnap bisect good bad --cmd "
           "'python bench.py'\", since 2026-12-01T10:00:00Z)")
    before = snapshot_of_tree(story)
    result = cli("restore", "good", "--yes", "--wait", "0.3")
    assert result.returncode == ExitCode.HOST, result.stdout + result.stderr
    waiting, refused = result.stderr.splitlines()
    assert waiting == (f"local: waiting up to 0.3 s for {who} to release the lock on "
                       f"{story.checkout.path}"), waiting
    assert refused.startswith(f"envsnap: error: local: envsnap bisect holds the lock on "
                              f"{story.checkout.path} (pid 4242 on other-controller, ")
    assert "(waited 0.3 s); wait for it (--wait SECONDS)" in refused
    assert "another restore" not in result.stderr and snapshot_of_tree(story) == before
    check = cli("restore", "good", "--check")
    assert (f"local: envsnap bisect holds the lock on {story.checkout.path} (pid 4242") \
        in words(check.stdout), check.stdout


def test_a_restore_killed_midway_is_resumed(cli: Cli, story: Story) -> None:
    good = capture_good(cli, story, "local")
    moved_and_dirty(story)
    running = restore_stopped_in_checkout(cli, story)
    # Like a lost controller: no cleanup at all (git and its hook go down with it).
    os.killpg(running.pid, signal.SIGKILL)
    running.wait()
    (story.checkout.path / ".git" / "hooks" / "post-checkout").unlink()
    journal = json.loads(next((store(cli) / ".journal").rglob("*.json")).read_text())
    assert journal["label"] == "good" and journal["state"] == "applying"

    copy = store(cli) / "another.yaml"
    copy.write_text((store(cli) / "good.yaml").read_text())
    other = cli("restore", "another", "--yes")
    assert other.returncode == 2 and "interrupted restore of 'good'" in other.stderr

    resumed = cli("restore", "good", "--yes")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "resuming an interrupted restore" in resumed.stdout
    assert story.checkout.head() == good
    assert not list((store(cli) / ".journal").rglob("*.json"))
    assert pre_restore_labels(cli) == [journal["pre_restore"]]


def test_ctrl_c_says_where_the_host_stands_and_abort_leaves_no_stash(cli: Cli,
                                                                     story: Story) -> None:
    """SIGINT while restore checks out (a post-checkout hook holds it there): one line with
    HEAD and the stash of the work and the one way back; --check then claims no resuming;
    --abort puts the work back and drops the stash whose content is back."""
    good = capture_good(cli, story, "local")
    moved_and_dirty(story)
    before = snapshot_of_tree(story)
    hook = story.checkout.path / ".git" / "hooks" / "post-checkout"
    marker, release = story.checkout.path.parent / "in-checkout", story.checkout.path.parent / "go"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\nwhile [ ! -e {release} ]; do sleep 0.05; "
                    "done\n")
    hook.chmod(0o755)
    running = subprocess.Popen([sys.executable, "-m", "envsnap", "restore", "good", "--yes"],
                               cwd=cli.cwd, env=cli.env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        wait_for(marker)
        running.send_signal(signal.SIGINT)
        time.sleep(0.3)        # the signal is taken while git waits on its hook
        release.touch()
        _out, err = running.communicate(timeout=60)
    finally:
        release.touch()
    hook.unlink()
    assert running.returncode == ExitCode.INTERRUPTED, err
    (stash,) = [line.split()[0] for line in story.checkout.git(
        "stash", "list", "--format=%gd %H %gs").splitlines() if "before restoring good" in line]
    (rollback,) = pre_restore_labels(cli)
    assert err.startswith(f"envsnap: interrupted: the restore of 'good' on local stopped while "
                          f"applying: {story.checkout.path}: HEAD detached at {good[:12]}, "
                          f"your work in {stash} ("), err
    assert err.endswith(f"; `envsnap restore --abort --host local` puts it back as it was "
                        f"({rollback}), your work included\n"), err
    assert err.count("\n") == 1
    check = cli("restore", "good", "--check")
    assert "resuming" not in check.stdout, check.stdout
    assert ("an interrupted restore is pending on local: this plan is what finishing it would "
            "do") in words(check.stdout)
    aborted = cli("restore", "--abort")
    assert aborted.returncode == 0, aborted.stdout + aborted.stderr
    assert "dropped its stash of your work, all back in the checkout: " in words(aborted.stdout)
    assert snapshot_of_tree(story) == before   # HEAD, status, the user's own stash only


def restore_stopped_in_checkout(cli: Cli, story: Story) -> subprocess.Popen[bytes]:
    """`restore good --yes` in its own process group, held inside its checkout (a
    post-checkout hook sleeps) with the host lock and the journal taken."""
    hook = story.checkout.path / ".git" / "hooks" / "post-checkout"
    marker = story.checkout.path.parent / "in-checkout"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\nsleep 60\n")
    hook.chmod(0o755)
    running = subprocess.Popen([sys.executable, "-m", "envsnap", "restore", "good", "--yes"],
                               cwd=cli.cwd, env=cli.env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    wait_for(marker)
    return running


def wait_for(path: Path, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


@pytest.mark.ssh
def test_restore_over_ssh(ssh_cli: Cli, sshd: Sshd, story: Story) -> None:
    host = sshd.addresses[0]
    good = capture_good(ssh_cli, story, host)
    moved_and_dirty(story)
    result = ssh_cli("restore", "good", "--yes")
    assert result.returncode == 0, result.stdout + result.stderr
    assert story.checkout.head() == good
    assert "verified" in result.stdout


def test_restore_then_rerun_the_recorded_benchmark(cli: Cli, story: Story) -> None:
    """The code decides the speed (speed.txt is part of the checkout's state): the pull makes
    it slow, restore brings the good state back, and the rerun says the numbers came back.
    Then something restore cannot touch (outside any checkout) slows it: a regression."""
    speed = story.checkout.path / "speed.txt"
    speed.write_text("94\n")
    outside = story.checkout.path.parent / "clock-factor.txt"
    outside.write_text("1.0\n")
    bench = f"{sys.executable} {ROOT / 'tests' / 'data' / 'noisy_bench.py'} {speed} {outside}"
    recorded = cli("bench", "local", "--cmd", bench, "--metric", r"token/s\): ([0-9.]+)",
                   "--repeat", "6", "--label", "good", "--repo", str(story.checkout.path))
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    story.upstream_moves()
    story.pull()
    speed.write_text("60\n")
    result = cli("restore", "good", "--yes", "--rerun")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "benchmark rerun: same" in result.stdout
    assert speed.read_text() == "94\n"

    outside.write_text("0.6\n")              # e.g. clocks throttled: not restorable
    again = cli("restore", "good", "--yes", "--rerun")
    assert "benchmark rerun: regression" in again.stdout, again.stdout + again.stderr
    assert again.returncode == 1


@pytest.mark.parametrize("outside_factor,landed", [
    ("1.0", "back to good"),      # the pull made it slow: restore fixes it
    ("0.64", "still bad"),        # something outside the checkout did too: 94 * 0.64 = 60
])
def test_rerun_is_compared_with_good_and_with_the_bad_state_restored_from(
        cli: Cli, story: Story, outside_factor: str, landed: str) -> None:
    """Issue 14: `bench good`, a pull makes it slow, `bench bad`, `restore good --rerun`:
    3 runs a side are enough for a 94 -> 60 gap, and the rerun is placed between both."""
    speed = story.checkout.path / "speed.txt"
    speed.write_text("94\n")
    outside = story.checkout.path.parent / "clock-factor.txt"
    outside.write_text("1.0\n")
    bench = f"{sys.executable} {ROOT / 'tests' / 'data' / 'noisy_bench.py'} {speed} {outside}"
    for label in ("good", "bad"):
        if label == "bad":
            story.upstream_moves()
            story.pull()
            speed.write_text("60\n")
        recorded = cli("bench", "local", "--cmd", bench, "--metric", r"token/s\): ([0-9.]+)",
                       "--repeat", "3", "--label", label, "--repo", str(story.checkout.path))
        assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    outside.write_text(f"{outside_factor}\n")
    result = cli("restore", "good", "--yes", "--rerun")
    said = words(result.stdout)   # folded to 80 columns: read as words
    headline = said.split("benchmark rerun: ")[1].split(" vs good: ")[0]
    assert headline.startswith(f"{landed}: "), result.stdout
    assert re.search(r": [0-9.]+ vs good 9[0-9.]+, bad [56][0-9.]+ \(3 runs vs 3 and 3\)$",
                     headline), headline
    vs_good, vs_bad = said.split(" vs good: ")[1], said.split(" vs bad (bad): ")[1]
    if landed == "back to good":
        assert vs_good.startswith("same: ") and result.returncode == 0
        assert vs_bad.startswith("improvement: median ")
    else:
        assert vs_good.startswith("regression: ") and result.returncode == 1
        assert not vs_bad.startswith("improvement")


def index_and_tree(story: Story) -> tuple[str, str, str]:
    """What staging means: the staged diff, the unstaged diff, and status's XY columns."""
    return (story.checkout.git("diff", "--cached"), story.checkout.git("diff"),
            story.checkout.git("status", "--porcelain"))


def test_a_rollback_keeps_staged_and_unstaged_changes_apart(cli: Cli, story: Story) -> None:
    capture_good(cli, story, "local")
    moved_and_dirty(story)                              # README.md edited, not staged
    story.checkout.write(ENGINE, "ENGINE = 3  # staged\n")
    story.checkout.write("staged_only.txt", "a new file, staged\n")
    story.checkout.git("add", ENGINE, "staged_only.txt")
    story.checkout.write(ENGINE, "ENGINE = 4  # staged, then edited again\n")
    before = index_and_tree(story)
    staged, unstaged, status = before
    assert "README.md" in unstaged and "README.md" not in staged and f"MM {ENGINE}" in status

    result = cli("restore", "good", "--yes")
    assert result.returncode == 0, result.stdout + result.stderr
    plan = result.stdout.split("rollback point:")[0]      # about to apply: "will", not "would"
    assert "will stash 3 changed files and 1 untracked file" in plan and "would" not in plan
    (rollback,) = pre_restore_labels(cli)
    back = cli("restore", rollback, "--yes")
    assert back.returncode == 0, back.stdout + back.stderr
    assert index_and_tree(story) == before


def test_check_does_not_take_the_lock_of_a_running_restore(cli: Cli, story: Story) -> None:
    """--check only reads: beside a restore that holds the host's lock (stopped in the middle
    of its checkout by a hook), it shows its plan, names the running restore, and leaves the
    lock as it found it."""
    capture_good(cli, story, "local")
    moved_and_dirty(story)
    running = restore_stopped_in_checkout(cli, story)
    try:
        lock = checkout_lock(cli, story.checkout.path)
        owner = (lock / "owner").read_text()
        holder = json.loads(owner)
        assert holder["pid"] == running.pid and holder["command"] == "envsnap restore good --yes"
        result = cli("restore", "good", "--check")
        assert result.returncode in (0, 1), result.stdout + result.stderr
        assert (f"local: envsnap restore holds the lock on {story.checkout.path} (pid "
                f"{running.pid} on {holder['controller']}, 'envsnap restore good --yes', since "
                f"{holder['started']})") in words(result.stdout)
        assert "resuming" not in result.stdout   # the journal is the running restore's own
        assert (lock / "owner").read_text() == owner and running.poll() is None
    finally:
        os.killpg(running.pid, signal.SIGKILL)
        running.wait()


def test_check_shows_its_plan_beside_an_interrupted_restore(cli: Cli, story: Story) -> None:
    """A pending journal refuses a restore of another snapshot; --check, which changes
    nothing, shows its plan and says what is pending."""
    capture_good(cli, story, "local")
    (store(cli) / "another.yaml").write_text((store(cli) / "good.yaml").read_text())
    journal = store(cli) / ".journal" / "local.json"
    journal.parent.mkdir()
    journal.write_text(json.dumps({"label": "good", "host": "local", "state": "applying",
                                   "pre_restore": "pre-restore-1", "started": "earlier"}))
    refused = cli("restore", "another", "--yes")
    assert refused.returncode == 2 and "interrupted restore of 'good'" in refused.stderr
    checked = cli("restore", "another", "--check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.startswith("an interrupted restore of 'good' on local")
    assert json.loads(journal.read_text())["state"] == "applying"


def test_a_journal_that_cannot_be_read_is_one_line(cli: Cli, story: Story) -> None:
    capture_good(cli, story, "local")
    journal = store(cli) / ".journal" / "local.json"
    journal.mkdir(parents=True)   # a folder where the journal file goes: was exit 70
    for args in (("--check",), ("--yes",)):
        result = cli("restore", "good", *args)
        assert result.returncode == 2
        assert result.stderr == (f"envsnap: error: restore journal {journal} is unreadable "
                                 "(Is a directory); look at it, then delete it\n")


def test_check_without_a_lock_says_nothing_about_one(cli: Cli, story: Story) -> None:
    capture_good(cli, story, "local")
    result = cli("restore", "good", "--check")
    assert result.returncode == 0, result.stdout + result.stderr
    # (the checkout's own folder, named as verified, is this test's: its name holds "lock")
    assert "lock" not in words(result.stdout + result.stderr).replace(
        str(story.checkout.path), "")
    assert not (Path(cli.env["HOME"]) / ".cache" / "envsnap" / "locks").exists()


def test_python_comes_from_the_option_then_the_inventory_then_the_snapshot(
        cli: Cli, story: Story, tmp_path: Path) -> None:
    capture_good(cli, story, "local")    # recorded with the default python3, which works
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n    local:\n      ansible_connection: local\n"
                         "      python: /nonexistent/python3\n")
    from_inventory = cli("restore", "good", "--check", "--inventory", str(inventory))
    assert from_inventory.returncode == 3, from_inventory.stdout + from_inventory.stderr
    assert from_inventory.stderr.strip().splitlines()[-1] == (
        "envsnap: error: local: python not found on the host ('/nonexistent/python3'); "
        "set --python or the host var python")
    # the default python3 again, by path: sys.executable may be a venv's (tests/run.sh)
    default_python = shutil.which("python3", path=cli.env["PATH"]) or "python3"
    from_option = cli("restore", "good", "--check", "--inventory", str(inventory),
                      "--python", default_python)
    assert from_option.returncode == 0, from_option.stdout + from_option.stderr
    assert "already match the snapshot" in words(from_option.stdout)
    recorded = cli("restore", "good", "--check")   # no inventory: the snapshot's python3
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    shown = cli("restore", "--help").stdout
    assert "--python PATH" in shown and "default: the inventory's python" in shown


def test_a_file_added_with_intent_to_add_comes_back_so(cli: Cli, story: Story) -> None:
    """`git add -N`: in `git diff HEAD`, not in the index's content; restore marks it again."""
    story.checkout.write("planned.py", "PLAN = 1\n")
    story.checkout.git("add", "--intent-to-add", "planned.py")
    story.checkout.write("README.md", "sglang\nstaged\n")
    story.checkout.git("add", "README.md")
    before = index_and_tree(story)
    assert "A planned.py" in before[2]
    result = cli("capture", "local", "--label", "planned", "--repo", str(story.checkout.path))
    assert result.returncode == 0, result.stderr
    story.checkout.git("rm", "-q", "--cached", "planned.py")
    (story.checkout.path / "planned.py").unlink()
    story.checkout.git("reset", "-q", "--hard")           # a clean tree: nothing to stash
    restored = cli("restore", "planned", "--yes")
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert index_and_tree(story) == before
