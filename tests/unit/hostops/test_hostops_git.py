"""hostops.git and hostops.patch on real repositories: stash, checkout, fetch, patch apply."""
from __future__ import annotations

import hashlib
import os
import re
import subprocess
from pathlib import Path

import pytest
from helpers.gitrepos import PYNCCL, Story

from envsnap.agent.git import PATCH_FLAGS
from envsnap.hostops import git
from envsnap.hostops.patch import (
    apply,
    check_on_commit,
    current_digest,
    patch_from,
    take_out,
    upload,
)
from envsnap.hostops.shell import HostShell, OthersCheckouts
from envsnap.hosts.inventory import Host
from envsnap.hosts.transport import LocalTransport

HOSTOPS = Path(__file__).resolve().parents[3] / "envsnap" / "hostops"


@pytest.fixture
def shell() -> HostShell:
    host = Host(name="local")
    return HostShell(host, LocalTransport(host))


@pytest.fixture
def story(tmp_path: Path) -> Story:
    return Story(tmp_path / "story")


def test_nothing_in_hostops_resets_or_cleans() -> None:
    sources = sorted(HOSTOPS.glob("*.py"))
    assert len(sources) >= 8
    text = "".join(path.read_text() for path in sources)
    assert not re.search(r"""["'](reset|clean)["']""", text)
    assert not re.search(r"""["']--hard["']""", text)


def test_stash_push_takes_untracked_files_and_says_which_stash(shell: HostShell,
                                                               story: Story) -> None:
    top = str(story.checkout.path)
    story.checkout.write("README.md", "changed\n")
    story.checkout.write("notes.txt", "mine\n")
    first = git.stash_push(shell, top, "envsnap: first")
    assert first == story.checkout.git("rev-parse", "refs/stash")
    assert git.porcelain(shell, top) == []
    assert git.stash_ref(shell, top, first) == "stash@{0}"
    story.checkout.write("README.md", "again\n")
    second = git.stash_push(shell, top, "envsnap: second")
    assert git.stash_ref(shell, top, first) == "stash@{1}"   # a later stash shifts it
    assert git.stash_ref(shell, top, second) == "stash@{0}"
    assert story.checkout.git("stash", "list", "--format=%s").splitlines() == [
        "On main: envsnap: second", "On main: envsnap: first"]


def test_stash_push_with_nothing_to_stash_is_a_failure_that_moved_nothing(
        shell: HostShell, story: Story) -> None:
    with pytest.raises(git.GitFailure, match="git stash failed, nothing was moved"):
        git.stash_push(shell, str(story.checkout.path), "nothing here")
    assert story.checkout.git("stash", "list") == ""


def test_stash_changes_leaves_untracked_files_when_asked(shell: HostShell,
                                                         story: Story) -> None:
    top = str(story.checkout.path)
    assert git.stash_changes(shell, top, "clean", untracked=True) is None
    story.checkout.write("bench.log", "kept\n")
    assert git.stash_changes(shell, top, "tracked only", untracked=False) is None
    story.checkout.write("README.md", "changed\n")
    stashed = git.stash_changes(shell, top, "tracked only", untracked=False)
    assert stashed is not None
    assert git.porcelain(shell, top) == ["?? bench.log"]


def test_checkout_keeps_the_branch_where_it_still_points(shell: HostShell,
                                                         story: Story) -> None:
    top = str(story.checkout.path)
    good = story.checkout.head()
    story.upstream_moves(2)
    story.pull()
    moved = git.plan_checkout(shell, top, good, "main")
    assert (moved.commit, moved.target, moved.branch) == (good, good, "main")
    assert moved.where == f"{good[:12]} (detached)" and not moved.done
    git.switch(shell, moved)
    assert git.current_branch(shell, top) is None and git.head(shell, top) == good
    back = story.checkout.git("rev-parse", "main")
    git.checkout(shell, top, back, "main")
    assert git.current_branch(shell, top) == "main"
    assert git.plan_checkout(shell, top, back, "main").done


def test_a_checkout_that_would_overwrite_work_is_refused_and_loses_nothing(
        shell: HostShell, story: Story) -> None:
    top = str(story.checkout.path)
    good = story.checkout.head()
    story.upstream_moves(5)
    story.pull()
    story.checkout.write(PYNCCL, "my own edit\n")
    with pytest.raises(git.GitFailure, match="refused \\(nothing was lost\\)"):
        git.checkout(shell, top, good)
    assert (story.checkout.path / PYNCCL).read_text() == "my own edit\n"


