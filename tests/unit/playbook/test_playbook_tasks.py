"""Task modules (git, files, env_file, ...) called directly on `local`, without a playbook."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from conftest import Cli
from helpers.gitrepos import Story
from helpers.paths import ROOT
from helpers.pythons import (
    make_venv,
    shadowing_python,
    site_packages,
    stdlib_sitecustomize,
    venv_with_own_sitecustomize,
)

from envsnap.errors import ArgError
from envsnap.hostops.patch import find_hunk
from envsnap.hosts.inventory import Host
from envsnap.hosts.transport import LocalTransport
from envsnap.playbook.modules import MODULES
from envsnap.playbook.tasks.base import Context
from envsnap.snapshot.store import Store

ENGINE_PATH = "python/sglang/srt/entrypoints/engine.py"
TASKS = ROOT / "envsnap" / "playbook" / "tasks"


def context(tmp_path: Path, check: bool = False, diff: bool = False) -> Context:
    host = Host(name="local")
    return Context(host=host, transport=LocalTransport(host), store=Store(tmp_path / "store"),
                   check=check, diff=diff, timestamp="20260101-000000")


def git(ctx: Context, repo: Path, action: str, **args: object) -> object:
    return MODULES["git"].run(ctx, MODULES["git"].normalize(
        {"repo": str(repo), "action": action, **args}))


@pytest.fixture
def story(tmp_path: Path) -> Story:
    return Story(tmp_path / "story")


def test_restore_never_resets_or_cleans() -> None:
    source = "".join(path.read_text() for path in TASKS.glob("*.py"))
    assert "MODULE" in source   # the task modules were read: a moved folder fails here
    assert not re.search(r"""["'](reset|clean)["']""", source)
    assert not re.search(r"""["']--hard["']""", source)


def test_stash_a_clean_tree_and_stash_in_check_mode(tmp_path: Path, story: Story) -> None:
    repo = story.checkout.path
    clean = git(context(tmp_path), repo, "stash")
    assert not clean.changed and "nothing to stash" in clean.msg
    story.checkout.write("README.md", "changed\n")
    planned = git(context(tmp_path, check=True, diff=True), repo, "stash")
    assert planned.changed and planned.diff == "   M README.md\n"
    assert story.checkout.git("stash", "list") == ""
    done = git(context(tmp_path), repo, "stash", message="before the experiment")
    assert done.data["stash"] == story.checkout.git("rev-parse", "refs/stash")
    assert story.checkout.git("stash", "list", "--format=%s") == "On main: before the experiment"


def test_checkout_keeps_the_branch_when_it_still_points_there(tmp_path: Path,
                                                             story: Story) -> None:
    good = story.checkout.head()
    story.checkout.git("checkout", "-q", "--detach")
    result = git(context(tmp_path), story.checkout.path, "checkout", sha=good, branch="main")
    assert result.changed and story.checkout.git("symbolic-ref", "--short", "HEAD") == "main"
    story.upstream_moves(2)
    story.pull()
    result = git(context(tmp_path), story.checkout.path, "checkout", sha=good, branch="main")
    assert "(detached)" in result.msg
    assert story.checkout.git("rev-parse", "main") != good  # the user's branch is left alone


def test_checkout_refused_by_a_dirty_tree_loses_nothing(tmp_path: Path, story: Story) -> None:
    good = story.checkout.head()
    story.upstream_moves()
    story.pull()
    story.checkout.write(ENGINE_PATH, "mine\n")
    story.checkout.write("python/sglang/srt/distributed/parallel_state.py", "WORLD = 4\n")
    result = git(context(tmp_path), story.checkout.path, "checkout", sha=good)
    assert result.failed and "refused (nothing was lost)" in result.msg
    assert "parallel_state.py" in result.msg
    assert (story.checkout.path / ENGINE_PATH).read_text() == "mine\n"


@pytest.mark.parametrize(("blob", "message"), [
    ({"text": "diff", "bytes": 9999, "sha256": "0" * 64, "truncated": True}, "cut at capture"),
    ({"text": "<redacted>", "bytes": 10, "sha256": "0" * 64, "truncated": False,
      "redacted": True}, "secrets masked"),
    ({"error": "git diff timed out"}, "holds no patch for this checkout: git diff timed out"),
    ({"text": "diff --git a/x b/x\n", "bytes": 19, "sha256": "0" * 64}, "does not match"),
])
def test_unfaithful_patches_are_refused(tmp_path: Path, story: Story, blob: dict[str, object],
                                        message: str) -> None:
    result = git(context(tmp_path), story.checkout.path, "apply_patch", patch=blob)
    assert result.failed and message in result.msg
    assert story.checkout.git("status", "--porcelain") == ""


def test_verify_reports_drift(tmp_path: Path, story: Story) -> None:
    head = story.checkout.head()
    story.checkout.write("README.md", "drifted\n")
    result = git(context(tmp_path), story.checkout.path, "verify", sha=head, patch="")
    assert result.failed and result.drift
    assert "uncommitted changes differ" in result.msg and "HEAD" not in result.msg
    with pytest.raises(ArgError):
        git(context(tmp_path), story.checkout.path, "verify")


def test_not_a_checkout(tmp_path: Path) -> None:
    result = git(context(tmp_path), tmp_path, "stash")
    assert result.failed and "not a git checkout" in result.msg


def test_find_hunk_names_the_hunk_of_the_file() -> None:
    patch = ("diff --git a/a.py b/a.py\n@@ -1,2 +1,2 @@\n-x\n+y\n"
             "diff --git a/b.py b/b.py\n@@ -3 +3 @@ def f():\n-a\n+b\n@@ -40,3 +40,4 @@\n+c\n")
    assert find_hunk(patch, "b.py", 40) == (2, "@@ -40,3 +40,4 @@")
    assert find_hunk(patch, "b.py", 3) == (1, "@@ -3 +3 @@")
    assert find_hunk(patch, "c.py", 1) == (0, "")


def test_env_file_finds_the_sitecustomize_that_loads(tmp_path: Path) -> None:
    module = MODULES["env_file"]
    python = venv_with_own_sitecustomize(tmp_path / "venv")
    result = module.run(context(tmp_path, check=True), module.normalize(
        {"python": str(python), "env": {"NCCL_PROTO": "LL"}}))
    assert result.changed and result.data["path"] == str(site_packages(python) /
                                                         "sitecustomize.py")
    with pytest.raises(ArgError, match="masked at capture"):
        module.run(context(tmp_path), {"path": str(tmp_path / "x.py"),
                                       "env": {"HF_TOKEN": "<redacted>"}})


def test_env_file_never_writes_a_host_wide_sitecustomize_unasked(tmp_path: Path) -> None:
    """A venv of Debian's python: the stdlib sitecustomize.py (a link into /etc) runs, every
    python3.X of the host loads it, and the venv's own would be shadowed."""
    module = MODULES["env_file"]
    python = make_venv(tmp_path / "venv", shadowing_python())
    stdlib = stdlib_sitecustomize(str(python))
    before = Path(str(stdlib)).read_bytes()
    args = module.normalize({"python": str(python), "env": {"NCCL_PROTO": "LL"}})
    refused = module.run(context(tmp_path), args)
    assert refused.failed and not refused.changed
    assert f"{python}'s own sitecustomize.py would be shadowed by {stdlib} (-> " in refused.msg
    assert "format: pth" in refused.msg and "host_wide: true writes" in refused.msg
    assert "host-wide: loaded by every python3." in refused.msg
    assert Path(str(stdlib)).read_bytes() == before
    named = module.run(context(tmp_path, check=True), {**args, "host_wide": True})
    assert named.changed and named.data["path"] == os.path.realpath(str(stdlib))
    assert "host-wide: loaded by every python3." in named.msg
    # the way that works on every python: a startup line in the venv's own .pth
    done = module.run(context(tmp_path), module.normalize(
        {"python": str(python), "env": {"NCCL_PROTO": "LL"}, "format": "pth"}))
    assert done.changed and done.data["path"] == str(site_packages(python) / "envsnap-env.pth")
    ran = subprocess.run([str(python), "-c", "import os; print(os.environ['NCCL_PROTO'])"],
                         capture_output=True, text=True, check=True, env={"PATH": "/usr/bin"})
    assert ran.stdout == "LL\n" and Path(str(stdlib)).read_bytes() == before


def test_a_folder_in_the_way_is_not_overwritten(tmp_path: Path) -> None:
    (tmp_path / "dest").mkdir()
    result = MODULES["copy"].run(context(tmp_path), {"dest": str(tmp_path / "dest"),
                                                     "content": "x"})
    assert result.failed and "not a regular file" in result.msg
    with pytest.raises(ArgError, match="absolute path"):
        MODULES["copy"].run(context(tmp_path), {"dest": "relative.txt", "content": "x"})


def test_shell_creates_and_check_mode(tmp_path: Path) -> None:
    shell = MODULES["shell"]
    marker = tmp_path / "made"
    args = shell.normalize(f"touch {marker}")
    assert shell.run(context(tmp_path, check=True), args).skipped and not marker.exists()
    assert shell.run(context(tmp_path), args).changed and marker.exists()
    again = shell.run(context(tmp_path), {**args, "creates": str(marker)})
    assert again.skipped and "exists" in again.msg


# ---- arguments of the wrong type, through the real CLI: a failed task that names file:line
# and the argument, never a Python exception's name (those were bugs shown as task failures)

BAD_ARGUMENTS = [
    ("shell: {cmd: echo, timeout: .nan}", "timeout must be a number, not nan"),
    ("shell: {cmd: echo, timeout: -1}", "shell: timeout must be more than 0 seconds, not -1"),
    ("bench: {cmd: echo 1, metric: '(1)', repeat: abc}", "repeat must be a number, not 'abc'"),
    ("bench: {cmd: echo 1, metric: '(1)', run_timeout: .inf}",
     "run_timeout must be a number, not inf"),
    ("bench: {cmd: echo 1, metric: '(1)', baseline: [a, 2]}",
     "bench: baseline must be a snapshot or a list of numbers, not ['a', 2]"),
    ("capture: {label: c, repos: 5}", "repos must be a string or a list of strings, not 5"),
    ("capture: {label: c, procs: {a: 1}}", "procs must be a string or a list of strings"),
    ("capture: {label: c, collector_timeout: -1}",
     "collector_timeout must be more than 0 seconds, not -1"),
]


@pytest.mark.parametrize(("task", "message"), BAD_ARGUMENTS)
def test_a_bad_argument_fails_its_task_with_file_line(cli: Cli, task: str, message: str) -> None:
    (cli.cwd / "pb.yml").write_text(f"- hosts: local\n  tasks:\n    - {task}\n")
    result = cli("play", "pb.yml")
    assert result.returncode == 4, result.stdout + result.stderr
    assert f"failed: [local]: pb.yml:3: {message}" in result.stdout
    assert not re.search(r"\w+Error: ", result.stdout + result.stderr)
    assert not (cli.cwd / "store").exists()
