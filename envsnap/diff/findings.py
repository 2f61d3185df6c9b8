"""What a diff finds, and how a fact path or value is shown in one line.

Shared by diff, rules, fleet and render so a finding means the same thing everywhere.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, Literal, NamedTuple, TypedDict

from envsnap.snapshot.spec import is_object

if TYPE_CHECKING:
    from envsnap.snapshot.records import ReflogEntry

# The kinds of finding: how the fact moved, not how much it matters (that is rank).
# "missing": set in the shell but absent from a worker seen for the first time.
FindingKind = Literal["changed", "added", "removed", "not_captured", "missing"]
CHANGED: Final = "changed"
ADDED: Final = "added"
REMOVED: Final = "removed"
NOT_CAPTURED: Final = "not_captured"
MISSING: Final = "missing"
SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")
PLAIN_KEY = re.compile(r"^[A-Za-z0-9_@{}:+-]+$")


# ---- what a finding carries beyond before/after (its `detail`, as JSON shows it) ----------

class MovedCommit(TypedDict, total=False):
    """A commit that arrived or left, with the files on performance-hot paths it touches."""

    sha: str | None
    subject: str | None
    author: str | None
    time: int | None
    files: list[str]
    hot_files: dict[str, str]     # path -> what is hot there (a hotpaths.HotArea); built
                                  # hottest first (JSON sorts its keys)
    hot_patterns: dict[str, str]  # path -> the pattern that named it
    hot: list[str]                # the areas, hottest first
    score: int                    # hotpaths.score: the verdict names the highest first
    shallow_boundary: bool        # logged without its parents: counts through it are bounds


class RebasedPair(TypedDict):
    old: str
    new: str


Relation = Literal["forward", "backward", "diverged", "unknown"]


class ReflogMoves(TypedDict, total=False):
    """How HEAD moved between two snapshots, from the newer one's reflog."""

    moves: list[ReflogEntry]      # newest first; an explanation keeps all but tz
    reflog_reaches: bool          # the reflog goes back to the older snapshot


class GitMove(ReflogMoves, total=False):
    """Why HEAD moved (diff/gitexplain.explain): how the two HEADs relate and the commits
    between them. `complete` False: the recorded history stops short, counts are at least."""

    old: str | None
    new: str | None
    relation: Relation
    complete: bool
    added: list[MovedCommit]
    dropped: list[MovedCommit]
    base: str                     # diverged: the newest commit both HEADs reach
    rebased: list[RebasedPair]    # diverged, and every commit that left came back as a copy
    shallow_boundary: list[str]
    note: str                     # unknown: why the history does not relate them


class WorkerDetail(TypedDict, total=False):
    """Which worker a finding is about: its key (command line) and its pid on each side."""

    worker: str
    pid_before: str | None
    pid_after: str | None
    rank: str | None


class Detail(GitMove, WorkerDetail, total=False):
    """A finding's detail: a git move (gitexplain.explain builds it; git_move() reads it), a
    worker, and the GPUs a merged row stands for (by bus id). One mapping, as the JSON output
    shows it; mypy cannot copy a GitMove into a Detail, hence the builders make a Detail."""

    gpus: list[str]


def git_move(detail: Detail) -> GitMove | None:
    """The HEAD move a git finding explains, or None for any other finding."""
    return detail if "relation" in detail else None


class Rating(NamedTuple):
    """What a rule says about a finding: how much it matters (0-100) and why, in one line."""

    rank: int
    why: str
    restates: bool = False   # a catch-all's why: it says no more than the finding's own row


class Finding(NamedTuple):
    """One fact that differs. rank 0-100, higher matters more; before/after are None when
    kind says the fact was added or removed; detail holds long parts (commits, patches).
    A finding is never changed in place (a changed one is a copy, `_replace`), so findings
    without detail may share the empty default."""

    section: str
    path: tuple[str, ...]
    before: Any
    after: Any
    kind: FindingKind = CHANGED
    rank: int = 0
    why: str = ""
    volatile: bool = False
    detail: Detail = {}
    why_restates_row: bool = False   # from Rating.restates: the text view leaves such a why out

    @property
    def where(self) -> str:
        return path_text(self.path)

    def as_json(self) -> dict[str, object]:
        return {"section": self.section, "path": list(self.path), "where": self.where,
                "kind": self.kind, "rank": self.rank, "why": self.why,
                "before": self.before, "after": self.after, "volatile": self.volatile,
                "detail": self.detail}


