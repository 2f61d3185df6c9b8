"""The explanation of a HEAD move is true on real histories (issue 13): shallow clones, big
pulls with many hot commits, reflogs, rebases, big patches. Every history is built by git
itself; every count is checked against `git rev-list --count` and every file list against
`git diff --name-only`, through the real CLI (capture local --repo, then diff)."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import Cli
from helpers.diffdata import edit_file
from helpers.folded import item, joined, paragraph, words
from helpers.gitrepos import PYNCCL, ShallowMerge, Story, changed_files, count, git_env, init
from helpers.paths import ROOT


@pytest.fixture
def gcli(cli: Cli) -> Cli:
    cli.env["PYTHONPATH"] = str(ROOT)
    return cli


def capture(cli: Cli, label: str, repo: Path, *args: str) -> None:
    result = cli("capture", "local", "--label", label, "--repo", str(repo), *args)
    assert result.returncode == 0, result.stderr


def diff_json(cli: Cli, *args: str) -> dict[str, Any]:
    result = cli("diff", "good", "bad", "--json", *args)
    assert result.returncode == 1, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def head_finding(document: dict[str, Any]) -> dict[str, Any]:
    found = [f for f in document["findings"] if f["path"][-1:] == ["head"]]
    assert len(found) == 1, document["findings"]
    return found[0]


def verdict_of(stdout: str) -> str:
    """The verdict's paragraph, as one sentence (the text form folds it to 80 columns)."""
    return joined(paragraph(stdout, 1))


# ---- 1. shallow clones ------------------------------------------------------------------------

def test_a_pull_across_a_shallow_edge_says_at_least_and_names_the_boundary(
        gcli: Cli, tmp_path: Path) -> None:
    shape = ShallowMerge(tmp_path / "git")
    capture(gcli, "good", shape.checkout.path)
    new = shape.merge_and_pull()
    old = shape.old
    fetched, truth = count(shape.checkout, f"{old}..{new}"), count(shape.dev, f"{old}..{new}")
    assert (fetched, truth) == (3, ShallowMerge.SIDE + 1)
    capture(gcli, "bad", shape.checkout.path)
    boundary = shape.checkout.git("rev-parse", "HEAD^2^")
    assert boundary in (shape.checkout.path / ".git" / "shallow").read_text().split()

    text = gcli("diff", "good", "bad")
    verdict = verdict_of(text.stdout)
    assert f"at least {fetched} commits pulled into {shape.checkout.path}" in verdict, verdict
    assert f"shallow boundary {boundary[:7]} (side {ShallowMerge.SIDE - 1})" in verdict
    assert "touches" not in verdict  # the cut-off commit's "files" are not the whole tree

    explained = head_finding(diff_json(gcli))["detail"]
    assert explained["complete"] is False and explained["shallow_boundary"] == [boundary]
    added = {c["sha"]: c for c in explained["added"]}
    assert len(added) == fetched
    assert added[boundary]["files"] == [] and added[boundary]["hot"] == []
    for sha, commit in added.items():
        if sha != boundary:  # the merge too: its first-parent diff
            expected = changed_files(shape.checkout, f"{sha}^..{sha}")
            assert sorted(commit["files"]) == sorted(expected), sha
    assert len(added[new]["files"]) == ShallowMerge.SIDE + 1  # README.md and 19 others
    assert PYNCCL not in text.stdout


# ---- 2. hot commits are never hidden behind others: a dozen listed, the rest counted ----------

def test_a_dozen_hot_commits_of_a_big_pull_are_listed_and_the_verdict_names_three(
        gcli: Cli, tmp_path: Path) -> None:
    story = Story(tmp_path / "git")
    capture(gcli, "good", story.checkout.path)
    hot = story.big_pull_upstream(121, 13)
    story.pull()
    capture(gcli, "bad", story.checkout.path)
    total = count(story.checkout, f"{story.good}..HEAD")
    assert total == 121
    for sha in hot:
        assert changed_files(story.checkout, f"{sha}^..{sha}") == [PYNCCL]

    text = gcli("diff", "good", "bad")
    verdict = verdict_of(text.stdout)
    why = f"(touches {PYNCCL}: communication)"
    named = ", ".join(f"{sha[:7]} NCCL tweak {13 - i} {why}" for i, sha in enumerate(hot[:3]))
    assert f"121 commits pulled into {story.checkout.path}" in verdict, verdict
    assert f"13 on a hot path, hottest first: {named} and 10 more" in verdict, verdict
    markdown = gcli("diff", "good", "bad", "--markdown").stdout
    report = gcli("report", "bad", "--vs", "good").stdout
    for shown in (text.stdout, markdown, report):
        listed = [line for line in shown.splitlines() if line.lstrip().startswith("* ")]
        # equal scores: the newer first; the oldest hot commit is counted, not hidden
        assert [line.split()[1] for line in listed] == [sha[:7] for sha in hot[:12]], shown
        assert "... 109 more, 1 of them on a hot path (--all lists them)" in words(shown)
        assert all(PYNCCL in item(shown, f"* {sha[:7]}") for sha in hot[:12])


