"""Why HEAD moved: reflog entries and commits between two snapshots of one repository.

Only the history recorded at capture time is used (facts.git.repos[path].history, newest
first, with parents and files; reflog newest first with old and new sha), so the answer is
the same wherever the diff runs. When that history does not reach the other HEAD (a shallow
clone, a rewritten branch, more commits than the recorded window) the explanation says so
instead of guessing.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from envsnap.diff import hotpaths
from envsnap.diff.findings import Detail, MovedCommit, RebasedPair, Relation
from envsnap.diff.hotpaths import HotPattern
from envsnap.text import plural

if TYPE_CHECKING:
    from envsnap.snapshot.records import Commit, ReflogEntry, Repo

# The first word of a reflog message says how HEAD moved; when several kinds of move
# happened, the first in this order names them (a pull followed by a commit was a pull).
VERBS = {"pull": "pulled into", "merge": "merged into", "rebase": "rebased in",
         "cherry-pick": "cherry-picked into", "am": "applied in", "reset": "reset in",
         "checkout": "checked out in", "commit": "committed in"}

Graph = dict[str, "Commit"]   # sha -> the commit, in history order (newest first)


def annotate(commit: Commit, patterns: tuple[HotPattern, ...]) -> MovedCommit:
    """The commit as a move lists it: its hot files, hottest first, each with the pattern
    that names it, and its score (hotpaths.score)."""
    files = list(commit.get("files", []))
    hot = hotpaths.hot_files(files, patterns)
    annotated = MovedCommit(sha=commit.get("sha"), subject=commit.get("subject"),
                            author=commit.get("author"), time=commit.get("time"), files=files,
                            hot_files={m.path: m.pattern.area for m in hot},
                            hot_patterns={m.path: m.pattern.pattern for m in hot},
                            hot=list(dict.fromkeys(m.pattern.area for m in hot)),
                            score=hotpaths.score(hot, files))
    if commit.get("shallow_boundary"):
        annotated["shallow_boundary"] = True
    return annotated


# ---- the commit graph of one recorded history ------------------------------------------------

def graph_of(history: list[Commit]) -> Graph:
    return {sha: c for c in history if (sha := c.get("sha"))}


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
        stack.extend(graph[sha].get("parents", []))
    return seen, edge


def in_order(shas: set[str], history: list[Commit]) -> list[Commit]:
    return [c for c in history if c.get("sha") in shas]


def common_base(new: str, new_graph: Graph, old: str, old_graph: Graph) -> str | None:
    """The newest commit both HEADs reach, each in its own recorded window."""
    old_side, _ = reachable(old, old_graph)
    new_side, _ = reachable(new, new_graph)
    for sha in new_graph:  # history order: newest first
        if sha in old_side and sha in new_side:
            return sha
    return None


class Between(NamedTuple):
    """How two HEADs relate in the recorded history, and the commits that arrived and left."""

    relation: Relation
    added: list[Commit]
    dropped: list[Commit]
    complete: bool
    base: str | None = None      # diverged: the newest commit both reach


def between(old_repo: Repo, new_repo: Repo) -> Between:
    """The commits that arrived and left, with how the two HEADs relate."""
    old, new = str(old_repo.get("head")), str(new_repo.get("head"))
    old_hist, new_hist = old_repo.get("history", []), new_repo.get("history", [])
    old_graph, new_graph = graph_of(old_hist), graph_of(new_hist)
    if old in new_graph:
        added, edge = only_from(new, old, new_graph)
        return Between("forward", in_order(added, new_hist), [], not edge)
    if new in old_graph:
        dropped, edge = only_from(old, new, old_graph)
        return Between("backward", [], in_order(dropped, old_hist), not edge)
    base = common_base(new, new_graph, old, old_graph)
    if base is None:
        return Between("unknown", [], [], False)
    added, edge_new = only_from(new, base, new_graph)
    dropped, edge_old = only_from(old, base, old_graph)
    return Between("diverged", in_order(added, new_hist), in_order(dropped, old_hist),
                   not (edge_new or edge_old), base)


def only_from(tip: str, base: str, graph: Graph) -> tuple[set[str], bool]:
    """Commits reachable from tip but not from base, and whether the window cut that set
    short: one of them has a parent outside the window that base does not reach either."""
    from_tip, _ = reachable(tip, graph)
    from_base, _ = reachable(base, graph)
    only = from_tip - from_base
    cut = any(parent not in graph and parent not in from_base
              for sha in only for parent in graph[sha].get("parents", []))
    return only, cut


# ---- the reflog -------------------------------------------------------------------------------

def same_entry(first: ReflogEntry, second: ReflogEntry) -> bool:
    return (first.get("old"), first.get("new"), first.get("time"), first.get("message")) == \
        (second.get("old"), second.get("new"), second.get("time"), second.get("message"))


def moves_since(old_repo: Repo, new_repo: Repo) -> tuple[list[ReflogEntry], bool]:
    """The newer snapshot's reflog entries made after the older snapshot was taken.

    Matched on the older snapshot's newest entry; failing that, back to the newest entry
    that left the old HEAD. (entries, whether the reflog reaches back that far)
    """
    old_log, new_log = old_repo.get("reflog", []), new_repo.get("reflog", [])
    if old_log:
        for index, entry in enumerate(new_log):
            if same_entry(entry, old_log[0]):
                return new_log[:index], True
    for index, entry in enumerate(new_log):
        if entry.get("old") == old_repo.get("head"):
            return [e for e in new_log[:index + 1] if not older_than(e, old_log)], True
    return [], False


def older_than(entry: ReflogEntry, old_log: list[ReflogEntry]) -> bool:
    """Made before the older snapshot's newest entry: not a move since that snapshot."""
    since = old_log[0].get("time") if old_log else None
    made = entry.get("time")
    return since is not None and made is not None and made < since