def path_text(path: tuple[str, ...], key_width: int = 0) -> str:
    """("repos", "/root/sglang", "head") -> "repos[/root/sglang].head": keys holding dots or
    slashes (package names, paths, bus ids) stay one visible unit. With key_width, a longer
    key (a worker's command line) keeps its two ends, so the fact after it stays visible."""
    text = ""
    for key in path:
        if key_width and len(key) > key_width:
            half = (key_width - 3) // 2
            key = f"{key[:half]}...{key[-half:]}"
        if PLAIN_KEY.match(key) and not key.isdigit():  # gpus[3], as an index reads
            text += ("." if text else "") + key
        else:
            text += f"[{key}]"
    return text


ABSENT_TEXT: Final = "(absent)"   # the one way a change shows a side with no value
ELLIPSIS: Final = "..."
CONTEXT = 8   # characters kept either side of where two cut values start and stop differing


def short(value: Any, width: int = 40) -> str:
    """One value in at most `width` characters; shas shortened the way git shows them."""
    return "-" if value is None else cut(whole(value), width)


def whole(value: Any) -> str:
    """One value on one line, never cut; None, a side without a value, as ABSENT_TEXT."""
    if value is None:
        return ABSENT_TEXT
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str) and SHA.match(value):
        return value[:7]
    if isinstance(value, list):
        text = ", ".join(whole(item) for item in value) or "(empty)"
    elif is_object(value):
        text = summary_of_mapping(value)
    else:
        text = str(value)
    return text.replace("\n", "\\n")


def cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - len(ELLIPSIS)] + ELLIPSIS


def change(before: Any, after: Any, width: int | None = 40) -> str:
    """"before -> after", each side cut to `width` where the two differ (cut_pair); whole
    with width None (--all, --markdown)."""
    old, new = whole(before), whole(after)
    if width is not None:
        old, new = cut_pair(old, new, width)
    return f"{old} -> {new}"


def cut_pair(before: str, after: str, width: int) -> tuple[str, str]:
    """Two texts, each in about `width` characters, cut so that they show where they differ:
    the common prefix and suffix elided (CONTEXT characters of each kept), the differing
    middle kept (its start, when even that is too long). Two topology files under one long
    folder read ".../topologies/h200-nvl8.xml -> .../topologies/h100-sxm5.xml", not twice
    the same cut prefix."""
    if before == after:
        return cut(before, width), cut(after, width)
    prefix = len(common_prefix(before, after))
    room = min(len(before), len(after)) - prefix
    suffix = min(len(common_prefix(before[::-1], after[::-1])), room)
    return (window(before, prefix, suffix, width), window(after, prefix, suffix, width))


def common_prefix(a: str, b: str) -> str:
    size = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return a[:size]


def window(text: str, prefix: int, suffix: int, width: int) -> str:
    """`text` around its differing part, text[prefix:len(text) - suffix]."""
    if len(text) <= width:
        return text
    start = prefix - CONTEXT if prefix - CONTEXT > len(ELLIPSIS) else 0
    end = len(text) - suffix + CONTEXT
    end = end if len(text) - end > len(ELLIPSIS) else len(text)
    head = ELLIPSIS if start else ""
    tail = ELLIPSIS if end < len(text) else ""
    middle = text[start:end]
    if len(head) + len(middle) + len(tail) > width:   # the differing part alone is too long
        middle, tail = middle[:max(1, width - len(head) - len(ELLIPSIS))], ELLIPSIS
    return head + middle + tail


def summary_of_mapping(value: Mapping[str, Any]) -> str:
    """A mapping by what names it: an error, a blob's size and hash, a repository's
    uncommitted state, or its message, name or version."""
    if "error" in value and len(value) <= 2:
        return f"error: {value['error']}"
    if "sha256" in value and isinstance(value["sha256"], str):
        size = value.get("bytes", value.get("size"))
        return f"{human_bytes(size)} sha256 {value['sha256'][:12]}"
    if "dirty" in value:
        patch = value.get("patch")
        # any value of a walked tree comes here, not only an uncommitted record
        patch = patch if is_object(patch) else {}
        return f"dirty, patch {human_bytes(patch.get('bytes'))}" if value["dirty"] else "clean"
    for key in ("message", "name", "version"):
        if isinstance(value.get(key), str):
            return str(value[key])
    return "{" + ", ".join(sorted(value)[:4]) + (", ..." if len(value) > 4 else "") + "}"


def human_bytes(size: Any) -> str:
    if not isinstance(size, int):
        return "? bytes"
    for unit, scale in (("MB", 1 << 20), ("KB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} bytes"