# ---- 3. reflog moves are counted, not whole entries -------------------------------------------

def test_head_that_moved_and_came_back_counts_only_the_moves_since(gcli: Cli,
                                                                   tmp_path: Path) -> None:
    story = Story(tmp_path / "git")
    story.upstream_moves(3)
    story.pull()
    checkout = story.checkout
    checkout.commit("local tweak", {"notes.md": "x\n"})
    capture(gcli, "good", checkout.path)
    before = len(checkout.git("reflog").splitlines())
    checkout.git("checkout", "-q", "HEAD~2")
    checkout.git("checkout", "-q", "main")
    capture(gcli, "bad", checkout.path)
    since = len(checkout.git("reflog").splitlines()) - before
    assert (before, since) == (3, 2)

    result = gcli("diff", "good", "bad")
    assert result.returncode == 1, result.stderr
    assert f"HEAD of {checkout.path} moved and came back: {since} reflog moves since" \
        in words(result.stdout), result.stdout
    finding = [f for f in diff_json(gcli)["findings"] if f["path"][-1:] == ["reflog"]][0]
    assert [m["message"] for m in finding["detail"]["moves"]] == [
        "checkout: moving from " + checkout.git("rev-parse", "HEAD~2") + " to main",
        "checkout: moving from main to HEAD~2"]


# ---- 4. rebases and operations in progress ----------------------------------------------------

def test_pull_rebase_with_a_local_commit_reads_rebased_onto_pulled(gcli: Cli,
                                                                  tmp_path: Path) -> None:
    story = Story(tmp_path / "git")
    checkout = story.checkout
    local = checkout.commit("Local tuning", {"python/sglang/srt/entrypoints/engine.py": "E=2\n"})
    capture(gcli, "good", checkout.path)
    story.upstream_moves(9)
    checkout.git("-c", "pull.rebase=true", "pull", "-q", "origin", "main")
    capture(gcli, "bad", checkout.path)
    pulled = count(checkout, f"{story.good}..origin/main")
    ours = count(checkout, "origin/main..HEAD")
    assert (pulled, ours) == (9, 1)
    rebased = checkout.head()

    text = gcli("diff", "good", "bad").stdout
    verdict = verdict_of(text)
    assert f"code moved: rebased 1 local commit onto {pulled} pulled in {checkout.path}" \
        in verdict, verdict
    assert "replaced by" not in verdict
    assert "1 on a hot path: " in verdict and "Fix PCG MoE Error (touches " in verdict
    assert f"commits pulled: {pulled}, 1 on a hot path" in text
    assert f"local commits rebased onto them: {ours}" in text
    assert f"{local[:7]} -> {rebased[:7]} Local tuning" in text
    detail = head_finding(diff_json(gcli))["detail"]
    assert detail["rebased"] == [{"old": local, "new": rebased}]


def conflicting(story: Story) -> None:
    """A local commit and an upstream one that change the same README line."""
    story.checkout.commit("Local README", {"README.md": "sglang, local\n"})
    story.dev.commit("Upstream README", {"README.md": "sglang, upstream\n"})
    story.dev.git("push", "-q", "origin", "main")
    story.checkout.git("fetch", "-q", "origin")


