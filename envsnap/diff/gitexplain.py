"""Why HEAD moved: reflog entries and commits between two snapshots of one repository.

Only the history recorded at capture time is used (facts.git.repos[path].history, newest
first, with parents and files; reflog newest first with old and new sha), so the answer is
the same wherever the diff runs. When that history does not reach the other HEAD (a shallow
clone, a rewritten branch, more commits than the recorded window) the explanation says so
instead of guessing.
"""
from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from typing import Any

from envsnap.words import plural

# (pattern, what it is): a commit touching a matching file is on a performance-hot path.
DEFAULT_HOT_PATHS: list[tuple[str, str]] = [
    ("pynccl", "NCCL"), ("nccl", "NCCL"), ("parallel_state", "NCCL"),
    ("custom_all_reduce", "all-reduce"), ("all_reduce", "all-reduce"),
    ("allreduce", "all-reduce"), ("attention", "attention"), ("scheduler", "scheduler"),
    ("cuda_graph", "CUDA-graph"), ("cudagraph", "CUDA-graph"),
]
CONFIGURED = "configured hot"
# The first word of a reflog message says how HEAD moved; when several kinds of move
# happened, the first in this order names them (a pull followed by a commit was a pull).
VERBS = {"pull": "pulled into", "merge": "merged into", "rebase": "rebased in",
         "cherry-pick": "cherry-picked into", "am": "applied in", "reset": "reset in",
         "checkout": "checked out in", "commit": "committed in"}

Graph = dict[str, dict[str, Any]]


def hot_patterns(configured: Iterable[str] = ()) -> list[tuple[str, str]]:
    """Configured patterns first: they are what the user asked about, and rank higher."""
    return [(str(p), CONFIGURED) for p in configured] + DEFAULT_HOT_PATHS


def hot_label(path: str, patterns: list[tuple[str, str]]) -> str | None:
    """A pattern with glob characters matches the path or its file name; any other pattern
    is a case-insensitive substring, so "pynccl" matches .../device_communicators/pynccl.py."""
    lowered = path.lower()
    for pattern, label in patterns:
        if any(c in pattern for c in "*?["):
            name = path.rsplit("/", 1)[-1]
            if fnmatch.fnmatch(path, pattern) or fnmatch.fnmatch(name, pattern):
                return label
        elif pattern.lower() in lowered:
            return label
    return None


def annotate(commit: dict[str, Any], patterns: list[tuple[str, str]]) -> dict[str, Any]:
    hot = {}
    for path in commit.get("files") or []:
        label = hot_label(str(path), patterns)
        if label:
            hot[str(path)] = label
    annotated = {"sha": commit.get("sha"), "subject": commit.get("subject"),
                 "author": commit.get("author"), "time": commit.get("time"),
                 "files": list(commit.get("files") or []), "hot_files": hot,
                 "hot": sorted(set(hot.values()))}
    if commit.get("shallow_boundary"):
        annotated["shallow_boundary"] = True
    return annotated


# ---- the commit graph of one recorded history ------------------------------------------------

def graph_of(history: list[dict[str, Any]]) -> Graph:
    return {str(c["sha"]): c for c in history if isinstance(c, dict) and c.get("sha")}


def reachable(start: str, graph: Graph) -> tuple[set[str], bool]:
    """(shas reachable from start inside the window, whether the walk hit its edge)."""
    seen: set[str] = set()
    edge = False
    stack = [start]
    while stack:
        sha = stack.pop()
        if sha in seen:
            continue
        if sha not in graph:
            edge = True
            continue
        seen.add(sha)
        stack.extend(graph[sha].get("parents") or [])
    return seen, edge


def in_order(shas: set[str], history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c for c in history if c.get("sha") in shas]


def common_base(new: str, new_graph: Graph, old: str, old_graph: Graph) -> str | None:
    """The newest commit both HEADs reach, each in its own recorded window."""
    old_side, _ = reachable(old, old_graph)
    new_side, _ = reachable(new, new_graph)
    for commit in new_graph.values():  # history order: newest first
        sha = str(commit["sha"])
        if sha in old_side and sha in new_side:
            return sha
    return None


def between(old_repo: dict[str, Any], new_repo: dict[str, Any]) -> dict[str, Any]:
    """The commits that arrived and left, with how the two HEADs relate."""
    old, new = str(old_repo.get("head")), str(new_repo.get("head"))
    old_hist, new_hist = old_repo.get("history") or [], new_repo.get("history") or []
    old_graph, new_graph = graph_of(old_hist), graph_of(new_hist)
    if old in new_graph:
        added, edge = only_from(new, old, new_graph)
        return {"relation": "forward", "added": in_order(added, new_hist), "dropped": [],
                "complete": not edge}
    if new in old_graph:
        dropped, edge = only_from(old, new, old_graph)
        return {"relation": "backward", "added": [], "dropped": in_order(dropped, old_hist),
                "complete": not edge}
    base = common_base(new, new_graph, old, old_graph)
    if base is None:
        return {"relation": "unknown", "added": [], "dropped": [], "complete": False}
    added, edge_new = only_from(new, base, new_graph)
    dropped, edge_old = only_from(old, base, old_graph)
    return {"relation": "diverged", "base": base, "added": in_order(added, new_hist),
            "dropped": in_order(dropped, old_hist), "complete": not (edge_new or edge_old)}


