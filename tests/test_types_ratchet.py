"""A ratchet on envsnap's untyped data: two counts per package may fall but never grow.

envsnap's data is typed (the snapshot's TypedDicts in snapshot/records.py, NamedTuples and
dataclasses elsewhere). Two things mark where it is not, and each package's count of them is
held below a ceiling recorded here. The agent is left out: it travels to the host alone and
reads whatever the host hands it; its output is typed where it arrives (snapshot/records.py,
timeline/evidence.py).

Every `.py` file under envsnap/ is read as source (nothing is imported), and counted are:

- an untyped mapping: a subscript `dict[K, Any]`, `Dict[K, Any]`, `Mapping[K, Any]` or
  `MutableMapping[K, Any]` (bare or as `typing.`/`collections.abc.` attributes, any key type
  K), wherever it stands: an annotation, a type alias, a `cast`, nested in another type
  (`list[dict[str, Any]]` counts one, `dict[str, dict[str, Any]]` one). A quoted annotation is
  read as the expression it holds.
- a dict guard: a call `isinstance(x, dict)`, also with `Mapping`/`MutableMapping` or
  with a tuple that holds one of them (`isinstance(x, (dict, list))` counts one).

What is not counted: `isinstance(x, str)` and the like. A call of envsnap/shape.py's
is_mapping or is_object (or of the readers that only pass them on, snapshot.spec.is_object
and yamlread.as_mapping), the one question every reader shares, is not a dict guard (its own
isinstance counts once, under shape), but it is counted apart, as a shape question, and held
by its own ceiling: a guard moved behind the helper must not grow unseen.
A value from outside envsnap (an inventory, a playbook's arguments, the
agent's output, a host's answer, a saved file, a paste) is checked once, by the one reader of
its source, which hands on typed data; a walk over a snapshot's JSON tree asks
snapshot.spec.is_object (shape's question again); a typed record needs no check. What is
left counted is a check that cannot ask shape: code that runs alone on the host
(hostops/treefile_host.py, like the agent) imports nothing of envsnap.
An alias (`View = dict[str, Any]`) counts once, where it is declared.

A package is the folder under envsnap/ (envsnap/diff/keys.py counts for diff); a module at
the top of envsnap/ counts under its own name (yamlread). When a count falls, lower its
ceiling here with the change that lowered it, so it cannot creep back.
Run this file (python tests/test_types_ratchet.py) to print the counts.
"""
from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path
from typing import NamedTuple

import pytest

ENVSNAP = Path(__file__).resolve().parent.parent / "envsnap"
LEFT_OUT = frozenset({"agent"})

MAPPINGS = frozenset({"dict", "Dict", "Mapping", "MutableMapping"})

# Each package's ceiling: (untyped mappings, dict guards, shape's questions). A package not
# named has 0, 0 and 0.
CEILINGS: dict[str, tuple[int, int, int]] = {
    "ansible": (1, 0, 0),
    "demo": (7, 0, 0),
    "diff": (13, 0, 13),
    "history": (0, 0, 12),
    "hostops": (0, 2, 4),
    "hosts": (5, 0, 20),
    "imports": (0, 0, 7),
    "playbook": (9, 0, 16),
    "report": (6, 0, 1),
    "shape": (0, 1, 1),
    "snapshot": (11, 0, 9),
    "timeline": (1, 0, 3),
    "yamlread": (0, 0, 1),
}
# The most for all packages together: the targets (60 and 10), or the count where it is
# lower. Dict guards: shape's one, and the host-side treefile_host.py's manifest check.
TOTAL_MAPPINGS = 60
TOTAL_GUARDS = 3


SHAPE_QUESTIONS = frozenset({"is_mapping", "is_object", "as_mapping"})


class Counts(NamedTuple):
    mappings: int
    guards: int
    asks: int = 0       # calls of shape's questions (module docstring)


