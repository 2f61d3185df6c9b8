"""The snapshot's TypedDicts (envsnap/snapshot/records.py) say what schema.py says.

The walk starts at the document and its `Snapshot` type and goes down both at once: each
Record against its TypedDict (field names, required keys), each field's spec against its
annotation (scalar kinds, literals, lists, maps, nested records, unions). A field, a required
key or a type in one and not in the other is a difference; the test names its path.
"""
from __future__ import annotations

import types
import typing
from typing import Any, Literal, TypedDict, Union

import pytest

from envsnap.snapshot import records, schema
from envsnap.snapshot.spec import (
    AnyValue,
    CheckedText,
    ListOf,
    MapOf,
    OneOf,
    OneOfValues,
    Record,
    Scalar,
    Spec,
)

KIND_ATOMS = {"string": "str", "integer": "int", "number": "float", "boolean": "bool",
              "null": "None"}
TYPE_ATOMS: dict[Any, str] = {str: "str", int: "int", float: "float", bool: "bool",
                              type(None): "None"}


class Alternatives:
    """A value's possible shapes, split by kind: scalar atoms, and at most one list, map and
    record shape (the schema tells its options apart by container kind, so no more)."""

    def __init__(self) -> None:
        self.atoms: set[Any] = set()
        self.list: Any = None
        self.map: Any = None
        self.record: Any = None


def spec_alternatives(spec: Spec, into: Alternatives | None = None) -> Alternatives:
    found = into or Alternatives()
    if isinstance(spec, OneOf):
        for option in spec.options:
            spec_alternatives(option, found)
    elif isinstance(spec, Scalar):
        found.atoms.update(KIND_ATOMS[kind] for kind in spec.kinds)
    elif isinstance(spec, CheckedText):
        found.atoms.update({"str", "None"} if spec.nullable else {"str"})
    elif isinstance(spec, OneOfValues):
        found.atoms.update(("literal", value) for value in spec.values)
    elif isinstance(spec, AnyValue):
        found.atoms.add("any")
    elif isinstance(spec, ListOf):
        found.list = spec.item
    elif isinstance(spec, MapOf):
        found.map = spec.value
    elif isinstance(spec, Record):
        found.record = spec
    else:
        raise AssertionError(f"no rule for {type(spec).__name__}")
    return found


def is_typed_dict(hint: Any) -> bool:
    return isinstance(hint, type) and issubclass(hint, dict) and hasattr(hint,
                                                                         "__required_keys__")


def hint_alternatives(hint: Any, into: Alternatives | None = None) -> Alternatives:
    found = into or Alternatives()
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Union or (hasattr(types, "UnionType") and origin is types.UnionType):
        for arg in args:
            hint_alternatives(arg, found)
    elif origin is Literal:
        found.atoms.update(("literal", value) for value in args)
    elif hint is Any or hint is object:   # a free-form value (schema.AnyValue)
        found.atoms.add("any")
    elif hint in TYPE_ATOMS:
        found.atoms.add(TYPE_ATOMS[hint])
    elif origin is list:
        found.list = args[0]
    elif origin is dict:
        assert args[0] is str, f"a snapshot mapping is keyed by strings, not {args[0]}"
        found.map = args[1]
    elif is_typed_dict(hint):
        found.record = hint
    else:
        raise AssertionError(f"no rule for the annotation {hint!r}")
    return found


def differences(spec: Spec, hint: Any, where: str, seen: set[tuple[int, Any]]) -> list[str]:
    """Every way `spec` and `hint` differ, each with its path below `where`."""
    want, have = spec_alternatives(spec), hint_alternatives(hint)
    found = []
    if want.atoms != have.atoms:
        found.append(f"{where}: schema {sorted(map(str, want.atoms))}, "
                     f"type {sorted(map(str, have.atoms))}")
    for kind, step in (("list", "[]"), ("map", "{}")):
        inner_spec, inner_hint = getattr(want, kind), getattr(have, kind)
        if (inner_spec is None) != (inner_hint is None):
            found.append(f"{where}: a {kind} in only one of schema and type")
        elif inner_spec is not None:
            found += differences(inner_spec, inner_hint, where + step, seen)
    if (want.record is None) != (have.record is None):
        found.append(f"{where}: a record in only one of schema and type")
    elif want.record is not None:
        found += record_differences(want.record, have.record, where, seen)
    return found


