"""A finding's detail says what its TypedDicts declare (diff/findings.py: GitMove, MovedCommit,
WorkerDetail, Detail): every key gitexplain.explain and the diff put there is a declared one,
so the renderers that read them through the types read what is there."""
from __future__ import annotations

from typing import Any

import pytest

from envsnap.diff import gitexplain as gx
from envsnap.diff.compare import diff
from envsnap.diff.findings import Detail, GitMove, MovedCommit, RebasedPair, git_move
from envsnap.diff.hotpaths import hot_patterns
from envsnap.snapshot.records import ReflogEntry


def sha(name: str) -> str:
    return (name * 40)[:40]


def history(*names: str, parents: dict[str, str] | None = None,
            shallow: str = "") -> list[dict[str, Any]]:
    """Newest first, each commit's parent the next one unless `parents` says otherwise."""
    out = []
    for index, name in enumerate(names):
        parent = (parents or {}).get(name, names[index + 1] if index + 1 < len(names) else "0")
        commit = {"sha": sha(name), "parents": [sha(parent)], "time": 100 + index,
                  "author": "a", "subject": f"commit {name}",
                  "files": ["python/sglang/srt/distributed/pynccl.py"]}
        if name == shallow:
            commit["shallow_boundary"] = True
        out.append(commit)
    return out


def entry(old: str, new: str, message: str, when: int) -> dict[str, Any]:
    return {"selector": "HEAD@{0}", "old": sha(old), "new": sha(new), "time": when,
            "tz": "+0000", "message": message}


def repo(head: str, commits: list[dict[str, Any]], log: list[dict[str, Any]],
         **extra: Any) -> dict[str, Any]:
    return {"head": sha(head), "history": commits, "reflog": log, **extra}


BASE = [entry("a", "b", "commit: b", 1)]
MOVES = {
    "forward": (repo("b", history("b", "a"), BASE),
                repo("d", history("d", "c", "b", "a", shallow="c"),
                     [entry("b", "d", "pull origin main: Fast-forward", 3)] + BASE)),
    "backward": (repo("b", history("b", "a"), BASE),
                 repo("a", history("a"), [entry("b", "a", "reset: moving to HEAD~1", 3)] + BASE)),
    "diverged": (repo("x", history("x", "b", "a"), BASE),
                 repo("y", history("y", "c", "b", "a", parents={"y": "c"}),
                      [entry("x", "y", "pull --rebase", 3)] + BASE)),
    "unknown": (repo("b", history("b", "a"), BASE),
                repo("z", history("z"), [entry("q", "z", "checkout: moving to z", 3)],
                     shallow=True)),
}


def undeclared(value: dict[str, Any], typed: Any) -> list[str]:
    return sorted(set(value) - set(typed.__annotations__))


def move_problems(move: dict[str, Any]) -> list[str]:
    found = [f"move: {key}" for key in undeclared(move, GitMove)]
    for side in ("added", "dropped"):
        found += [f"{side}: {key}" for commit in move[side]
                  for key in undeclared(commit, MovedCommit)]
    found += [f"moves: {key}" for step in move["moves"] for key in undeclared(step, ReflogEntry)]
    found += [f"rebased: {key}" for pair in move.get("rebased", [])
              for key in undeclared(pair, RebasedPair)]
    return found


@pytest.mark.parametrize("relation", sorted(MOVES))
def test_an_explained_move_holds_only_declared_keys(relation: str) -> None:
    old, new = MOVES[relation]
    move = gx.explain(old, new, hot_patterns())
    assert move["relation"] == relation
    assert move_problems(dict(move)) == []
    assert git_move(move) is move


def test_the_check_finds_an_undeclared_key() -> None:
    old, new = MOVES["forward"]
    move: dict[str, Any] = dict(gx.explain(old, new, hot_patterns()))
    move["extra"] = 1
    move["added"] = [dict(move["added"][0], branch="main")]
    assert move_problems(move) == ["move: extra", "added: branch"]


def test_every_detail_the_diff_makes_is_declared() -> None:
    """Worker details, reflog moves and merged GPUs' bus ids, from a real diff."""
    def document(head: str, pid: str, width: int, log: list[dict[str, Any]],
                 algo: str) -> Any:
        gpus = {f"0000:{n:02d}:00.0": {"index": n, "pcie_width_current": width,
                                       "pcie_width_max": 16} for n in range(2)}
        return {"schema": 1, "meta": {"label": head, "host": "h", "captured_at": "t"},
                "facts": {"nvidia": {"gpus": gpus},
                          "env": {"shell": {"NCCL_ALGO": "Ring"},
                                  "processes": {pid: {"cmdline": ["python", "w.py"],
                                                      "env": {"RANK": "0",
                                                              "NCCL_ALGO": algo}}}},
                          "git": {"repos": {"/r": repo(head, history("b", "a"), log)}}},
                "digests": {}}
    back = [entry("c", "b", "checkout: moving to b", 4), entry("b", "c", "checkout: c", 3)]
    report = diff(document("b", "10", 16, BASE, "Ring"),
                  document("b", "20", 8, back + BASE, "Tree"))
    details = [f.detail for f in report.findings if f.detail]
    assert {"worker", "gpus", "moves"} <= {key for d in details for key in d}
    assert [key for d in details for key in undeclared(dict(d), Detail)] == []
