"""No command that a checkout's git config names runs when envsnap reads it, and another
user's checkout is moved only as the flag says.

Every git setting that runs a command (the list below) is planted in a real checkout as a
command that writes a marker file, in .git/config, in files it includes, in .gitattributes
and .git/info/attributes; the checkout is then read through the real CLI (capture, locally
and over the test sshd, timeline, diff) and no marker may appear. As root (CI), the
checkout is handed to another uid: capture still reads it (as that user), and restore,
bisect and explain refuse it (exit 2, nothing moved) unless --as-root-in-others-checkouts,
with which they move it and still run none of its commands.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Cli
from helpers.bisecthistory import BENCH, METRIC, History, regression_at
from helpers.gitrepos import Story, git_env, init
from helpers.restorestory import capture_good, moved_and_dirty
from helpers.sshd import Sshd

from envsnap.agent import gitsafe
from envsnap.errors import ExitCode

OTHER_UID = 65534
as_root = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                             reason="handing a checkout to another uid needs root (CI runs so)")


def touch(marks: Path, name: str) -> str:
    return f"touch {marks / name}"


def command_settings(marks: Path) -> dict[str, str]:
    """git's settings that run a command, each as one that leaves a marker named after it."""
    def cmd(name: str, then: str = "false") -> str:
        return f"{touch(marks, name)}; {then}"

    return {
        "core.fsmonitor": cmd("core.fsmonitor"),
        "core.hooksPath": str(marks.parent / "hooks"),
        "core.sshCommand": cmd("core.sshCommand"),
        "core.pager": cmd("core.pager", "cat"),
        "pager.status": cmd("pager.status", "cat"),
        "pager.diff": cmd("pager.diff", "cat"),
        "core.editor": cmd("core.editor"),
        "sequence.editor": cmd("sequence.editor"),
        "core.askPass": cmd("core.askPass"),
        "core.gitProxy": cmd("core.gitProxy"),
        "core.alternateRefsCommand": cmd("core.alternateRefsCommand"),
        "credential.helper": "!" + cmd("credential.helper"),
        "diff.external": cmd("diff.external", "true"),
        "diff.evil.command": cmd("diff.evil.command", "true"),
        "diff.evil.textconv": cmd("diff.evil.textconv", "cat"),
        "filter.evil.clean": cmd("filter.evil.clean", "cat"),
        "filter.evil.smudge": cmd("filter.evil.smudge", "cat"),
        "filter.evil.required": "true",
        "filter.proc.process": cmd("filter.proc.process"),
        "merge.evil.driver": cmd("merge.evil.driver"),
        "gpg.program": cmd("gpg.program"),
        "gpg.ssh.program": cmd("gpg.ssh.program"),
        "log.showSignature": "true",
        "commit.gpgSign": "true",
        "uploadpack.packObjectsHook": cmd("uploadpack.packObjectsHook"),
        "protocol.ext.allow": "always",
        "remote.evil.url": f"ext::sh -c {touch(marks, 'protocol.ext')}",
        "remote.origin.uploadpack": cmd("remote.uploadpack"),
        "submodule.evil.update": "!" + cmd("submodule.update"),
        "alias.status": "!" + cmd("alias.status"),
        "alias.diff": "!" + cmd("alias.diff"),
        "include.path": str(marks.parent / "included.gitconfig"),
        f"includeIf.gitdir:{marks.parent}/.path": str(marks.parent / "conditional.gitconfig"),
    }


HOOKS = ("post-checkout", "pre-commit", "post-commit", "post-merge", "post-rewrite",
         "reference-transaction", "post-index-change", "pre-auto-gc", "fsmonitor-watchman",
         "pre-push", "push-to-checkout")