def record_differences(spec: Record, typed: Any, where: str,
                       seen: set[tuple[int, Any]]) -> list[str]:
    if (id(spec), typed) in seen:
        return []
    seen.add((id(spec), typed))
    where = f"{where or spec.name} ({spec.name} / {typed.__name__})"
    hints = typing.get_type_hints(typed)
    found = [f"{where}: field {name!r} only in the schema" for name in spec.fields
             if name not in hints]
    found += [f"{where}: field {name!r} only in the type" for name in hints
              if name not in spec.fields]
    if set(spec.required) != set(typed.__required_keys__):
        found.append(f"{where}: required {sorted(spec.required)} in the schema, "
                     f"{sorted(typed.__required_keys__)} in the type")
    for name in spec.fields.keys() & hints.keys():
        found += differences(spec.fields[name], hints[name], f"{where}.{name}", seen)
    return found


def walked(spec: Spec, typed: Any) -> tuple[list[str], set[tuple[int, Any]]]:
    seen: set[tuple[int, Any]] = set()
    return record_differences(spec, typed, "", seen), seen


def reachable_records(spec: Spec, found: dict[int, Record]) -> dict[int, Record]:
    children: list[Spec] = []
    if isinstance(spec, Record):
        if id(spec) in found:
            return found
        found[id(spec)] = spec
        children = list(spec.fields.values())
    elif isinstance(spec, OneOf):
        children = list(spec.options)
    elif isinstance(spec, ListOf):
        children = [spec.item]
    elif isinstance(spec, MapOf):
        children = [spec.value]
    for child in children:
        reachable_records(child, found)
    return found


def test_the_types_say_what_the_schema_says() -> None:
    found, _ = walked(schema.DOCUMENT, records.Snapshot)
    assert found == [], "records.py and schema.py differ:\n" + "\n".join(found)


def test_every_record_of_the_schema_has_its_type() -> None:
    _, seen = walked(schema.DOCUMENT, records.Snapshot)
    compared = {spec_id for spec_id, _ in seen}
    missed = [record.name for spec_id, record in
              reachable_records(schema.DOCUMENT, {}).items() if spec_id not in compared]
    assert missed == []
    assert len(compared) > 50


# ---- the check can fail: deliberately mismatched pairs --------------------------------------

class Inner(TypedDict, total=False):
    size: int | None


class ToyRequired(TypedDict):
    kept: str


class Toy(ToyRequired, total=False):
    renamed: str | None
    count: str | None       # the schema says integer
    items: list[Inner]
    limit: int | None


INNER = Record("inner", {"size": schema.INT_, "extra": schema.STR_})
TOY = Record("toy", {"kept": schema.STR, "name": schema.STR_, "count": schema.INT_,
                     "items": ListOf(INNER), "limit": schema.LIMIT_VALUE},
             required=("kept", "count"))


@pytest.mark.parametrize("expected", [
    "field 'name' only in the schema",
    "field 'renamed' only in the type",
    "required ['count', 'kept'] in the schema, ['kept'] in the type",
    ".count: schema ['None', 'int'], type ['None', 'str']",
    ".items[] (inner / Inner): field 'extra' only in the schema",
    ".limit: schema [\"('literal', 'unlimited')\", 'None', 'int'], type ['None', 'int']",
])
def test_a_mismatched_pair_is_found(expected: str) -> None:
    found, _ = walked(TOY, Toy)
    assert any(expected in line for line in found), found


def test_a_container_in_only_one_side_is_found() -> None:
    class Flat(TypedDict, total=False):
        items: str | None

    found, _ = walked(Record("flat", {"items": ListOf(schema.STR)}), Flat)
    assert any("a list in only one" in line for line in found), found
