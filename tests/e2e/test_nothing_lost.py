"""Issue 11, "nothing lost": fault tests through the real CLI.

- a commit that no remote has fails restore's preflight (--check and --yes alike) with one
  line, before any journal, lock or rollback point exists;
- the restore lock is per checkout: a second restore of the same checkout is refused naming
  the holder, --wait waits for it, a restore of another checkout goes ahead;
- fleet hosts whose names clean up to one label are refused before any capture;
- a bench whose store goes away during the runs keeps its record in a file that is said.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from conftest import Cli
from helpers.folded import item, words
from helpers.gitrepos import Story, clone
from helpers.restorestory import capture_good, edit_snapshot, moved_and_dirty, snapshot_of_tree

MISSING = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def story(tmp_path: Path) -> Story:
    return Story(tmp_path / "story")


def store(cli: Cli) -> Path:
    return Path(cli.env["ENVSNAP_STORE"])


def journals(cli: Cli) -> list[Path]:
    return sorted((store(cli) / ".journal").rglob("*.json"))


@dataclass
class Target:
    """Where the restores go: `local`, or a host of the test sshd (its own HOME)."""

    cli: Cli
    host: str
    home: Path

    def locks(self) -> list[Path]:
        return sorted((self.home / ".cache" / "envsnap").glob("**/*.lock"))


def target_for(request: pytest.FixtureRequest, over_ssh: bool) -> Target:
    if over_ssh:
        sshd = request.getfixturevalue("sshd")
        return Target(request.getfixturevalue("ssh_cli"), sshd.addresses[0], sshd.host_home)
    cli = request.getfixturevalue("cli")
    return Target(cli, "local", Path(cli.env["HOME"]))


def refs_and_fetch_head(story: Story) -> tuple[str, bytes | None]:
    """Every ref of the checkout and FETCH_HEAD: what a preflight must leave as it found."""
    fetch_head = story.checkout.path / ".git" / "FETCH_HEAD"
    return (story.checkout.git("for-each-ref", "--format=%(refname) %(objectname)"),
            fetch_head.read_bytes() if fetch_head.exists() else None)


# ---- preflight: every commit reachable before anything moves --------------------------------

@pytest.mark.parametrize("over_ssh", [False, True], ids=["local", "ssh"])
def test_a_commit_no_remote_has_fails_the_check_and_writes_no_journal(
        request: pytest.FixtureRequest, over_ssh: bool, story: Story) -> None:
    target = target_for(request, over_ssh)
    cli = target.cli
    capture_good(cli, story, target.host)
    (store(cli) / "also-good.yaml").write_text((store(cli) / "good.yaml").read_text())
    edit_snapshot(cli, head=MISSING)          # the repo has a remote; the commit is on none
    moved_and_dirty(story)
    before, refs = snapshot_of_tree(story), refs_and_fetch_head(story)
    # Edited by hand, so foreign: trusted, and its checkout named, to be restored.
    named = ["--repo", str(story.checkout.path)]
    for mode in (["--check", *named], ["--yes", "--trust-foreign", *named]):
        result = cli("restore", "good", *mode)
        assert result.returncode == 3, f"{mode}{result.stdout}{result.stderr}"
        # one line for it, folded to 80 columns: that line and the lines under it
        said = words(result.stdout)
        assert said.count("neither here nor on the remotes") == 1, result.stdout
        failure = item(result.stdout, "neither here nor on")
        assert str(story.checkout.path) in said and MISSING in failure, result.stdout
        assert journals(cli) == [] and target.locks() == []
        assert not list(store(cli).glob("pre-restore-*.yaml"))
        assert snapshot_of_tree(story) == before and refs_and_fetch_head(story) == refs
    # Nothing is pending: a restore of another snapshot of the host is not blocked.
    other = cli("restore", "also-good", "--yes")
    assert other.returncode == 0, other.stdout + other.stderr


def test_a_commit_only_on_the_remote_is_fetched_by_the_check_and_leaves_no_ref(
        cli: Cli, story: Story) -> None:
    capture_good(cli, story, "local")
    pushed = story.dev.commit("Only upstream", {"docs/upstream.md": "new\n"})
    story.dev.git("push", "-q", "origin", "main")
    edit_snapshot(cli, head=pushed)
    refs = refs_and_fetch_head(story)
    named = ["--repo", str(story.checkout.path)]     # edited by hand, so foreign
    checked = cli("restore", "good", "--check", *named)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert "fetched from origin to check it (temporary ref removed)" in words(checked.stdout)
    assert "patch (1 file) applies" in words(checked.stdout)   # tried on the fetched commit
    assert refs_and_fetch_head(story) == refs
    assert not (story.checkout.path / ".git" / "refs" / "envsnap").exists()
    applied = cli("restore", "good", "--yes", "--trust-foreign", *named)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert story.checkout.head() == pushed


# ---- fleet labels ---------------------------------------------------------------------------

@pytest.mark.parametrize("label", [["--label", "run1"], []])
def test_fleet_hosts_whose_names_clean_up_to_one_label_are_refused_before_capture(
        cli: Cli, tmp_path: Path, label: list[str]) -> None:
    """`gpu#1` and `gpu_1` both clean up to gpu_1: each would overwrite the other's snapshot
    (both said "saved", exit 0, one file left)."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"gpu": {"hosts": {
        "gpu#1": {"ansible_connection": "local"}, "gpu_1": {"ansible_connection": "local"},
        "gpu2": {"ansible_connection": "local"}}}}))
    result = cli("capture", "gpu", *label, "--inventory", str(inventory))
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1 and result.stdout == ""
    assert "'gpu#1', 'gpu_1' would all be saved as" in result.stderr
    assert not store(cli).exists() or not list(store(cli).rglob("*.yaml"))
    # Hosts whose labels differ are captured as before.
    single = cli("capture", "gpu#1", "gpu2", *label, "--inventory", str(inventory))
    assert single.returncode == 0, single.stdout + single.stderr
    assert len(list(store(cli).rglob("*.yaml"))) == 2


