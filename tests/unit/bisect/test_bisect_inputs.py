"""What bisect takes from the two snapshots, refused before any host is contacted."""
from __future__ import annotations

from typing import Any

import pytest

from envsnap.bench.run import BenchSpec
from envsnap.bisect.inputs import check_options, good_patch, pick_repo, recorded_baseline
from envsnap.errors import UsageError

PATCH = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-1\n+2\n"


def snapshot(repos: dict[str, Any], bench: dict[str, Any] | None = None) -> dict[str, Any]:
    document: dict[str, Any] = {"meta": {"host": "local"}, "facts": {"git": {"repos": repos}}}
    if bench is not None:
        document["bench"] = bench
    return document


def repo(head: str, top: str = "/srv/app") -> dict[str, Any]:
    return {"head": head, "toplevel": top, "realpath": top}


def test_the_one_repo_both_recorded_is_the_default() -> None:
    good = snapshot({"/srv/app": repo("a"), "/srv/other": repo("x", "/srv/other")})
    bad = snapshot({"/srv/app": repo("b")})
    path, first, second = pick_repo(good, bad, None, ("good", "bad"))
    assert (path, first["head"], second["head"]) == ("/srv/app", "a", "b")


def test_several_repos_in_common_need_repo_and_it_matches_the_toplevel() -> None:
    both = {"/srv/app/": repo("a"), "/srv/other": repo("x", "/srv/other")}
    with pytest.raises(UsageError, match="2 repos in common.*choose one with --repo"):
        pick_repo(snapshot(both), snapshot(both), None, ("good", "bad"))
    path, _, _ = pick_repo(snapshot(both), snapshot(both), "/srv/app", ("good", "bad"))
    assert path == "/srv/app"


def test_a_repo_one_snapshot_could_not_read_is_refused() -> None:
    good = snapshot({"/srv/app": repo("a")})
    bad = snapshot({"/srv/app": {"error": "not a git repository: /srv/app"}})
    with pytest.raises(UsageError, match="'bad' has no HEAD for repo /srv/app "
                                         r"\(not a git repository"):
        pick_repo(good, bad, None, ("good", "bad"))
    with pytest.raises(UsageError, match="'good' has no HEAD for repo /elsewhere"):
        pick_repo(good, good, "/elsewhere", ("good", "bad"))


def test_the_recorded_baseline_must_be_the_same_benchmark() -> None:
    spec = BenchSpec(cmd="python b.py", metric=r"(\d+)")
    record = {"command": "python b.py", "metric": r"(\d+)", "values": [1, 2.5]}
    assert recorded_baseline(snapshot({}, record), spec, "good") == [1.0, 2.5]
    with pytest.raises(UsageError, match="recorded another benchmark"):
        recorded_baseline(snapshot({}, dict(record, command="other")), spec, "good")
    with pytest.raises(UsageError, match="has no recorded benchmark"):
        recorded_baseline(snapshot({}), spec, "good")


def test_with_patch_needs_a_whole_recorded_patch() -> None:
    assert good_patch({"uncommitted": {"patch": {"text": PATCH}}}, "good").files == ["x"]
    with pytest.raises(UsageError, match="recorded no uncommitted patch"):
        good_patch({"uncommitted": {}}, "good")
    with pytest.raises(UsageError, match="was cut at capture"):
        good_patch({"uncommitted": {"patch": {"text": PATCH, "truncated": True}}}, "good")


def test_max_repeat_below_repeat_is_refused() -> None:
    with pytest.raises(UsageError, match="--max-repeat \\(3\\) must be at least --repeat"):
        check_options(BenchSpec(cmd="x", metric="y", repeat=5), 3)
