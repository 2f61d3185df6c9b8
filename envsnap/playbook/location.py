"""A place in a playbook file: what every playbook error starts with (`site.yml:12: ...`).

Kept as file and line until it is shown, so a template's own line number can move it down
and a nested value can point at its own line without taking a formatted string apart.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Where:
    file: str   # the playbook's path as the user gave it
    line: int   # 1-based

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"

    def at(self, line: int) -> Where:
        """Another line of the same file."""
        return Where(self.file, line)
