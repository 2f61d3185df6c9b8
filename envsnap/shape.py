"""The one question every reader of outside data asks first: is this value a mapping?

What comes from outside envsnap (an inventory, a playbook and its task arguments, the agent's
JSON, an answer from the host's python, a saved file, a pasted report) is any JSON, YAML or
TOML value until its reader has looked at it. Each source has one reader that checks it where
it enters, says in its own words what it wanted instead, and hands on typed data (a TypedDict,
a NamedTuple, a dataclass); the code after it reads those types and checks nothing again.
The readers ask here, so the question has one answer and one place (the ratchet,
tests/test_types_ratchet.py, counts this module's isinstance once).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import TypeGuard  # Python 3.10: a string annotation here (3.9 runs this too)


def is_mapping(value: object) -> TypeGuard[dict[object, object]]:
    """A mapping whose keys are still to be checked: YAML's (`22:`, `yes:` are a number and
    a boolean) or a Python literal's."""
    return isinstance(value, dict)


def is_object(value: object) -> TypeGuard[dict[str, object]]:
    """A JSON or TOML object: its keys are text, as json.loads and tomllib give no other."""
    return is_mapping(value)