def plant(checkout: Path, marks: Path) -> None:
    """Every command-running setting, as markers: in the config, in included files (one of
    them conditional), as hooks in both hook folders, and attributes that name the drivers."""
    marks.mkdir(mode=0o777, exist_ok=True)
    marks.chmod(0o1777)   # another uid's command could write here too
    (marks.parent / "included.gitconfig").write_text(
        f"[filter \"included\"]\n\tclean = {touch(marks, 'include.filter')}; cat\n"
        f"[core]\n\tfsmonitor = {touch(marks, 'include.fsmonitor')}; false\n")
    (marks.parent / "conditional.gitconfig").write_text(
        f"[diff]\n\texternal = {touch(marks, 'includeIf.diff.external')}; true\n")
    for folder in (marks.parent / "hooks", checkout / ".git" / "hooks"):
        folder.mkdir(exist_ok=True)
        for hook in HOOKS:
            (folder / hook).write_text(f"#!/bin/sh\n{touch(marks, 'hook.' + hook)}\n")
            (folder / hook).chmod(0o755)
    for key, value in command_settings(marks).items():
        git(checkout, "config", "--add", key, value)
    (checkout / ".gitattributes").write_text("* filter=evil diff=evil merge=evil\n"
                                             "*.md filter=proc\n")
    (checkout / ".git" / "info").mkdir(exist_ok=True)
    (checkout / ".git" / "info" / "attributes").write_text("*.py filter=included\n")


def git(checkout: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(checkout), *args], check=True, text=True,
                          capture_output=True).stdout


def ran(marks: Path) -> list[str]:
    return sorted(path.name for path in marks.iterdir())


@pytest.fixture
def story() -> Iterator[Story]:
    """The story under a folder every uid can reach (pytest's own is its user's only)."""
    root = Path(tempfile.mkdtemp(prefix="envsnap-owners-"))
    root.chmod(0o755)
    try:
        yield Story(root / "story")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def dirty_and_planted(story: Story) -> Path:
    """Changes git must look at (a modified file whose stat is new, an untracked one), then
    the markers planted. Returns the marker folder, empty."""
    checkout = Path(story.checkout.path)
    marks = checkout.parent / "marks"
    story.checkout.write("README.md", "sglang\nwork in progress\n")
    story.checkout.write("python/new.py", "NEW = 1\n")
    plant(checkout, marks)
    return marks


def hand_to(path: Path, uid: int) -> None:
    for folder, dirs, files in os.walk(path):
        for name in [folder] + [os.path.join(folder, n) for n in dirs + files]:
            os.lchown(name, uid, uid)


def test_every_command_running_setting_has_a_switch() -> None:
    """The switches envsnap passes cover each setting planted above, by name or driver."""
    switched = {setting.partition("=")[0].lower() for setting in gitsafe.NO_COMMANDS}
    for key in ("core.fsmonitor", "core.hookspath", "core.editor", "sequence.editor",
                "core.pager", "core.askpass", "core.sshcommand", "credential.helper",
                "diff.external", "gpg.program", "gpg.ssh.program", "protocol.ext.allow"):
        assert key in switched, key
    listing = (b"filter.evil.clean\nx\0filter.proc.process\nx\0merge.evil.driver\nx\0"
               b"remote.origin.uploadpack\nx\0submodule.evil.update\n!x\0remote.o.url\nu\0")
    flags = gitsafe.driver_flags(listing)
    for setting in ("filter.evil.clean=", "filter.evil.smudge=", "filter.evil.process=",
                    "filter.evil.required=false", "filter.proc.process=",
                    "merge.evil.driver=", "remote.origin.uploadpack=git-upload-pack",
                    "submodule.evil.update=checkout"):
        assert setting in flags, setting
    assert not any(flag.startswith("remote.o.") for flag in flags)
    assert gitsafe.command_args(["diff", "HEAD"])[:3] == ["diff", "--no-ext-diff",
                                                          "--no-textconv"]


def test_a_driver_whose_name_cannot_be_switched_off_is_not_read() -> None:
    with pytest.raises(gitsafe.Unsafe, match="cannot be switched off"):
        gitsafe.driver_flags(b"filter.a=b.clean\ntouch x\0")


@pytest.mark.parametrize("over_ssh", [False, pytest.param(True, marks=pytest.mark.ssh)],
                         ids=["local", "ssh"])
