"""A small typed spec tree: describe a JSON-like document, check one, export it as JSON Schema.

Why not a schema library: this checks a snapshot far faster than jsonschema checks the same
document, adds a small fraction of jsonschema's or pydantic's import time to `envsnap diff`,
needs no dependency, and says where a document is wrong in envsnap's words
(`facts.git.repos["/root/sglang"].head: expected a string or null, got a list`).
bench/bench_schema.py measures all of it (its figures: bench/ledger.tsv).

A check compiles each node once into a closure. The happy path builds no paths: a failure
raises Invalid at the bad value and each enclosing container prepends its key on the way out.
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Callable, Union

from envsnap import shape

if TYPE_CHECKING:
    from typing import TypeGuard  # Python 3.10: a string annotation here (3.9 runs this too)

Check = Callable[[Any], None]
# What json_schema() builds: JSON itself (the exported docs/snapshot.schema.json). The checks'
# inputs stay Any: they are handed unknown values, and finding out what they are is their job.
JsonValue = Union[str, int, float, bool, None, list["JsonValue"], dict[str, "JsonValue"]]
JsonObject = dict[str, JsonValue]
Defs = dict[str, JsonObject]   # the schema's $defs, one per Record, filled as records are met

# JSON's scalar kinds, as Python types; bool is its own type, so True is never an integer.
KIND_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
    "null": (type(None),),
}
KIND_WORDS = {"string": "a string", "integer": "an integer", "number": "a number",
              "boolean": "true or false", "null": "null"}
GOT_WORDS: dict[type, str] = {dict: "a mapping", list: "a list", str: "a string", int: "an integer",
                              float: "a number", bool: "a boolean", type(None): "null"}
STR_ONLY = frozenset([str])
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class Invalid(Exception):
    """Where (path parts, outermost first) and what was expected."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.parts: list[str] = []

    def inside(self, part: str) -> Invalid:
        self.parts.insert(0, part)
        return self

    def path(self) -> str:
        return "".join(self.parts).lstrip(".")


def is_object(value: object) -> TypeGuard[Mapping[str, Any]]:
    """Whether a value met by a walk over a snapshot's tree is a JSON object. Every mapping of
    a validated snapshot is one (string keys, JSON values): the generic walks of diff and
    report (digests, blobs, summaries) descend through this, where typed reads of a known
    record need no check at all. The check is envsnap.shape's, shared with every reader."""
    return shape.is_object(value)


def field_part(name: str) -> str:
    return f".{name}" if IDENTIFIER.match(name) else f"[{quote(name)}]"


def key_part(key: str) -> str:
    """A map's natural id (a repo path, a GPU bus, a pid) always in brackets: it is data."""
    return f"[{quote(key)}]"


def quote(key: str) -> str:
    return '"' + key.replace("\\", "\\\\").replace('"', '\\"') + '"'


def got(value: Any) -> str:
    return GOT_WORDS.get(type(value)) or f"a {type(value).__name__}"


def mismatch(expected: str, value: Any) -> Invalid:
    return Invalid(f"expected {expected}, got {got(value)}")


class Spec:
    """One node of the description. `expected` is the words an error uses."""

    expected = "a value"

    def compile(self) -> Check:
        raise NotImplementedError

    def json_schema(self, defs: Defs) -> JsonValue:
        raise NotImplementedError


MAX_FREE_DEPTH = 32   # a real free-form value (a direct_url.json) is 2-4 levels deep


class AnyValue(Spec):
    """Free-form on purpose (a user's config, a future field): any JSON value, nested at
    most MAX_FREE_DEPTH deep. The rest of envsnap walks values recursively (digests, diff,
    report): a list 500 deep must be refused here, not end in a RecursionError there; and
    what JSON cannot hold (a YAML !!set, !!binary, an unquoted date, an integer key) is no
    snapshot value."""

    expected = "any value"

    def compile(self) -> Check:
        return check_json_value

    def json_schema(self, defs: Defs) -> JsonValue:
        return True


CONTAINERS = (dict, list)
JSON_SCALARS = frozenset([str, int, float, bool, type(None)])