def only_from(tip: str, base: str, graph: Graph) -> tuple[set[str], bool]:
    """Commits reachable from tip but not from base, and whether the window cut that set
    short: one of them has a parent outside the window that base does not reach either."""
    from_tip, _ = reachable(tip, graph)
    from_base, _ = reachable(base, graph)
    only = from_tip - from_base
    cut = any(parent not in graph and parent not in from_base
              for sha in only for parent in graph[sha].get("parents") or [])
    return only, cut


# ---- the reflog -------------------------------------------------------------------------------

def same_entry(first: dict[str, Any], second: dict[str, Any]) -> bool:
    return all(first.get(k) == second.get(k) for k in ("old", "new", "time", "message"))


def moves_since(old_repo: dict[str, Any], new_repo: dict[str, Any]) -> tuple[list[Any], bool]:
    """The newer snapshot's reflog entries made after the older snapshot was taken.

    Matched on the older snapshot's newest entry; failing that, back to the newest entry
    that left the old HEAD. (entries, whether the reflog reaches back that far)
    """
    old_log, new_log = old_repo.get("reflog") or [], new_repo.get("reflog") or []
    if old_log:
        for index, entry in enumerate(new_log):
            if same_entry(entry, old_log[0]):
                return new_log[:index], True
    for index, entry in enumerate(new_log):
        if entry.get("old") == old_repo.get("head"):
            return [e for e in new_log[:index + 1] if not older_than(e, old_log)], True
    return [], False


def older_than(entry: dict[str, Any], old_log: list[Any]) -> bool:
    """Made before the older snapshot's newest entry: not a move since that snapshot."""
    if not old_log or not isinstance(old_log[0].get("time"), int):
        return False
    return isinstance(entry.get("time"), int) and int(entry["time"]) < int(old_log[0]["time"])


# ---- the explanation --------------------------------------------------------------------------

def explain(old_repo: dict[str, Any], new_repo: dict[str, Any],
            patterns: list[tuple[str, str]]) -> dict[str, Any]:
    """A JSON-ready account of a HEAD move: relation, reflog moves, commits with hot files."""
    found = between(old_repo, new_repo)
    moves, reflog_reaches = moves_since(old_repo, new_repo)
    # A commit on the shallow edge was logged without its parents: the walk stops there
    # although history goes on, so every count that holds one is a lower bound.
    edge = [str(c["sha"]) for c in found["added"] + found["dropped"]
            if c.get("shallow_boundary")]
    explanation = {
        "old": old_repo.get("head"), "new": new_repo.get("head"),
        "relation": found["relation"], "complete": found["complete"] and not edge,
        "moves": [{k: e.get(k) for k in ("selector", "old", "new", "time", "message")}
                  for e in moves],
        "reflog_reaches": reflog_reaches,
        "added": [annotate(c, patterns) for c in found["added"]],
        "dropped": [annotate(c, patterns) for c in found["dropped"]],
    }
    if "base" in found:
        explanation["base"] = found["base"]
    rebased = rebased_pairs(found["dropped"], found["added"])
    if found["relation"] == "diverged" and rebased:
        explanation["rebased"] = rebased
    if edge:
        explanation["shallow_boundary"] = edge
    if found["relation"] == "unknown":
        explanation["note"] = unreachable_note(new_repo, moves)
    return explanation


def rebased_pairs(dropped: list[dict[str, Any]],
                  added: list[dict[str, Any]]) -> list[dict[str, str]]:
    """[{old, new}] when every commit that left HEAD came back as a copy (a rebase, `pull
    --rebase`): a copy keeps its author, author time and subject. [] when one did not."""
    copies = {(c.get("author"), c.get("time"), c.get("subject")): str(c["sha"]) for c in added}
    pairs = []
    for commit in dropped:
        copy = copies.get((commit.get("author"), commit.get("time"), commit.get("subject")))
        if copy is None:
            return []
        pairs.append({"old": str(commit["sha"]), "new": copy})
    return pairs


def unreachable_note(new_repo: dict[str, Any], moves: list[dict[str, Any]]) -> str:
    """The real reason the two HEADs could not be related, not a guess at one."""
    history = new_repo.get("history") or []
    switched = [m for m in moves if str(m.get("message") or "").startswith("checkout: moving")]
    if new_repo.get("shallow"):
        why = "the clone is shallow"
    elif new_repo.get("history_complete"):
        why = ("HEAD was switched to a branch that does not contain it "
               f"({switched[0]['message']})" if switched else
               "the history was rewritten (the old HEAD is not an ancestor)")
    else:
        limit = new_repo.get("history_limit") or len(history)
        why = (f"it is not among the newest {plural(len(history), 'commit')} recorded "
               f"(capture with --history N, N above {limit}, to record more)")
        if switched:
            why += f"; HEAD was switched ({switched[0]['message']})"
    return f"the recorded history does not reach the old HEAD: {why}; commits between unknown"


def verb_of(moves: list[dict[str, Any]]) -> str:
    """The reflog's own word for the move. Entries that left HEAD where it was are not moves:
    `git stash` writes "reset: moving to HEAD", which must not turn a checkout into a reset."""
    moved = [m for m in moves if m.get("old") != m.get("new")] or moves
    words = {str(m.get("message") or "").split(":", 1)[0].split(" ", 1)[0] for m in moved}
    return next((verb for word, verb in VERBS.items() if word in words), "new in")
