"""The one YAML reader: snapshots, playbooks, inventories and `-e` files all load through here.

Each reader subclasses one of two loaders and adds only its own tags or constructors (the
playbook's line numbers, Ansible's `!vault` and `!unsafe`); the guards are here, once:

- libyaml (the C loader) when PyYAML was built with it, the pure-Python one otherwise: the
  same documents, 5-10x faster to parse.
- Depth: libyaml refuses more than 1,000 levels; construction that recurses (and the
  pure-Python parser) runs out of stack sooner. Either way the file is "nested too deeply".
- Aliases (`*name`) and merge keys (`<<`) let a 1 KB file stand for 10^9 values (billion
  laughs). `StrictLoader` (what envsnap writes itself: snapshots) refuses both where they
  are met; `Loader` (what people write: playbooks and inventories use anchors) takes them,
  but refuses a file whose aliases would expand it by more than `MAX_ALIAS_EXPANSION`
  values, or that refers to itself, before anything is constructed.
- Size: text over `max_chars` is refused unparsed (parsing costs about 10x its size).

What a reader gets back is any YAML value; `as_mapping` is the one shape check of a mapping
that a reader makes where it reads one, handing on a `Mapping[str, object]` (each reader says
in its own words what it wanted instead).

Every failure is one `YamlError` with the line where it was met (None where no line says it)
and a one-line reason; each caller words it its own way (`file:line: YAML error: ...` for a
playbook, `corrupt snapshot (...)` for a snapshot) and raises its own error class.
"""
from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

import yaml

from envsnap.errors import YamlError
from envsnap.shape import is_mapping

if TYPE_CHECKING:
    from pathlib import Path

SafeLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
SafeDumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

MERGE_TAG = "tag:yaml.org,2002:merge"
STR_TAG, SEQ_TAG, MAP_TAG = (f"tag:yaml.org,2002:{kind}" for kind in ("str", "seq", "map"))
MAX_ALIAS_EXPANSION = 1_000_000   # values added by following aliases; real files add hundreds
DEFAULT_MAX_CHARS = 64 << 20      # a playbook or inventory is kilobytes
NESTED_TOO_DEEPLY = "nested too deeply"
LIBYAML_TOO_DEEP = "exceeded maximum nesting depth"   # libyaml's words for its 1,000 levels


def load(text: str, loader: type[Any], max_chars: int | None = DEFAULT_MAX_CHARS) -> Any:
    """The one document in `text`, built by `loader` (a subclass of one below); YamlError
    on anything that is not a document envsnap will read."""
    if max_chars is not None and len(text) > max_chars:
        raise YamlError(None, too_large(max_chars))
    try:
        return yaml.load(text, Loader=loader)  # noqa: S506 - always a SafeLoader subclass
    except RecursionError:   # `[[[[...]]]]` a few hundred deep, built by recursion
        raise YamlError(None, NESTED_TOO_DEEPLY) from None
    except yaml.YAMLError as exc:
        raise problem_of(exc) from None
    except ValueError as exc:   # an int of 5,000 digits: Python's limit on int(str)
        raise YamlError(None, str(exc).splitlines()[0]) from None


def read_text(path: str | Path, max_bytes: int = DEFAULT_MAX_CHARS) -> str:
    """A file's UTF-8 text, read no further than `max_bytes`: a larger file (or a device
    that never ends, `/dev/zero`) is a YamlError, refused before it fills the memory.
    OSError and UnicodeDecodeError as reading and decoding give them."""
    with open(path, "rb") as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise YamlError(None, too_large(max_bytes))
    return data.decode("utf-8")


def too_large(max_chars: int) -> str:
    return f"larger than {max_chars / (1 << 20):g} MiB"


def as_mapping(value: object) -> Mapping[str, object] | None:
    """`value` as a mapping of names, or None when it is no mapping. YAML keys may be
    numbers or booleans (`22:`, `yes:`); a name is text, so such a key is the text str()
    gives (a mapping whose keys are text already is handed on as it is)."""
    if not is_mapping(value):
        return None
    if all(type(key) is str for key in value):
        return cast("dict[str, object]", value)
    return {str(key): item for key, item in value.items()}


def problem_of(exc: yaml.YAMLError) -> YamlError:
    problem = getattr(exc, "problem", None)
    if problem == LIBYAML_TOO_DEEP:
        return YamlError(None, NESTED_TOO_DEEPLY)
    mark = getattr(exc, "problem_mark", None)
    return YamlError(mark.line + 1 if mark else None, problem or str(exc).splitlines()[0])


def refusal(message: str, node: Any) -> yaml.constructor.ConstructorError:
    """A refusal raised from inside the loader, so it gets its line like a syntax error."""
    return yaml.constructor.ConstructorError(None, None, message, node.start_mark)