# ---- bench: the record is never thrown away -------------------------------------------------

def test_bench_keeps_its_record_when_the_store_goes_away_during_the_runs(cli: Cli) -> None:
    """The store folder is replaced by a file while the benchmark runs (as root, a read-only
    chmod stops nothing; a store moved or unmounted under a long run does): the record the
    runs made is written to the state dir and the one error line says where."""
    root = store(cli)
    root.mkdir()
    swap = f"[ -d {root} ] && mv {root} {root}.moved && touch {root}; echo 'tok/s: 91.5'"
    result = cli("bench", "local", "--cmd", swap, "--metric", r"tok/s: ([0-9.]+)",
                 "--repeat", "2", "--label", "good", "--sample-interval", "0")
    assert result.returncode == 2, result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if "run " not in line]
    assert len(errors) == 1 and errors[0].startswith(f"envsnap: error: cannot write {root}/")
    kept = Path(cli.env["XDG_STATE_HOME"]) / "envsnap" / "unsaved" / "good.yaml"
    assert errors[0].endswith(f"the record is kept in {kept} (envsnap show {kept})")
    assert "91.5" in result.stdout                     # the record was shown too
    document = yaml.safe_load(kept.read_text())
    assert document["bench"]["values"] == [91.5, 91.5]
    shown = cli("show", str(kept))
    assert shown.returncode == 0, shown.stdout + shown.stderr



# ---- the lock is per checkout ---------------------------------------------------------------

def hold_in_checkout(cli: Cli, story: Story, label: str) -> tuple[subprocess.Popen[bytes], Path]:
    """`restore LABEL --yes` in its own process group, held inside its checkout (a
    post-checkout hook waits for the returned file) with its lock and journal taken."""
    hook = story.checkout.path / ".git" / "hooks" / "post-checkout"
    inside, release = story.checkout.path.parent / "in-checkout", story.checkout.path.parent / "go"
    hook.write_text(f"#!/bin/sh\ntouch {inside}\nwhile [ ! -e {release} ]; do sleep 0.05; done\n")
    hook.chmod(0o755)
    running = subprocess.Popen([sys.executable, "-m", "envsnap", "restore", label, "--yes"],
                               cwd=cli.cwd, env=cli.env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 60
    while not inside.exists():
        assert running.poll() is None and time.monotonic() < deadline, "never reached checkout"
        time.sleep(0.05)
    return running, release


@pytest.mark.parametrize("over_ssh", [False, True], ids=["local", "ssh"])
def test_the_restore_lock_is_per_checkout_names_its_holder_and_can_be_waited_for(
        request: pytest.FixtureRequest, over_ssh: bool, story: Story, tmp_path: Path) -> None:
    target = target_for(request, over_ssh)
    cli = target.cli
    good = capture_good(cli, story, target.host)
    moved_and_dirty(story)
    # A second checkout on the same host, with a snapshot of its own, then moved on.
    other = clone(story.upstream, tmp_path / "other-repo", story.env)
    other_good = other.head()
    captured = cli("capture", target.host, "--label", "other", "--repo", str(other.path))
    assert captured.returncode == 0, captured.stderr
    other.commit("moved on", {"later.txt": "later\n"})

    running, release = hold_in_checkout(cli, story, "good")
    try:
        # Another checkout of the host: not held up.
        beside = cli("restore", "other", "--yes", timeout=60)
        assert beside.returncode == 0, beside.stdout + beside.stderr
        assert other.head() == other_good

        # The same checkout: refused at once, naming who holds it.
        refused = cli("restore", "good", "--yes", timeout=60)
        assert refused.returncode == 3, refused.stdout + refused.stderr
        assert refused.stderr.count("\n") == 1, refused.stderr
        assert (f"{target.host}: envsnap restore holds the lock on {story.checkout.path} "
                f"(pid {running.pid} on ") in refused.stderr
        assert "'envsnap restore good --yes', since 20" in refused.stderr
        assert "--wait SECONDS" in refused.stderr

        # --wait: waits for the running restore to end, then goes on.
        waiter = subprocess.Popen([sys.executable, "-m", "envsnap", "restore", "good", "--yes",
                                   "--wait", "60"], cwd=cli.cwd, env=cli.env, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(2)
        assert waiter.poll() is None             # still waiting: the lock is held
        release.touch()
        out, err = waiter.communicate(timeout=120)
        assert waiter.returncode == 0, out + err
        assert err.startswith(f"{target.host}: waiting up to 60 s for envsnap restore (pid "
                              f"{running.pid} on "), err
        assert f"to release the lock on {story.checkout.path}\n" in err
        assert running.wait(timeout=60) == 0
    finally:
        release.touch()
        if running.poll() is None:
            os.killpg(running.pid, signal.SIGKILL)
        running.wait()
    assert story.checkout.head() == good
    assert journals(cli) == [] and target.locks() == []


def test_wait_gives_up_after_its_seconds_naming_the_holder(cli: Cli, story: Story) -> None:
    capture_good(cli, story, "local")
    moved_and_dirty(story)
    running, release = hold_in_checkout(cli, story, "good")
    try:
        started = time.monotonic()
        result = cli("restore", "good", "--yes", "--wait", "1.5", timeout=60)
        waited = time.monotonic() - started
        assert result.returncode == 3, result.stdout + result.stderr
        assert f"(pid {running.pid} on " in result.stderr and "(waited 1.5 s)" in result.stderr
        assert waited >= 1.5
    finally:
        release.touch()
        running.wait(timeout=60)
