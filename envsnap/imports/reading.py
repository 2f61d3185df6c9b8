"""What one pasted file gave: its facts in envsnap's own fields, and what it was.

Every reader (collect_env.py, pip.py, smi.py) is a pure function of the file's text that
returns a `Reading`, or raises `Unreadable` naming the line it could not read: a file is
read whole or not at all, so nothing half-read is ever stored.

A reading's facts are the snapshot's own typed `Facts` (snapshot/records.py), as far as the
file says them: every record is total=False, so a reader states only what it read. The deep
merge below walks them as the plain JSON tree they are on disk."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from envsnap.errors import SnapshotError
from envsnap.shape import is_object

if TYPE_CHECKING:
    from envsnap.snapshot.records import Facts


@dataclass
class Reading:
    tool: str                          # "torch collect_env", "pip list", "nvidia-smi -q"
    format: str                        # the variant read, e.g. "2.x (CPU, XPU lines)"
    facts: Facts
    version: str | None = None         # the tool's own version where the output says it
    complete: list[str] = field(default_factory=list)   # "python_env.packages": given whole


class Unreadable(SnapshotError):
    """A file that is not what it looked like: malformed, truncated, or two things mixed."""

    def __init__(self, source: str, line: int, why: str) -> None:
        super().__init__(f"{source}:{line}: {why}")
        self.line = line        # 1-based, in the text the reader was given
        self.why = why


def quoted(line: str, limit: int = 80) -> str:
    return repr(line if len(line) <= limit else line[:limit] + "...")


def nested(path: str, value: object) -> Facts:
    """"nvidia.driver", "x" -> {"nvidia": {"driver": "x"}} (a path FIELDS names: a field of
    the records)."""
    tree = value
    for key in reversed(path.split(".")):
        tree = {key: tree}
    return cast("Facts", tree)


def merge(into: Facts, more: Facts) -> Facts:
    """Deep merge; a later file adds to an earlier one's mappings, its scalars win only
    where the earlier one said nothing (None)."""
    merge_tree(cast("dict[str, object]", into), more)
    return into


def merge_tree(into: dict[str, object], more: Mapping[str, object]) -> None:
    for key, value in more.items():
        have = into.get(key)
        if is_object(have) and is_object(value):   # `have`: a mapping of `into`, mutable
            merge_tree(have, value)
        elif have is None or key not in into:
            into[key] = value