@pytest.mark.parametrize("operation, command", [
    ("rebase", ("rebase", "origin/main")),
    ("merge", ("merge", "origin/main")),
    ("cherry-pick", ("cherry-pick", "origin/main")),
])
def test_an_operation_stopped_on_a_conflict_is_reported_with_its_files(
        gcli: Cli, tmp_path: Path, operation: str, command: tuple[str, ...]) -> None:
    story = Story(tmp_path / "git")
    conflicting(story)
    checkout = story.checkout
    capture(gcli, "good", checkout.path)
    with pytest.raises(AssertionError, match="failed"):
        checkout.git(*command)
    capture(gcli, "bad", checkout.path)
    conflicted = changed_files(checkout, "--diff-filter=U")
    assert conflicted == ["README.md"]

    text = gcli("diff", "good", "bad").stdout
    expected = f"{operation} in progress, stopped with 1 conflicted file: README.md"
    assert f"{expected} in {checkout.path}" in verdict_of(text), text
    assert expected in " ".join(gcli("show", "bad").stdout.split())  # show wraps its rows
    finding = [f for f in diff_json(gcli)["findings"] if f["path"][-1:] == ["in_progress"]][0]
    assert finding["after"]["operation"] == operation
    assert finding["after"]["conflicted"] == conflicted


# ---- 5. big patches and untracked files -------------------------------------------------------

def test_a_patch_past_the_cap_keeps_its_files_and_a_changed_untracked_file_is_named(
        gcli: Cli, tmp_path: Path) -> None:
    story = Story(tmp_path / "git")
    checkout = story.checkout
    names = [f"python/sglang/srt/layers/layer_{n:02}.py" for n in range(19)]
    checkout.commit("Layers", {name: "X = 0\n" for name in names})
    checkout.write(names[-1], "X = 1  # still modified in bad\n")  # last in the patch
    checkout.write("notes.txt", "batch 8\n")
    capture(gcli, "good", checkout.path)
    for name in names[:-1]:  # about 400 KB of hunks each: 7.2 MB in all, 1 MiB kept
        checkout.write(name, "".join(f"X_{i} = {i}  # tuned by hand\n" for i in range(13_000)))
    checkout.write("notes.txt", "batch 16\n")
    capture(gcli, "bad", checkout.path)
    modified = changed_files(checkout, "HEAD")
    assert len(modified) == 19 and modified[-1] == names[-1]

    text = gcli("diff", "good", "bad").stdout
    verdict = verdict_of(text)
    assert re.search(r"\(1 file\), 1 untracked file -> patch \d\.\d MB sha256 [0-9a-f]{12} "
                     r"\(19 files\), 1 untracked file; untracked files changed notes\.txt",
                     verdict), verdict
    assert f"- {names[-1]}" not in text  # its hunks are the same: not "no longer changed"
    assert all(f"+ {name}" in text for name in names[:-1])
    show = " ".join(gcli("show", "bad").stdout.split())
    assert "(19 files)" in show, show
    patch = head_or_patch(diff_json(gcli))
    assert patch["files"] == modified and patch["truncated"] is True


def head_or_patch(document: dict[str, Any]) -> dict[str, Any]:
    found = [f for f in document["findings"] if f["path"][-1:] == ["uncommitted"]]
    patch: dict[str, Any] = found[0]["after"]["patch"]
    return patch


# ---- 6. fleet rows that differ in code --------------------------------------------------------

def test_a_fleet_node_on_another_commit_is_explained_like_the_pairwise_diff(
        gcli: Cli, tmp_path: Path) -> None:
    story = Story(tmp_path / "git")
    capture(gcli, "good", story.checkout.path)
    capture(gcli, "good2", story.checkout.path)
    story.upstream_moves()
    story.pull()
    capture(gcli, "bad", story.checkout.path)
    store = Path(gcli.env["ENVSNAP_STORE"])
    pairwise = head_finding(diff_json(gcli))
    assert count(story.checkout, f"{story.good}..HEAD") == len(pairwise["detail"]["added"]) == 9

    files = [str(store / f"{label}.yaml") for label in ("good", "good2", "bad")]
    result = gcli("diff", "--json", "--section", "git", "--fleet", *files)
    assert result.returncode == 1, result.stderr
    rows = [d for d in json.loads(result.stdout)["disagreements"] if d["path"][-1:] == ["head"]]
    assert len(rows) == 1
    assert (rows[0]["rank"], rows[0]["why"]) == (pairwise["rank"], pairwise["why"])
    text = words(gcli("diff", "--section", "git", "--fleet", *files).stdout)
    assert pairwise["why"] in text
    assert "commits now in HEAD: 9, 1 on a hot path" in text and "Fix PCG MoE Error" in text


# ---- 7. smaller ones --------------------------------------------------------------------------