def test_a_missing_commit_is_fetched_only_when_allowed(shell: HostShell, story: Story) -> None:
    top = str(story.checkout.path)
    new = story.upstream_moves(1)
    with pytest.raises(git.GitFailure, match="not in this checkout; fetch: true would look on "
                                             "origin"):
        git.ensure_commit(shell, top, new, fetch=False)
    tracking = story.checkout.git("rev-parse", "origin/main")
    commit, said = git.ensure_commit(shell, top, new, fetch=True, probe=True)
    assert commit == new and "temporary ref removed" in said
    # the probe added objects only: no ref of its own left, the remote-tracking ref unmoved
    assert story.checkout.git("for-each-ref", "refs/envsnap") == ""
    assert story.checkout.git("rev-parse", "origin/main") == tracking
    commit, said = git.ensure_commit(shell, top, new, fetch=True)
    assert (commit, said) == (new, "")   # the probe's objects are there now


def test_a_commit_no_remote_has_is_a_failure(shell: HostShell, story: Story) -> None:
    missing = "0123456789abcdef0123456789abcdef01234567"
    with pytest.raises(git.GitFailure, match="neither here nor on the remotes"):
        git.ensure_commit(shell, str(story.checkout.path), missing, fetch=True)


def captured_patch(story: Story) -> bytes:
    """`git diff HEAD` as the capture agent takes it."""
    return subprocess.run(["git", "diff", "HEAD", *PATCH_FLAGS, "--"], cwd=story.checkout.path,
                          env=story.env, capture_output=True, check=True).stdout


def test_a_patch_goes_back_on_whole_and_hashes_as_captured(shell: HostShell,
                                                           story: Story) -> None:
    top = str(story.checkout.path)
    story.checkout.write(PYNCCL, "def all_reduce(x):\n    return x * 2\n")
    story.checkout.write("new.py", "NEW = 1\n")
    story.checkout.git("add", "new.py")
    data = captured_patch(story)
    patch = patch_from({"text": data.decode(), "sha256": hashlib.sha256(data).hexdigest()})
    assert patch.files == ["new.py", PYNCCL] and patch.new_files == ["new.py"]
    assert current_digest(shell, top) == patch.sha256
    git.stash_push(shell, top, "put aside")
    quoted = upload(shell, patch)
    apply(shell, top, patch, quoted)
    assert current_digest(shell, top) == patch.sha256
    assert take_out(shell, top, quoted) is None       # and out again, exactly
    assert git.porcelain(shell, top) == []
    assert take_out(shell, top, quoted) is not None   # not in: git says why


def test_a_patch_that_does_not_apply_names_its_hunk_and_changes_nothing(
        shell: HostShell, story: Story) -> None:
    top = str(story.checkout.path)
    story.checkout.write(PYNCCL, "def all_reduce(x):\n    return x * 2\n")
    patch = patch_from(captured_patch(story).decode())
    git.stash_push(shell, top, "put aside")
    story.upstream_moves(5)
    story.pull()
    moved = story.checkout.head()
    with pytest.raises(git.GitFailure, match=f"{re.escape(PYNCCL)}: hunk #1 \\(@@ -1,2 \\+1,2 "
                                             "@@\\) does not apply"):
        check_on_commit(shell, top, moved, patch)
    with pytest.raises(git.GitFailure, match="does not apply \\(nothing was changed\\)"):
        apply(shell, top, patch, upload(shell, patch))
    assert git.porcelain(shell, top) == []
    check_on_commit(shell, top, story.checkout.git("rev-parse", "HEAD~5"), patch)   # applies
    uploads = Path(os.environ["HOME"], ".cache/envsnap/tmp")
    assert len(list(uploads.glob("patch-*.diff"))) == 1   # the checks removed theirs


def test_reads_switch_every_configured_command_off_and_writes_keep_the_users(
        shell: HostShell) -> None:
    read = git.flags(shell, "/co", ("status",))
    assert "core.hooksPath=/dev/null" in read and "protocol.allow=never" in read
    assert "credential.helper=" in read and "core.fsmonitor=false" in read
    written = git.flags(shell, "/co", ("checkout", "main"))
    assert "core.fsmonitor=false" in written and "core.hooksPath=/dev/null" not in written
    assert not any(flag.startswith("safe.directory") for flag in read + written)
    assert "--no-ext-diff" in git.command(shell, "/co", "diff", "HEAD")


def test_an_admitted_checkout_of_another_user_runs_none_of_its_commands(
        shell: HostShell) -> None:
    admitted = HostShell(shell.host, shell.transport, others=OthersCheckouts())
    assert admitted.others is not None
    admitted.others.switches["/co"] = ["-c", "filter.lfs.process="]
    written = git.flags(admitted, "/co", ("checkout", "main"))
    assert "safe.directory=/co" in written and "filter.lfs.process=" in written
    assert "core.hooksPath=/dev/null" in written and "protocol.ext.allow=never" in written
    assert "protocol.git.allow=never" in written
    assert not any(f.startswith("safe.directory") for f in git.flags(admitted, "/other",
                                                                      ("status",)))