def check_json_value(value: Any) -> None:
    """Iterative, so a deep value cannot overflow the check itself."""
    if type(value) not in CONTAINERS:
        if type(value) not in JSON_SCALARS:
            raise mismatch("a JSON value", value)
        return
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if depth > MAX_FREE_DEPTH:
            raise Invalid(f"nested more than {MAX_FREE_DEPTH} levels deep")
        if type(item) is dict and not str_keys(item):
            check_keys(item)
        for child in (item.values() if type(item) is dict else item):
            if type(child) in CONTAINERS:
                pending.append((child, depth + 1))
            elif type(child) not in JSON_SCALARS:
                raise mismatch("JSON values inside", child)


class Scalar(Spec):
    def __init__(self, kinds: tuple[str, ...]) -> None:
        self.kinds = kinds
        self.types = frozenset(t for kind in kinds for t in KIND_TYPES[kind])

    @property
    def expected(self) -> str:  # type: ignore[override]
        return " or ".join(KIND_WORDS[kind] for kind in self.kinds)

    def compile(self) -> Check:
        allowed = self.types
        expected = self.expected

        def check(value: Any) -> None:
            if type(value) not in allowed:
                raise mismatch(expected, value)
        return check

    def json_schema(self, defs: Defs) -> JsonValue:
        kinds: list[JsonValue] = list(self.kinds)
        return {"type": kinds[0] if len(kinds) == 1 else kinds}


class CheckedText(Spec):
    """A string that must also pass `problem` (None: fine; else why not): a regex envsnap
    will run, which must not be one that backtracks catastrophically."""

    def __init__(self, problem: Callable[[str], str | None], doc: str,
                 nullable: bool = False) -> None:
        self.problem, self.doc, self.nullable = problem, doc, nullable

    @property
    def expected(self) -> str:  # type: ignore[override]
        return "a string or null" if self.nullable else "a string"

    def compile(self) -> Check:
        problem, nullable, expected = self.problem, self.nullable, self.expected

        def check(value: Any) -> None:
            if value is None and nullable:
                return
            if type(value) is not str:
                raise mismatch(expected, value)
            why = problem(value)
            if why is not None:
                raise Invalid(f"refused {value[:80]!r}: {why}")
        return check

    def json_schema(self, defs: Defs) -> JsonValue:
        return {"type": ["string", "null"] if self.nullable else "string",
                "description": self.doc}


class OneOfValues(Spec):
    """One of a few exact values (a word such as "unlimited" where a number may stand)."""

    def __init__(self, values: tuple[str | int | bool | None, ...]) -> None:
        self.values = values

    @property
    def expected(self) -> str:  # type: ignore[override]
        return " or ".join(json.dumps(value) for value in self.values)

    def compile(self) -> Check:
        allowed = [(type(value), value) for value in self.values]
        expected = self.expected

        def check(value: Any) -> None:
            if (type(value), value) not in allowed:
                raise mismatch(expected, value)
        return check

    def json_schema(self, defs: Defs) -> JsonValue:
        return {"enum": list(self.values)}


class ListOf(Spec):
    expected = "a list"

    def __init__(self, item: Spec) -> None:
        self.item = item

    def compile(self) -> Check:
        item = self.item.compile()
        scalars = self.item.types if isinstance(self.item, Scalar) else None

        def check(value: Any) -> None:
            if type(value) is not list:
                raise mismatch("a list", value)
            if scalars is not None and scalars.issuperset(map(type, value)):
                return  # samples, history files, sys.path: one C-level pass, no call per item
            for index, element in enumerate(value):
                try:
                    item(element)
                except Invalid as bad:
                    raise bad.inside(f"[{index}]") from None
        return check

    def json_schema(self, defs: Defs) -> JsonValue:
        return {"type": "array", "items": self.item.json_schema(defs)}


def str_keys(value: dict[Any, Any]) -> bool:
    return STR_ONLY.issuperset(map(type, value))


def check_keys(value: dict[Any, Any]) -> None:
    for key in value:
        if type(key) is not str:
            raise Invalid(f"expected string keys, got {got(key)} key {key!r}")


class MapOf(Spec):
    """A collection keyed by its natural id: repos by path, GPUs by PCI bus, workers by pid."""

    expected = "a mapping"

    def __init__(self, value: Spec, key: str = "name") -> None:
        self.value, self.key = value, key

    def compile(self) -> Check:
        item = self.value.compile()
        scalars = self.value.types if isinstance(self.value, Scalar) else None
        expected = f"a mapping of {self.key} to values"

        def check(value: Any) -> None:
            if type(value) is not dict:
                raise mismatch(expected, value)
            if scalars is not None and scalars.issuperset(map(type, value.values())) \
                    and str_keys(value):
                return  # packages, env variables: one C-level pass, no call per item
            for key, element in value.items():
                if type(key) is not str:
                    check_keys(value)
                try:
                    item(element)
                except Invalid as bad:
                    raise bad.inside(key_part(key)) from None
        return check

    def json_schema(self, defs: Defs) -> JsonValue:
        return {"type": "object", "description": f"keyed by {self.key}",
                "additionalProperties": self.value.json_schema(defs)}