class Loader(SafeLoader):  # type: ignore[misc]
    """The safe loader for files people write: aliases and merge keys as YAML has them,
    within `MAX_ALIAS_EXPANSION`, checked on the composed node graph before construction."""

    def get_single_data(self) -> Any:
        node = self.get_single_node()
        if node is None:
            return None
        check_expansion(node)
        return self.construct_document(node)


def children(node: Any) -> list[Any]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def check_expansion(root: Any) -> None:
    """The tree `root` stands for once its aliases are followed, measured without following
    them: each node's expanded size is computed once (post-order, no recursion) and reused
    wherever an alias points at it."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if id(node) in sizes:
            continue
        below = children(node)
        if expanded:
            open_nodes.discard(id(node))
            sizes[id(node)] = 1 + sum(sizes[id(child)] for child in below)
            continue
        if id(node) in open_nodes:
            raise YamlError(node.start_mark.line + 1, "a YAML alias refers to itself")
        open_nodes.add(id(node))
        stack.append((node, True))
        stack.extend((child, False) for child in below if id(child) not in sizes)
    if sizes[id(root)] - len(sizes) > MAX_ALIAS_EXPANSION:
        raise YamlError(None, "YAML aliases (*name) and merge keys (<<) expand to more than "
                              f"{MAX_ALIAS_EXPANSION:,} values")


class StrictLoader(SafeLoader):  # type: ignore[misc]
    """The safe loader for what envsnap writes itself, refusing what it never writes: an
    alias (`*name`) or a merge key (`<<`), where they are met, before anything can walk the
    multiplied tree. `kind` names the document in the refusal ("a snapshot").

    Plain strings, string-keyed mappings and lists (nearly every node of a snapshot) are
    built here directly, without the generic constructor's bookkeeping: loading 1,000
    snapshots for `diff --fleet` spent most of its time there. Any other node (numbers,
    booleans, null, other keys or tags) goes the generic way, with the same checks."""

    kind = "this file"

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self.visited: set[Any] = set()
        self.depth = 0

    def construct_object(self, node: Any, deep: bool = False) -> Any:
        # Without aliases every node is constructed once: a second visit is an alias.
        self.visit(node)
        tag = node.tag
        if tag == STR_TAG and isinstance(node, yaml.ScalarNode):
            return node.value
        # Built here by recursion, so only so deep: deeper, the generic constructor builds
        # collections level by level, without recursion, as a hostile file needs.
        if self.depth < MAX_DIRECT_DEPTH:
            self.depth += 1
            try:
                if tag == SEQ_TAG and isinstance(node, yaml.SequenceNode):
                    return [self.construct_object(item) for item in node.value]
                if tag == MAP_TAG and isinstance(node, yaml.MappingNode) and \
                        all(key.tag == STR_TAG and isinstance(key, yaml.ScalarNode)
                            for key, _ in node.value):
                    return self.string_keyed(node)
            finally:
                self.depth -= 1
        return super().construct_object(node, deep)

    def string_keyed(self, node: Any) -> dict[str, object]:
        mapping: dict[str, object] = {}
        for key, value in node.value:
            self.visit(key)
            mapping[key.value] = self.construct_object(value)
        return mapping

    def visit(self, node: Any) -> None:
        if node in self.visited:
            raise refusal(f"YAML aliases (*name) are not allowed in {self.kind}", node)
        self.visited.add(node)

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        # A scalar's tag: a quoted one is a str; a plain one's follows from its text alone.
        if kind is yaml.ScalarNode and len(value) <= MAX_CACHED_SCALAR:
            return plain_scalar_tag(value) if implicit[0] else STR_TAG
        return super().resolve(kind, value, implicit)

    def flatten_mapping(self, node: Any) -> None:
        for key_node, _ in node.value:
            if key_node.tag == MERGE_TAG:
                raise refusal(f"YAML merge keys (<<) are not allowed in {self.kind}", key_node)
        super().flatten_mapping(node)


MAX_DIRECT_DEPTH = 40   # a snapshot nests about 10 deep
# Scalars longer than this (patches, command lines) are resolved each time: rarely repeated.
MAX_CACHED_SCALAR = 128
PLAIN_RESOLVER: Any = yaml.resolver.Resolver()


@functools.lru_cache(maxsize=1 << 16)
def plain_scalar_tag(value: str) -> str:
    """The tag of an untagged plain scalar (str, int, null...). The parser asks for every
    scalar of every file, and the snapshots of a fleet hold the same short scalars over and
    over; the answer depends on nothing else (StrictLoader uses no path resolvers). Keyed by
    the text alone, the cache holds no tuple per entry: fewer objects for the cyclic
    collector to walk, again at exit."""
    return str(PLAIN_RESOLVER.resolve(yaml.ScalarNode, value, (True, False)))
