"""gitexplain on recorded histories: forward pulls, resets back, rewritten branches, and
histories that do not reach back far enough (it must say so, not guess)."""
from __future__ import annotations

from typing import Any

from envsnap.diff import gitexplain as gx
from envsnap.diff.hotpaths import hot_patterns


def sha(name: str) -> str:
    return (name * 40)[:40]


def commits(*names: str, files: dict[str, list[str]] | None = None,
            parents: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Newest first; each commit's parent is the next one unless `parents` says otherwise."""
    out = []
    for index, name in enumerate(names):
        parent = (parents or {}).get(name, names[index + 1] if index + 1 < len(names) else "0")
        out.append({"sha": sha(name), "parents": [sha(parent)], "time": index,
                    "author": "a", "subject": f"commit {name}",
                    "files": (files or {}).get(name, [f"docs/{name}.md"])})
    return out


def move(old: str, new: str, message: str, when: int) -> dict[str, Any]:
    return {"selector": "HEAD@{?}", "old": sha(old), "new": sha(new), "time": when,
            "message": message}


def repo(head: str, history: list[dict[str, Any]], reflog: list[dict[str, Any]],
         **extra: Any) -> dict[str, Any]:
    return {"head": sha(head), "history": history, "reflog": reflog, **extra}


PATTERNS = hot_patterns()
BASE_LOG = [move("b", "c", "commit: c", 2), move("a", "b", "commit: b", 1)]


def test_forward_pull_lists_new_commits_with_hot_files() -> None:
    old = repo("c", commits("c", "b", "a"), BASE_LOG, history_complete=True)
    pulled = commits("f", "e", "d", "c", "b", "a",
                     files={"e": ["python/sglang/srt/distributed/parallel_state.py"]})
    new = repo("f", pulled, [move("c", "f", "pull origin main: Fast-forward", 3)] + BASE_LOG)
    found = gx.explain(old, new, PATTERNS)
    assert found["relation"] == "forward" and found["complete"]
    assert [c["subject"] for c in found["added"]] == ["commit f", "commit e", "commit d"]
    assert [c["hot"] for c in found["added"]] == [[], ["communication"], []]
    assert [m["message"] for m in found["moves"]] == ["pull origin main: Fast-forward"]
    assert gx.verb_of(found["moves"]) == "pulled into"


def test_reset_back_lists_the_commits_that_left() -> None:
    old = repo("c", commits("c", "b", "a"), BASE_LOG)
    new = repo("a", commits("a"), [move("c", "a", "reset: moving to HEAD~2", 3)] + BASE_LOG)
    found = gx.explain(old, new, PATTERNS)
    assert found["relation"] == "backward"
    assert [c["subject"] for c in found["dropped"]] == ["commit c", "commit b"]
    assert gx.verb_of(found["moves"]) == "reset in"


def test_rewritten_branch_diverges_from_a_common_base() -> None:
    old = repo("c", commits("c", "b", "a"), BASE_LOG)
    new = repo("y", commits("y", "x", "a"), [move("c", "y", "rebase (finish): returning", 3)]
               + BASE_LOG)
    found = gx.explain(old, new, PATTERNS)
    assert found["relation"] == "diverged" and found["base"] == sha("a")
    assert len(found["added"]) == 2 and len(found["dropped"]) == 2


def test_history_that_does_not_reach_says_so() -> None:
    old = repo("c", commits("c", "b", "a"), BASE_LOG)
    window = commits("z", "y", "x")  # 3 newest of a long history: "c" is older than that
    new = repo("z", window, [], shallow=False, history_complete=False)
    found = gx.explain(old, new, PATTERNS)
    assert found["relation"] == "unknown" and not found["added"]
    assert "does not reach the old HEAD" in found["note"]
    assert "not among the newest 3 commits recorded (capture with --history N" in found["note"]
    assert found["reflog_reaches"] is False


def test_shallow_clone_is_named_as_the_reason() -> None:
    new = repo("z", commits("z"), [], shallow=True)
    found = gx.explain(repo("c", commits("c"), []), new, PATTERNS)
    assert "shallow" in found["note"]


def test_cut_window_marks_the_list_incomplete() -> None:
    # a merge brings in a side branch whose root is older than the recorded window
    merged = commits("m", "c", "b", "a", parents={"m": "c"})
    merged[0]["parents"] = [sha("c"), sha("s")]  # "s" is outside the window
    old = repo("c", commits("c", "b", "a"), BASE_LOG)
    found = gx.explain(old, repo("m", merged, [move("c", "m", "merge side: Merge made", 3)]),
                       PATTERNS)
    assert found["relation"] == "forward" and not found["complete"]


def test_reflog_moves_are_those_after_the_older_snapshot() -> None:
    old = repo("c", commits("c"), BASE_LOG)
    later = [move("x", "c", "checkout: moving from x to main", 5),
             move("c", "x", "checkout: moving from main to x", 4)] + BASE_LOG
    moves, reaches = gx.moves_since(old, repo("c", commits("c"), later))
    assert reaches and [m["time"] for m in moves] == [5, 4]


def test_reflog_falls_back_to_the_move_away_from_the_old_head() -> None:
    old = repo("c", commits("c"), [move("q", "c", "lost to expiry", 0)])
    new_log = [move("d", "e", "commit: e", 9), move("c", "d", "pull: Fast-forward", 8),
               move("b", "c", "commit: c", 7)]
    moves, reaches = gx.moves_since(old, repo("e", commits("e"), new_log))
    assert reaches and [m["time"] for m in moves] == [9, 8]
    assert gx.verb_of(moves) == "pulled into"


def test_a_stash_before_a_checkout_does_not_make_it_a_reset() -> None:
    """`git stash && git checkout main`: the stash's "reset: moving to HEAD" moved nothing."""
    old = repo("c", commits("c", "b", "a"), BASE_LOG)
    log = [move("c", "e", "checkout: moving from old to main", 4),
           move("c", "c", "reset: moving to HEAD", 3)] + BASE_LOG
    found = gx.explain(old, repo("e", commits("e", "d", "c", "b", "a"), log), PATTERNS)
    assert found["relation"] == "forward" and len(found["moves"]) == 2
    assert gx.verb_of(found["moves"]) == "checked out in"