# ---- the explanation --------------------------------------------------------------------------

def reflog_move(entry: ReflogEntry) -> ReflogEntry:
    """An entry as an explanation shows it (its time zone left out)."""
    return {"selector": entry.get("selector"), "old": entry.get("old"), "new": entry.get("new"),
            "time": entry.get("time"), "message": entry.get("message")}


def explain(old_repo: Repo, new_repo: Repo, patterns: tuple[HotPattern, ...]) -> Detail:
    """A JSON-ready account of a HEAD move (GitMove's fields, as the finding's detail):
    relation, reflog moves, commits with hot files."""
    found = between(old_repo, new_repo)
    moves, reflog_reaches = moves_since(old_repo, new_repo)
    # A commit on the shallow edge was logged without its parents: the walk stops there
    # although history goes on, so every count that holds one is a lower bound.
    edge = [str(c.get("sha")) for c in found.added + found.dropped if c.get("shallow_boundary")]
    explanation = Detail(
        old=old_repo.get("head"), new=new_repo.get("head"),
        relation=found.relation, complete=found.complete and not edge,
        moves=[reflog_move(e) for e in moves],
        reflog_reaches=reflog_reaches,
        added=[annotate(c, patterns) for c in found.added],
        dropped=[annotate(c, patterns) for c in found.dropped],
    )
    if found.base is not None:
        explanation["base"] = found.base
    rebased = rebased_pairs(found.dropped, found.added)
    if found.relation == "diverged" and rebased:
        explanation["rebased"] = rebased
    if edge:
        explanation["shallow_boundary"] = edge
    if found.relation == "unknown":
        explanation["note"] = unreachable_note(new_repo, moves)
    return explanation


def rebased_pairs(dropped: list[Commit], added: list[Commit]) -> list[RebasedPair]:
    """[{old, new}] when every commit that left HEAD came back as a copy (a rebase, `pull
    --rebase`): a copy keeps its author, author time and subject. [] when one did not."""
    copies = {(c.get("author"), c.get("time"), c.get("subject")): str(c.get("sha"))
              for c in added}
    pairs = []
    for commit in dropped:
        copy = copies.get((commit.get("author"), commit.get("time"), commit.get("subject")))
        if copy is None:
            return []
        pairs.append(RebasedPair(old=str(commit.get("sha")), new=copy))
    return pairs


def unreachable_note(new_repo: Repo, moves: list[ReflogEntry]) -> str:
    """The real reason the two HEADs could not be related, not a guess at one."""
    history = new_repo.get("history", [])
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


def verb_of(moves: list[ReflogEntry]) -> str:
    """The reflog's own word for the move. Entries that left HEAD where it was are not moves:
    `git stash` writes "reset: moving to HEAD", which must not turn a checkout into a reset."""
    moved = [m for m in moves if m.get("old") != m.get("new")] or moves
    words = {str(m.get("message") or "").split(":", 1)[0].split(" ", 1)[0] for m in moved}
    return next((verb for word, verb in VERBS.items() if word in words), "new in")