class Record(Spec):
    """A mapping of known fields; unknown fields pass as `rest` says (forward compatibility:
    a newer agent may add a reading, which an older envsnap keeps and diffs as it is)."""

    def __init__(self, name: str, fields: dict[str, Spec], required: tuple[str, ...] = (),
                 rest: Spec | None = None, doc: str = "", words: str = "a mapping") -> None:
        self.name, self.fields, self.required = name, fields, required
        self.rest = rest or AnyValue()
        self.doc, self.words = doc, words

    @property
    def expected(self) -> str:  # type: ignore[override]
        return self.words

    def compile(self) -> Check:
        known = {name: spec.compile() for name, spec in self.fields.items()}
        # Most fields are scalars: their type is looked up here, not checked by a call.
        scalar = {name: spec.types for name, spec in self.fields.items()
                  if isinstance(spec, Scalar)}
        rest = self.rest.compile()
        required = self.required
        free = isinstance(self.rest, AnyValue)

        def check(value: Any) -> None:
            if type(value) is not dict:
                raise mismatch("a mapping", value)
            for name in required:
                if name not in value:
                    raise Invalid(f"missing required key {quote(name)}")
            for key, element in value.items():
                types = scalar.get(key)
                if types is not None and type(element) in types:
                    continue
                checker = known.get(key)
                if checker is None:
                    if type(key) is not str:
                        check_keys(value)
                    if free and type(element) in JSON_SCALARS:
                        continue
                    checker = rest
                try:
                    checker(element)
                except Invalid as bad:
                    raise bad.inside(field_part(key)) from None
        return check

    def json_schema(self, defs: Defs) -> JsonObject:
        if self.name not in defs:
            defs[self.name] = {}  # placed first: a record may (one day) contain itself
            body: JsonObject = {"type": "object"}
            if self.doc:
                body["description"] = self.doc
            body["properties"] = {name: spec.json_schema(defs)
                                  for name, spec in self.fields.items()}
            if self.required:
                body["required"] = list(self.required)
            if not isinstance(self.rest, AnyValue):
                body["additionalProperties"] = self.rest.json_schema(defs)
            defs[self.name] = body
        return {"$ref": f"#/$defs/{self.name}"}


class OneOf(Spec):
    """Alternatives told apart by the value's container kind (null, scalar, list, mapping)."""

    def __init__(self, options: tuple[Spec, ...]) -> None:
        self.options = options

    @property
    def expected(self) -> str:  # type: ignore[override]
        return " or ".join(option.expected for option in self.options)

    def compile(self) -> Check:
        checks = [(option, option.compile()) for option in self.options]
        expected = self.expected

        def check(value: Any) -> None:
            failure: Invalid | None = None
            for option, checker in checks:
                if not accepts_kind(option, value):
                    continue
                try:
                    checker(value)
                    return
                except Invalid as bad:
                    failure = failure or bad
            # Deeper inside an option, its own words say more; at this value, all of them do.
            raise failure if failure and failure.parts else mismatch(expected, value)
        return check

    def json_schema(self, defs: Defs) -> JsonValue:
        return {"anyOf": [option.json_schema(defs) for option in self.options]}


def accepts_kind(spec: Spec, value: Any) -> bool:
    """Whether `spec` is the option for this kind of value (its errors are the useful ones)."""
    if isinstance(spec, (Record, MapOf)):
        return type(value) is dict
    if isinstance(spec, ListOf):
        return type(value) is list
    if isinstance(spec, (Scalar, OneOfValues)):
        return type(value) not in (dict, list)
    return True


def export(root: Record, *, title: str, identifier: str) -> JsonObject:
    """The tree as a JSON Schema (draft 2020-12) document."""
    defs: Defs = {}
    top = root.json_schema(defs)
    schema: JsonObject = {"$schema": "https://json-schema.org/draft/2020-12/schema",
                              "$id": identifier, "title": title}
    schema["$ref"] = top["$ref"]
    schema["$defs"] = dict(sorted(defs.items()))
    return schema