def show_json(cli: Cli, label: str) -> dict[str, Any]:
    result = cli("show", label, "--json")
    assert result.returncode == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def test_a_detached_head_is_recorded_as_its_sha_and_a_relative_repo_as_absolute(
        gcli: Cli, tmp_path: Path) -> None:
    story = Story(tmp_path / "git")
    story.upstream_moves(9)
    story.pull()
    checkout = story.checkout
    checkout.git("checkout", "-q", "HEAD~7")
    target = checkout.head()
    gcli.cwd = checkout.path.parent  # --repo as typed: relative to where capture runs
    capture(gcli, "good", Path(checkout.path.name))
    repos = show_json(gcli, "good")["facts"]["git"]["repos"]
    assert list(repos) == [str(checkout.path)]
    repo = repos[str(checkout.path)]
    assert repo["detached_at"] == target == checkout.git("rev-parse", "main~7")
    assert repo["detached_at_name"] == "HEAD~7"


def test_history_depth_is_an_option_and_the_note_says_how_to_raise_it(
        gcli: Cli, tmp_path: Path) -> None:
    story = Story(tmp_path / "git")
    checkout = story.checkout
    capture(gcli, "good", checkout.path, "--history", "5")
    story.upstream_moves(9)
    story.pull()
    capture(gcli, "bad", checkout.path, "--history", "5")
    pulled = count(checkout, f"{story.good}..HEAD")
    assert pulled == 9
    short = gcli("diff", "good", "bad").stdout
    assert "is not among the newest 5 commits recorded (capture with --history N, N above 5" \
        in words(short), short
    capture(gcli, "bad", checkout.path, "--history", "20", "--force")
    deep = head_finding(diff_json(gcli))
    assert len(deep["detail"]["added"]) == pulled and deep["detail"]["complete"] is True
    assert [c["sha"] for c in deep["detail"]["added"]] == \
        checkout.git("rev-list", f"{story.good}..HEAD").split()


def test_the_restore_plan_counts_the_commits_it_does_not_list(gcli: Cli, tmp_path: Path) -> None:
    story = Story(tmp_path / "git")
    capture(gcli, "good", story.checkout.path)
    story.big_pull_upstream(121, 13)
    story.pull()
    leaving = count(story.checkout, f"{story.good}..HEAD")
    assert leaving == 121
    result = gcli("restore", "good", "--check")
    assert result.returncode == 1, result.stdout + result.stderr
    listed = result.stdout.split("commits on HEAD that the target does not have:")[1]
    assert f"... {leaving - 50} more (git log {story.good[:12]}.." in listed, result.stdout


def test_a_pull_bigger_than_the_window_is_recorded_whole(gcli: Cli, tmp_path: Path) -> None:
    story = Story(tmp_path / "git")
    capture(gcli, "good", story.checkout.path)
    hot = story.big_pull_upstream(260, 3)  # the hot ones are the oldest: past a 200 window
    story.pull()
    capture(gcli, "bad", story.checkout.path)
    pulled = count(story.checkout, f"{story.good}..HEAD")
    assert pulled == 260
    verdict = verdict_of(gcli("diff", "good", "bad").stdout)
    assert f"code moved: {pulled} commits pulled into {story.checkout.path}" in verdict, verdict
    assert f"3 on a hot path, hottest first: {hot[0][:7]} NCCL tweak 3" in verdict
    detail = head_finding(diff_json(gcli))["detail"]
    assert [c["sha"] for c in detail["added"]] == \
        story.checkout.git("rev-list", f"{story.good}..HEAD").split()


def test_a_revert_stopped_on_a_conflict_and_a_bisect_under_way_are_reported(
        gcli: Cli, tmp_path: Path) -> None:
    story = Story(tmp_path / "git")
    checkout = story.checkout
    first = checkout.commit("README once", {"README.md": "sglang 1\n"})
    checkout.commit("README twice", {"README.md": "sglang 2\n"})
    capture(gcli, "good", checkout.path)
    with pytest.raises(AssertionError, match="failed"):
        checkout.git("revert", "--no-edit", first)
    capture(gcli, "bad", checkout.path)
    assert changed_files(checkout, "--diff-filter=U") == ["README.md"]
    text = gcli("diff", "good", "bad").stdout
    assert "revert in progress, stopped with 1 conflicted file: README.md" in text, text

    checkout.git("revert", "--abort")
    checkout.git("bisect", "start", "HEAD", story.good)
    capture(gcli, "bad", checkout.path, "--force")
    document = diff_json(gcli)
    state = [f for f in document["findings"] if f["path"][-1:] == ["in_progress"]][0]["after"]
    assert state["operation"] == "bisect" and state["conflicted"] == []
    assert state["branch"] == "main"
    assert f"bisect in progress in {checkout.path}" in document["verdict"]


