"""What one pasted file gave: its facts in envsnap's own fields, and what it was.

Every reader (collect_env.py, pip.py, smi.py) is a pure function of the file's text that
returns a `Reading`, or raises `Unreadable` naming the line it could not read: a file is
read whole or not at all, so nothing half-read is ever stored."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from envsnap.errors import SnapshotError

Facts = dict[str, dict[str, Any]]     # section -> that section's facts, as far as known


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


def quoted(line: str, limit: int = 80) -> str:
    return repr(line if len(line) <= limit else line[:limit] + "...")


def nested(path: str, value: Any) -> Facts:
    """"nvidia.driver", "x" -> {"nvidia": {"driver": "x"}}."""
    section, *keys = path.split(".")
    tree: dict[str, Any] = {}
    here = tree
    for key in keys[:-1]:
        here = here.setdefault(key, {})
    here[keys[-1]] = value
    return {section: tree}


def merge(into: dict[str, Any], more: dict[str, Any]) -> dict[str, Any]:
    """Deep merge; a later file adds to an earlier one's mappings, its scalars win only
    where the earlier one said nothing (None)."""
    for key, value in more.items():
        have = into.get(key)
        if isinstance(have, dict) and isinstance(value, dict):
            merge(have, value)
        elif have is None or key not in into:
            into[key] = value
    return into
