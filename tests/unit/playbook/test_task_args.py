"""Each task module's declaration (required, optional) and its arguments' TypedDict name the
same keys: an argument accepted but not typed, or typed but never accepted, fails here."""
from __future__ import annotations

import typing

import pytest

from envsnap.playbook.modules import MODULES
from envsnap.playbook.tasks.base import Module


def args_type(module: Module[typing.Any]) -> typing.Any:
    return typing.get_type_hints(module.run)["args"]


@pytest.mark.parametrize("name", sorted(MODULES))
def test_declared_arguments_are_the_typed_ones(name: str) -> None:
    module = MODULES[name]
    typed = args_type(module)
    assert set(module.required) == set(typed.__required_keys__)
    assert set(module.optional) == set(typed.__optional_keys__)


def test_a_module_reads_its_own_type() -> None:
    assert args_type(MODULES["git"]).__name__ == "GitArgs"
    assert args_type(MODULES["bench"]).__name__ == "BenchArgs"