def name_of(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def is_untyped_mapping(node: ast.AST) -> bool:
    """`dict[K, Any]` and its kin (module docstring)."""
    return (isinstance(node, ast.Subscript) and name_of(node.value) in MAPPINGS
            and isinstance(node.slice, ast.Tuple) and len(node.slice.elts) == 2
            and name_of(node.slice.elts[1]) == "Any")


def is_dict_guard(node: ast.AST) -> bool:
    """`isinstance(x, dict)`, its kin and a tuple holding one (module docstring)."""
    if not (isinstance(node, ast.Call) and name_of(node.func) == "isinstance"
            and len(node.args) == 2):
        return False
    kinds = node.args[1]
    named = kinds.elts if isinstance(kinds, ast.Tuple) else [kinds]
    return any(name_of(kind) in MAPPINGS for kind in named)


def is_shape_question(node: ast.AST) -> bool:
    """A call of shape's is_mapping / is_object or a reader that passes it on."""
    return isinstance(node, ast.Call) and name_of(node.func) in SHAPE_QUESTIONS


def quoted_annotations(tree: ast.AST) -> list[ast.AST]:
    """The expressions inside quoted annotations (`x: "dict[str, Any]"`), parsed."""
    annotations: list[ast.expr | None] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.arg, ast.AnnAssign)):
            annotations.append(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            annotations.append(node.returns)
    return [ast.parse(note.value, mode="eval")
            for note in annotations
            if isinstance(note, ast.Constant) and isinstance(note.value, str)]


def count_source(text: str, filename: str = "<source>") -> Counts:
    tree = ast.parse(text, filename)
    nodes = [node for top in [tree, *quoted_annotations(tree)] for node in ast.walk(top)]
    return Counts(sum(map(is_untyped_mapping, nodes)), sum(map(is_dict_guard, nodes)),
                  sum(map(is_shape_question, nodes)))


def package_of(path: Path, root: Path) -> str:
    parts = path.relative_to(root).parts
    return parts[0] if len(parts) > 1 else path.stem


def count_packages(root: Path = ENVSNAP) -> dict[str, Counts]:
    mappings: Counter[str] = Counter()
    guards: Counter[str] = Counter()
    asks: Counter[str] = Counter()
    for path in sorted(root.rglob("*.py")):
        package = package_of(path, root)
        if package in LEFT_OUT:
            continue
        counts = count_source(path.read_text(), str(path))
        mappings[package] += counts.mappings
        guards[package] += counts.guards
        asks[package] += counts.asks
    return {package: Counts(mappings[package], guards[package], asks[package])
            for package in sorted(mappings | guards | asks)
            if mappings[package] or guards[package] or asks[package]}


def over_ceiling(counts: dict[str, Counts],
                 ceilings: dict[str, tuple[int, int, int]]) -> list[str]:
    """One line for each package whose count grew above its ceiling, and for each total
    above its target."""
    grown = []
    for package, (mappings, guards, asks) in counts.items():
        most_mappings, most_guards, most_asks = ceilings.get(package, (0, 0, 0))
        if mappings > most_mappings:
            grown.append(f"{package}: {mappings} untyped mappings, ceiling {most_mappings}")
        if guards > most_guards:
            grown.append(f"{package}: {guards} dict guards, ceiling {most_guards}")
        if asks > most_asks:
            grown.append(f"{package}: {asks} shape questions, ceiling {most_asks}")
    total = Counts(sum(c.mappings for c in counts.values()),
                   sum(c.guards for c in counts.values()))
    if total.mappings > TOTAL_MAPPINGS:
        grown.append(f"all: {total.mappings} untyped mappings, most {TOTAL_MAPPINGS}")
    if total.guards > TOTAL_GUARDS:
        grown.append(f"all: {total.guards} dict guards, most {TOTAL_GUARDS}")
    return grown


# ---- the counting itself --------------------------------------------------------------------

@pytest.mark.parametrize(("source", "expected"), [
    ("x: dict[str, Any] = {}", Counts(1, 0)),
    ("def f(a: Mapping[str, Any]) -> typing.Dict[str, Any]: ...", Counts(2, 0)),
    ("X = list[dict[str, dict[str, Any]]]", Counts(1, 0)),
    ("y = cast(MutableMapping[int, Any], x)", Counts(1, 0)),
    ('def f(a: "dict[str, Any]") -> "Mapping[str, Any]": ...', Counts(2, 0)),
    ("x: dict[str, int] = {}; y: Mapping[str, object]; z: list[Any]", Counts(0, 0)),
    ("isinstance(x, dict) and isinstance(y, (list, dict))", Counts(0, 2)),
    ("isinstance(x, abc.Mapping) or isinstance(x, list) or isinstance(x, str)", Counts(0, 1)),
    ("def isinstance_dict(x): return type(x) is dict", Counts(0, 0)),
    ("shape.is_mapping(x) or is_object(y) or yamlread.as_mapping(z, 'w')", Counts(0, 0, 3)),
])
def test_counts_what_the_docstring_says(source: str, expected: Counts) -> None:
    assert count_source(source) == expected


def test_a_package_over_its_ceiling_or_a_total_over_its_target_fails() -> None:
    counts = {"diff": Counts(3, 1), "imports": Counts(0, 0)}
    assert over_ceiling(counts, {"diff": (3, 1, 0)}) == []
    assert over_ceiling({**counts, "imports": Counts(1, 0)}, {"diff": (3, 1, 0)}) == [
        "imports: 1 untyped mappings, ceiling 0"]
    assert over_ceiling({"imports": Counts(0, 0, 2)}, {"imports": (0, 0, 1)}) == [
        "imports: 2 shape questions, ceiling 1"]
    assert over_ceiling({"diff": Counts(TOTAL_MAPPINGS + 1, TOTAL_GUARDS + 1)},
                        {"diff": (99, 99, 99)}) == [
        f"all: {TOTAL_MAPPINGS + 1} untyped mappings, most {TOTAL_MAPPINGS}",
        f"all: {TOTAL_GUARDS + 1} dict guards, most {TOTAL_GUARDS}"]


def test_a_new_guard_in_a_package_is_caught(tmp_path: Path) -> None:
    """The real tree counted again with one more guard and one more untyped mapping written
    into a copy of a module: the ratchet must see both."""
    counted = count_packages()
    copy = tmp_path / "envsnap"
    for path in ENVSNAP.rglob("*.py"):
        target = copy / path.relative_to(ENVSNAP)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(path.read_text())
    extra = copy / "timeline" / "model.py"
    extra.write_text(extra.read_text()
                     + "\n\ndef loose(x: dict[str, Any]) -> bool:\n"
                       "    return isinstance(x, dict) or is_mapping(x)\n")
    grown = count_packages(copy)
    assert grown["timeline"] == Counts(counted["timeline"].mappings + 1,
                                       counted["timeline"].guards + 1,
                                       counted["timeline"].asks + 1)
    assert any(line.startswith("timeline:") for line in over_ceiling(grown, CEILINGS))


# ---- the ratchet ----------------------------------------------------------------------------

def test_no_package_grows_its_untyped_data() -> None:
    grown = over_ceiling(count_packages(), CEILINGS)
    assert not grown, ("untyped data grew (use the typed records of snapshot/records.py, a "
                       "NamedTuple or a dataclass; validate once where the data is read):\n"
                       + "\n".join(grown))


def test_no_ceiling_is_left_above_its_count() -> None:
    """A ceiling is lowered with the change that lowers its count, so the room freed cannot
    be spent again unseen."""
    counts = count_packages()
    slack = [f"{package}: ceiling {ceiling}, counted {tuple(counted)}"
             for package, ceiling in CEILINGS.items()
             for counted in [counts.get(package, Counts(0, 0))]
             if any(most > count for most, count in zip(ceiling, counted))]
    assert not slack, "lower these ceilings to their counts:\n" + "\n".join(slack)


if __name__ == "__main__":
    found = count_packages()
    rows = [f"{package:12} {counts.mappings:8} {counts.guards:6} {counts.asks:5}"
            for package, counts in found.items()]
    rows.append(f"{'total':12} {sum(c.mappings for c in found.values()):8} "
                f"{sum(c.guards for c in found.values()):6} "
                f"{sum(c.asks for c in found.values()):5}")
    sys.stdout.write("package      mappings guards asks\n" + "\n".join(rows) + "\n")
    sys.exit(1 if over_ceiling(found, CEILINGS) else 0)
