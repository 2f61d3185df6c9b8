"""The git collector on real repositories: pulls, reflogs, stashes, patches, odd names, errors."""
from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers.gitrepos import PARALLEL_STATE, PYNCCL, Story, clone, git_env, init

from envsnap.agent import git

TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


@pytest.fixture(autouse=True)
def private_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The collector's git must not read the developer's ~/.gitconfig either."""
    home = tmp_path / "collector-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")


@pytest.fixture
def story(tmp_path: Path) -> Story:
    return Story(tmp_path / "story")


def snap(path: Any, **config: Any) -> dict[str, Any]:
    result = git.collect(dict(config, repos=[str(path)]))
    json.dumps(result)  # whatever is collected must survive the trip to the controller
    return result["facts"]["repos"][str(path)]


def patch_bytes(blob: dict[str, Any]) -> bytes:
    return base64.b64decode(blob["base64"]) if "base64" in blob else blob["text"].encode()


def git_version() -> tuple:
    out = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout
    return tuple(int(part) for part in out.split()[2].split(".")[:2])


# ---- the incident -----------------------------------------------------------------------------

def test_pull_shows_in_reflog_and_history_with_files(story: Story) -> None:
    new_head = story.upstream_moves()
    story.pull()
    repo = snap(story.checkout.path)
    assert repo["head"] == new_head and repo["branch"] == "main" and not repo["detached"]
    newest = repo["reflog"][0]
    assert newest["selector"] == "HEAD@{0}"
    assert newest["message"] == "pull origin main: Fast-forward"
    assert (newest["old"], newest["new"]) == (story.good, new_head)
    assert repo["reflog"][1]["message"].startswith("clone: from file://")
    moved = commits_between(repo["history"], story.good)
    assert [c["sha"] for c in moved] == list(story.checkout.shas(f"{story.good}..HEAD"))
    fix = next(c for c in moved if c["subject"] == "Fix PCG MoE Error")
    assert fix["files"] == [PYNCCL, PARALLEL_STATE]
    assert fix["author"] == "Ada Tester" and fix["time"] > repo["history"][-1]["time"]


def commits_between(history: Any, good: str) -> Any:
    """What the diff does: walk newest first until the good HEAD."""
    shas = [c["sha"] for c in history]
    return history[:shas.index(good)]


def test_history_entries_carry_sha_parents_and_order(story: Story) -> None:
    story.upstream_moves()
    story.pull()
    history = snap(story.checkout.path)["history"]
    assert len(history) == 10 and history[-1]["parents"] == []
    for newer, older in zip(history, history[1:]):
        assert newer["parents"] == [older["sha"]]
    assert history[-1]["files"][0] == "README.md"


def test_upstream_ahead_behind_come_from_local_refs_only(story: Story) -> None:
    story.upstream_moves(2)
    story.checkout.git("fetch", "-q", "origin")
    story.checkout.commit("local work", {"local.txt": "x\n"})
    story.upstream_moves(3)  # not fetched: the collector must not see these
    repo = snap(story.checkout.path)
    assert (repo["upstream"], repo["ahead"], repo["behind"]) == ("origin/main", 1, 2)
    assert repo["remotes"] == {"origin": f"file://{story.upstream}"}


def test_uncommitted_work_staged_unstaged_untracked(story: Story) -> None:
    co = story.checkout
    co.write("python/sglang/srt/entrypoints/engine.py", "ENGINE = 2\n")
    co.git("add", "python/sglang/srt/entrypoints/engine.py")
    co.write("python/sglang/srt/managers/scheduler.py", "SCHED = 2\n")
    co.write("sitecustomize.py", "import os\nos.environ['NCCL_PROTO'] = 'LL'\n")
    work = snap(co.path)["uncommitted"]
    assert work["dirty"] is True
    assert work["tracked"] == {"python/sglang/srt/entrypoints/engine.py": "M.",
                               "python/sglang/srt/managers/scheduler.py": ".M"}
    text = work["patch"]["text"]
    assert "+ENGINE = 2" in text and "+SCHED = 2" in text and not work["patch"]["truncated"]
    assert work["patch"]["sha256"] == hashlib.sha256(text.encode()).hexdigest()
    site = work["untracked"]["sitecustomize.py"]
    assert site["content"] == "import os\nos.environ['NCCL_PROTO'] = 'LL'\n"
    assert site["sha256"] == hashlib.sha256(site["content"].encode()).hexdigest()
    co.write("sitecustomize.py", "import os\n")
    assert snap(co.path)["uncommitted"]["digest"] != work["digest"]


def test_uncommitted_patch_applies_exactly_to_a_clean_clone(story: Story, tmp_path: Path) -> None:
    co = story.checkout
    co.commit("add weights", {"kernel.bin": bytes(range(256)) * 8})
    co.write("kernel.bin", bytes(reversed(range(256))) * 9)
    co.write("README.md", "sglang, patched\n")
    blob = snap(co.path)["uncommitted"]["patch"]
    assert b"GIT binary patch" in patch_bytes(blob)
    fresh = clone(co.path, tmp_path / "fresh", co.env)
    (tmp_path / "p.diff").write_bytes(patch_bytes(blob))
    fresh.git("apply", "--index", str(tmp_path / "p.diff"))
    assert (fresh.path / "kernel.bin").read_bytes() == bytes(reversed(range(256))) * 9
    assert snap(fresh.path)["uncommitted"]["patch"]["sha256"] == blob["sha256"]


def test_staged_rename_and_following_untracked_file(story: Story) -> None:
    story.checkout.git("mv", "README.md", "README.rst")
    story.checkout.write("z.txt", "after the rename record\n")
    work = snap(story.checkout.path)["uncommitted"]
    assert work["tracked"] == {"README.rst": "R."}
    assert list(work["untracked"]) == ["z.txt"]
    assert "deleted file mode" in work["patch"]["text"]  # no rename detection: stable bytes


def test_clean_checkout_is_not_dirty(story: Story) -> None:
    work = snap(story.checkout.path)["uncommitted"]
    assert (work["dirty"], work["tracked"], work["untracked"]) == (False, {}, {})
    assert work["patch"] == {"bytes": 0, "sha256": hashlib.sha256(b"").hexdigest(),
                             "truncated": False, "text": ""}


# ---- stashes ----------------------------------------------------------------------------------

def test_stashes_are_keyed_by_ref_with_their_patch(story: Story) -> None:
    co = story.checkout
    co.write(PYNCCL, "def all_reduce(x):\n    return x  # tuned\n")
    co.write("notes.txt", "local notes\n")
    co.git("stash", "push", "-q", "-u", "-m", "flashinfer MLA tweaks")
    co.write("README.md", "second\n")
    co.git("stash", "push", "-q")
    stashes = snap(co.path)["stashes"]
    assert list(stashes) == ["stash@{0}", "stash@{1}"]
    older = stashes["stash@{1}"]
    assert older["message"] == "On main: flashinfer MLA tweaks"
    assert older["sha"] == co.git("rev-parse", "stash@{1}") and older["base"] == story.good
    assert older["has_untracked"] is True
    text = older["patch"]["text"]
    assert "+    return x  # tuned" in text and "+local notes" in text
    assert stashes["stash@{0}"]["message"].startswith("WIP on main: ")
    if git_version() >= (2, 32):  # stash show learnt --include-untracked in 2.32
        shown = co.git_bytes("stash", "show", "-p", "--binary", "--full-index",
                             "--include-untracked", "stash@{1}")
        # git interleaves untracked files by path; the collector lists them after the rest
        assert file_sections(patch_bytes(older["patch"])) == file_sections(shown)


def file_sections(patch: bytes) -> list:
    return sorted(b"diff --git " + part for part in patch.split(b"diff --git ")[1:])


def test_stash_patches_beyond_the_limit_are_listed_without_patch(story: Story) -> None:
    for number in range(3):
        story.checkout.write("README.md", f"v{number}\n")
        story.checkout.git("stash", "push", "-q")
    stashes = snap(story.checkout.path, max_stash_patches=2)["stashes"]
    assert "patch" in stashes["stash@{1}"]
    assert stashes["stash@{2}"]["patch_skipped"] == "beyond max_stash_patches"


# ---- HEAD states ------------------------------------------------------------------------------

def test_detached_head_at_and_from(story: Story) -> None:
    story.upstream_moves(2)
    story.pull()
    co = story.checkout
    co.git("checkout", "-q", story.good)
    repo = snap(co.path)
    assert (repo["detached"], repo["branch"], repo["head"]) == (True, None, story.good)
    assert repo["detached_at"] == story.good and repo["upstream"] is None
    co.commit("experiment while detached", {"x.txt": "1\n"})
    assert snap(co.path)["detached_from"] == story.good


def test_shallow_clone_has_incomplete_history(story: Story, tmp_path: Path) -> None:
    story.upstream_moves()
    shallow = clone(story.upstream, tmp_path / "shallow", story.env, "--depth", "3")
    repo = snap(shallow.path)
    assert repo["shallow"] is True and repo["history_complete"] is False
    assert len(repo["history"]) == 3
    full = snap(clone(story.upstream, tmp_path / "full", story.env).path)
    assert full["shallow"] is False and full["history_complete"] is True


def test_limits_on_history_and_reflog(story: Story) -> None:
    story.upstream_moves()
    story.pull()
    # The pull's 9 commits would be recorded whole: the budget is what bounds the depth.
    assert len(snap(story.checkout.path, history=4)["history"]) == 10
    repo = snap(story.checkout.path, history=4, history_budget=4, reflog=1)
    assert len(repo["history"]) == 4 and repo["history_complete"] is False
    assert [e["selector"] for e in repo["reflog"]] == ["HEAD@{0}"]
    assert repo["reflog_truncated"] is True


def test_repository_without_commits(tmp_path: Path) -> None:
    repo = init(tmp_path / "new", git_env(tmp_path))
    repo.write("staged.py", "A = 1\n")
    repo.git("add", "staged.py")
    repo.write("loose.txt", "x\n")
    facts = snap(repo.path)
    assert (facts["head"], facts["branch"], facts["history"]) == (None, "main", [])
    assert "+A = 1" in facts["uncommitted"]["patch"]["text"]
    assert list(facts["uncommitted"]["untracked"]) == ["loose.txt"]


def test_path_inside_the_repo_and_a_worktree(story: Story, tmp_path: Path) -> None:
    co = story.checkout
    co.write("python/new.py", "N = 1\n")
    inner = co.path / "python"
    repo = snap(inner)
    assert repo["toplevel"] == str(co.path) and "python/new.py" in repo["uncommitted"]["untracked"]
    co.git("stash", "push", "-q", "-u")
    co.git("worktree", "add", "-q", "-b", "side", str(tmp_path / "wt"))
    tree = snap(tmp_path / "wt")
    assert tree["branch"] == "side" and "stash@{0}" in tree["stashes"]
    assert tree["reflog"][0]["message"].startswith("reset: moving to HEAD")


# ---- caps, odd names, binary ------------------------------------------------------------------

def test_fifty_megabyte_untracked_file_is_hashed_not_kept(story: Story) -> None:
    big = story.checkout.write("checkpoint.txt", b"0123456789" * 5_000_000)
    result = git.collect({"repos": [str(story.checkout.path)]})
    entry = result["facts"]["repos"][str(story.checkout.path)]["uncommitted"]["untracked"]
    assert entry["checkpoint.txt"] == {
        "bytes": 50_000_000, "content_skipped": "over cap",
        "sha256": hashlib.sha256(big.read_bytes()).hexdigest()}
    assert len(json.dumps(result)) < 100_000


def test_hashing_stops_at_its_budget(story: Story) -> None:
    story.checkout.write("huge.bin", b"\0" * 4096)
    entry = snap(story.checkout.path, max_patch_bytes=1024, max_hash_bytes=1000)
    huge = entry["uncommitted"]["untracked"]["huge.bin"]
    assert huge["sha256"] is None and huge["hash_skipped"] == "over max_hash_bytes"


def test_patch_over_cap_keeps_head_size_and_hash(story: Story) -> None:
    co = story.checkout
    co.write("README.md", "".join(f"line {n} é\n" for n in range(50_000)))
    blob = snap(co.path, max_patch_bytes=4096)["uncommitted"]["patch"]
    whole = co.git_bytes("diff", "HEAD", "--binary", "--full-index")
    assert blob["truncated"] is True and blob["bytes"] == len(whole)
    assert blob["sha256"] == hashlib.sha256(whole).hexdigest()
    assert whole.startswith(blob["text"].encode()) and len(blob["text"].encode()) > 4090


def test_non_utf8_and_odd_file_names(story: Story) -> None:
    co = story.checkout
    co.commit("odd names", {b"caf\xe9.txt": "v1\n", "my file.txt": "v1\n", "naïve.txt": "v1\n"})
    co.write(b"caf\xe9.txt", "v2\n")
    co.write("my file.txt", "v2\n")
    co.write(b"new\xff name.txt", "fresh\n")
    repo = snap(co.path)
    assert repo["history"][0]["files"] == ["caf\\xe9.txt", "my file.txt", "naïve.txt"]
    work = repo["uncommitted"]
    assert work["tracked"] == {"caf\\xe9.txt": ".M", "my file.txt": ".M"}
    assert work["untracked"]["new\\xff name.txt"]["content"] == "fresh\n"
    patch = patch_bytes(work["patch"])  # not UTF-8, so kept exactly as base64
    assert "base64" in work["patch"] and b"a/caf\xe9.txt" in patch


def test_binary_untracked_file_is_not_inlined(story: Story) -> None:
    story.checkout.write("model.so", b"\x7fELF\0\0\x01")
    entry = snap(story.checkout.path)["uncommitted"]["untracked"]["model.so"]
    assert entry["content_skipped"] == "binary" and entry["bytes"] == 7


# ---- secrets ----------------------------------------------------------------------------------

def test_tokens_are_redacted_everywhere(story: Story) -> None:
    co = story.checkout
    co.git("remote", "add", "fork", f"https://ada:{TOKEN}@github.com/ada/sglang.git")
    co.git("remote", "add", "mirror", f"https://{TOKEN}@github.com/ada/sglang.git")
    co.git("update-ref", "-m", f"clone: from https://ada:{TOKEN}@github.com/x", "HEAD", "HEAD")
    co.write("README.md", "HF_TOKEN = 'hf_%s'\n" % ("xQ7mK2pR9w" * 3))
    co.write("secrets.txt", f"token={TOKEN}\n")
    result = git.collect({"repos": [str(co.path)]})
    assert TOKEN not in json.dumps(result) and "hf_xQ7mK2pR9w" not in json.dumps(result)
    repo = result["facts"]["repos"][str(co.path)]
    assert repo["remotes"]["fork"] == "https://ada:<secret>@github.com/ada/sglang.git"
    assert repo["remotes"]["mirror"] == "https://<secret>@github.com/ada/sglang.git"
    assert repo["reflog"][0]["message"] == "clone: from https://ada:<secret>@github.com/x"
    assert repo["uncommitted"]["patch"]["redacted"] is True
    assert repo["uncommitted"]["untracked"]["secrets.txt"]["redacted"] is True


# ---- errors -----------------------------------------------------------------------------------

def test_bad_paths_are_recorded_and_good_repos_still_read(story: Story, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    (tmp_path / "file").write_text("x")
    paths = [str(tmp_path / "missing"), str(plain), str(story.checkout.path),
             str(tmp_path / "file")]
    repos = git.collect({"repos": paths})["facts"]["repos"]
    assert repos[paths[0]] == {"error": f"no such directory: {paths[0]}"}
    assert repos[paths[1]] == {"error": f"not a git repository: {paths[1]}"}
    assert repos[paths[2]]["head"] == story.good
    assert repos[paths[3]] == {"error": f"not a directory: {paths[3]}"}


def test_git_missing_on_host(story: Story, tmp_path: Path,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    result = git.collect({"repos": [str(story.checkout.path)]})
    assert result["facts"]["repos"] == {str(story.checkout.path): {"error": "git not found"}}


def test_hanging_git_times_out_per_repo(story: Story, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "bin" / "git"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\nexec {shutil.which('sleep')} 30\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(fake.parent))
    result = git.collect({"repos": [str(story.checkout.path)], "git_timeout": 0.3})
    error = result["facts"]["repos"][str(story.checkout.path)]["error"]
    assert error == "git rev-parse timed out after 0.3s"
    assert result["facts"]["git"]["version"] is None


def test_broken_history_is_recorded_and_the_rest_still_read(tmp_path: Path) -> None:
    repo = init(tmp_path / "broken", git_env(tmp_path))
    repo.commit("first", {"a.txt": "a\n"})
    head = repo.commit("second", {"b.txt": "b\n"})
    tree = repo.git("rev-parse", "HEAD~1^{tree}")
    (repo.path / ".git" / "objects" / tree[:2] / tree[2:]).unlink()
    repo.write("a.txt", "changed\n")
    facts = snap(repo.path)
    assert facts["head"] == head and facts["history"] == []
    assert "history_error" in facts and facts["history_complete"] is False
    assert "+changed" in facts["uncommitted"]["patch"]["text"]


def test_no_repos_configured() -> None:
    assert git.collect({}) == {"facts": {}, "volatile": {}}
    assert git.collect({"repos": []}) == {"facts": {}, "volatile": {}}


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root")
def test_repo_of_another_user_is_read_as_that_user(story: Story) -> None:
    co = story.checkout
    for folder, dirs, files in os.walk(co.path):
        for name in [folder] + [os.path.join(folder, n) for n in dirs + files]:
            os.lchown(name, 65534, 65534)
    refused = subprocess.run(["git", "-C", str(co.path), "status"], capture_output=True)
    assert b"dubious ownership" in refused.stderr
    # git runs as the checkout's owner (gitsafe.py): it must reach the folder, which
    # pytest's own (its user's only) does not let another uid do
    opened = [(folder, folder.stat().st_mode) for folder in Path(co.path).parents
              if folder != Path("/")]
    try:
        for folder, mode in opened:
            folder.chmod(mode | 0o011)
        assert snap(co.path)["head"] == story.good
    finally:
        for folder, mode in opened:
            folder.chmod(mode)


def test_agent_environment_cannot_redirect_git(story: Story, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    other = init(tmp_path / "other", story.env)
    monkeypatch.setenv("GIT_DIR", str(other.path / ".git"))
    assert snap(story.checkout.path)["head"] == story.good


def test_collector_runs_under_the_agent_runner_contract(story: Story) -> None:
    result = git.collect({"repos": [str(story.checkout.path)]})
    assert set(result) == {"facts", "volatile"}
    assert result["facts"]["git"]["version"]
    assert str(story.checkout.path) in result["volatile"]["seconds"]
    assert shutil.which("git") == result["facts"]["git"]["path"]



def test_an_untracked_file_over_the_hash_budget_still_shows_it_was_rewritten(
        story: Story) -> None:
    checkout = story.checkout
    big = checkout.write("weights.bin", b"a" * 4096)
    first = snap(checkout.path, max_patch_bytes=16, max_hash_bytes=1024)["uncommitted"]
    assert first["untracked"]["weights.bin"]["hash_skipped"] == "over max_hash_bytes"
    big.write_bytes(b"b" * 4096)  # same size, other bytes, a later mtime
    os.utime(big, ns=(first["untracked"]["weights.bin"]["mtime_ns"] + 10**9,) * 2)
    second = snap(checkout.path, max_patch_bytes=16, max_hash_bytes=1024)["uncommitted"]
    assert second["digest"] != first["digest"]
    assert second["untracked"]["weights.bin"] != first["untracked"]["weights.bin"]