def test_list_names_the_machine_behind_local(gcli: Cli) -> None:
    result = gcli("capture", "local", "--label", "here")
    assert result.returncode == 0, result.stderr
    store = Path(gcli.env["ENVSNAP_STORE"])

    def elsewhere(document: dict[str, Any]) -> None:
        document["facts"]["system"]["hostname"] = "gpu-b"
    edit_file(store / "here.yaml", elsewhere, store / "there.yaml")
    here = show_json(gcli, "here")["facts"]["system"]["hostname"]
    rows = {line.split()[0]: line for line in gcli("list").stdout.splitlines()}
    assert rows["here"].endswith(f"local ({here})") and rows["there"].endswith("local (gpu-b)")


def test_bisect_whose_first_bad_commit_is_a_merge_lists_what_it_brought_in(
        gcli: Cli, tmp_path: Path) -> None:
    (tmp_path / "home-git").mkdir()
    repo = init(tmp_path / "repo", git_env(tmp_path / "home-git"))
    repo.commit("Initial", {"speed.txt": "94\n", "README.md": "app\n"})
    capture(gcli, "good", repo.path)
    repo.git("checkout", "-q", "-b", "side")
    side = [repo.commit(f"Side {n}", {f"src/side_{n}.py": f"S = {n}\n",
                                      **({"speed.txt": "60\n"} if n == 2 else {})})
            for n in range(1, 4)]
    repo.git("checkout", "-q", "main")
    for n in range(1, 4):
        repo.commit(f"Main {n}", {f"src/main_{n}.py": f"M = {n}\n"})
    repo.git("merge", "-q", "--no-ff", "side", "-m", "Merge side")
    merge = repo.head()
    for n in range(4, 7):
        repo.commit(f"Main {n}", {f"src/main_{n}.py": f"M = {n}\n"})
    capture(gcli, "bad", repo.path)
    brought = repo.git("rev-list", f"{merge}^1..{merge}^2").split()
    assert brought == side[::-1]

    bench = f"{sys.executable} {ROOT / 'tests' / 'data' / 'bisect_bench.py'}"
    result = gcli("bisect", "good", "bad", "--cmd", bench, "--metric", r"token/s\): ([0-9.]+)",
                  "--repeat", "5", "--cwd", str(repo.path), timeout=180)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"first bad commit: {merge} Merge side" in result.stdout
    listed = result.stdout.split("a merge: it brought in 3 commits:\n")[1].splitlines()[:3]
    assert listed == [f"  {sha} Side {3 - i}" for i, sha in enumerate(brought)], result.stdout


def test_a_submodule_checked_out_elsewhere_is_named_with_both_commits(
        gcli: Cli, tmp_path: Path) -> None:
    env = git_env(tmp_path / "home-git")
    (tmp_path / "home-git").mkdir()
    lib = init(tmp_path / "lib", env)
    first = lib.commit("lib 1", {"kernel.cu": "1\n"})
    second = lib.commit("lib 2", {"kernel.cu": "2\n"})
    top = init(tmp_path / "top", env)
    top.commit("top", {"README.md": "top\n"})
    top.git("-c", "protocol.file.allow=always", "submodule", "add", "-q",
            f"file://{lib.path}", "third_party/lib")
    top.commit("add lib")
    capture(gcli, "good", top.path)
    sub = type(top)(top.path / "third_party" / "lib", env)
    sub.git("checkout", "-q", first)
    sub.write("notes.txt", "tried\n")
    capture(gcli, "bad", top.path)
    recorded = top.git("ls-files", "-s", "third_party/lib").split()[1]
    assert (recorded, sub.head()) == (second, first)

    verdict = verdict_of(gcli("diff", "good", "bad").stdout)
    assert (f"submodule third_party/lib of {top.path}: at {second[:7]} -> at {first[:7]} "
            f"(recorded {second[:7]}), untracked files") in verdict, verdict