def test_capture_timeline_and_diff_run_nothing_the_checkout_configured(
        request: pytest.FixtureRequest, cli: Cli, story: Story, over_ssh: bool) -> None:
    host = "local"
    if over_ssh:
        cli = request.getfixturevalue("ssh_cli")
        sshd: Sshd = request.getfixturevalue("sshd")
        host = sshd.addresses[0]
    marks = dirty_and_planted(story)
    repo = str(story.checkout.path)
    first = cli("capture", host, "--label", "one", "--repo", repo)
    assert first.returncode == 0, first.stdout + first.stderr
    story.checkout.write("README.md", "sglang\nmore work\n")
    second = cli("capture", host, "--label", "two", "--repo", repo)
    assert second.returncode == 0, second.stderr
    shown = cli("diff", "one", "two")
    assert shown.returncode == 1, shown.stdout + shown.stderr
    assert "README.md" in shown.stdout
    timeline = cli("timeline", host, "--repo", repo, "--since", "1h")
    assert timeline.returncode in (0, 1), timeline.stderr
    assert ran(marks) == []
    # and the capture did read the work: the patch is there
    document = Path(cli.env["ENVSNAP_STORE"], "two.yaml").read_text()
    assert "more work" in document


def test_a_submodules_own_filter_does_not_run_on_capture(cli: Cli, tmp_path: Path) -> None:
    """`git status` looks into each submodule with a git of its own: the switches reach it,
    the submodule's own drivers included."""
    env = git_env(tmp_path / "home-git")
    (tmp_path / "home-git").mkdir()
    sub = init(tmp_path / "lib", env)
    sub.commit("lib", {"weights.txt": "a\n"})
    top = init(tmp_path / "app", env)
    top.commit("app", {"main.py": "M = 1\n"})
    top.git("-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub.path), "lib")
    top.commit("lib added")
    inner = Path(top.path) / "lib"
    marks = tmp_path / "marks"
    marks.mkdir()
    git(inner, "config", "filter.subevil.clean", f"{touch(marks, 'submodule.filter')}; cat")
    git(inner, "config", "filter.subevil.required", "true")
    (inner / ".gitattributes").write_text("* filter=subevil\n")
    (inner / "weights.txt").write_text("b\n")   # same size: git must read it to compare
    result = cli("capture", "local", "--label", "app", "--repo", str(top.path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert ran(marks) == []
    document = Path(cli.env["ENVSNAP_STORE"], "app.yaml").read_text()
    assert "modified: true" in document


@as_root
@pytest.mark.parametrize("over_ssh", [False, pytest.param(True, marks=pytest.mark.ssh)],
                         ids=["local", "ssh"])
def test_root_reads_another_users_checkout_as_that_user_and_runs_nothing(
        request: pytest.FixtureRequest, cli: Cli, story: Story, over_ssh: bool) -> None:
    host = "local"
    if over_ssh:
        cli = request.getfixturevalue("ssh_cli")
        host = request.getfixturevalue("sshd").addresses[0]
    marks = dirty_and_planted(story)
    hand_to(story.checkout.path, OTHER_UID)
    refused = subprocess.run(["git", "-C", str(story.checkout.path), "status"],
                             capture_output=True, text=True)
    assert "dubious ownership" in refused.stderr   # git's own check stands for root
    result = cli("capture", host, "--label", "theirs", "--repo", str(story.checkout.path))
    assert result.returncode == 0, result.stdout + result.stderr
    document = Path(cli.env["ENVSNAP_STORE"], "theirs.yaml").read_text()
    assert snapshot_of_tree_as_root(story)[0] in document and "work in progress" in document
    timeline = cli("timeline", host, "--repo", str(story.checkout.path), "--since", "1h")
    assert timeline.returncode in (0, 1), timeline.stderr
    assert ran(marks) == []


@as_root
def test_restore_refuses_another_users_checkout_without_the_flag(cli: Cli,
                                                                 story: Story) -> None:
    capture_good(cli, story, "local")
    moved_and_dirty(story)
    marks = dirty_and_planted(story)
    hand_to(story.checkout.path, OTHER_UID)
    before = snapshot_of_tree_as_root(story)

    result = cli("restore", "good", "--repo", str(story.checkout.path), "--yes")
    assert result.returncode == ExitCode.USAGE, result.stdout + result.stderr
    said = result.stderr.strip().splitlines()
    assert len(said) == 1 and "--as-root-in-others-checkouts" in said[0], result.stderr
    assert f"belongs to uid {OTHER_UID}" in said[0]
    assert snapshot_of_tree_as_root(story) == before
    assert ran(marks) == []


@as_root
def test_restore_with_the_flag_moves_it_and_runs_none_of_its_commands(
        cli: Cli, story: Story) -> None:
    good = capture_good(cli, story, "local")
    moved_and_dirty(story)
    marks = dirty_and_planted(story)
    hand_to(story.checkout.path, OTHER_UID)

    result = cli("restore", "good", "--repo", str(story.checkout.path), "--yes",
                 "--as-root-in-others-checkouts")
    assert ran(marks) == []
    assert snapshot_of_tree_as_root(story)[0] == good, result.stdout + result.stderr


@as_root
@pytest.mark.parametrize("command", ["bisect", "explain"])
def test_bisect_and_explain_refuse_another_users_checkout_without_the_flag(
        cli: Cli, story: Story, command: str) -> None:
    capture_good(cli, story, "local")
    story.upstream_moves()
    story.pull()
    bad = cli("capture", "local", "--label", "bad", "--repo", str(story.checkout.path))
    assert bad.returncode == 0, bad.stderr
    marks = dirty_and_planted(story)
    hand_to(story.checkout.path, OTHER_UID)
    before = snapshot_of_tree_as_root(story)
    bench = f"{sys.executable} -c \"print('gen throughput (token/s): 94')\""
    args = ["--cmd", bench, "--metric", r"token/s\): ([0-9.]+)", "--yes"] \
        if command == "explain" else ["--cmd", bench, "--metric", r"token/s\): ([0-9.]+)"]
    result = cli(command, "good", "bad", *args, timeout=180)
    assert result.returncode == ExitCode.USAGE, result.stdout + result.stderr
    assert "--as-root-in-others-checkouts" in result.stderr
    assert snapshot_of_tree_as_root(story) == before
    assert ran(marks) == []


def snapshot_of_tree_as_root(story: Story) -> tuple[str, str, list[str], str]:
    """snapshot_of_tree, with git allowed to look at the other uid's checkout for the test."""
    path = str(story.checkout.path)
    plain = ["-c", f"safe.directory={path}", "-c", "core.fsmonitor=false",
             "-c", "core.hooksPath=/dev/null", "-c", "filter.evil.clean=",
             "-c", "filter.evil.smudge=", "-c", "filter.evil.required=false",
             "-c", "filter.proc.process=", "-c", "filter.included.clean="]
    head = git(story.checkout.path, *plain, "rev-parse", "HEAD").strip()
    status = git(story.checkout.path, *plain, "status", "--porcelain")
    stashes = git(story.checkout.path, *plain, "stash", "list", "--format=%gs").splitlines()
    return head, status, stashes, (story.checkout.path / "README.md").read_text()



@as_root
def test_bisect_with_the_flag_finds_the_commit_and_runs_none_of_its_commands(
        cli: Cli, story: Story) -> None:
    history = History(Path(story.checkout.path).parent.parent / "history")
    history.capture(cli, "good")
    shas = history.commits(regression_at(3, 4), slow_at=3)
    history.capture(cli, "bad")
    checkout = Path(history.repo.path)
    marks = checkout.parent / "marks"
    plant(checkout, marks)
    hand_to(checkout, OTHER_UID)

    result = cli("bisect", "good", "bad", "--cmd", BENCH, "--metric", METRIC, "--repeat", "3",
                 "--cwd", str(checkout), "--as-root-in-others-checkouts", timeout=180)
    assert result.returncode == ExitCode.DRIFT, result.stdout + result.stderr
    assert f"first bad commit: {shas[2]}" in result.stdout.replace("\n", " ")
    assert ran(marks) == []
    head = git(checkout, "-c", f"safe.directory={checkout}", "rev-parse", "HEAD").strip()
    assert head == shas[-1]
