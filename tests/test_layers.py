"""The floors of envsnap: each package imports only from the floors below it, and no two
modules or packages import each other, however indirectly.

Every `.py` file under envsnap/ is read as source (nothing is imported), and every import in
it counts, wherever it stands: at module level, inside a function, under `if TYPE_CHECKING:`
(a type is a dependency too: mypy follows it), and `import_module("envsnap.x")` with a
literal name (an f-string counts by its literal head, `f"envsnap.cli.{name}"` is
envsnap.cli). An import hidden inside a function to dodge a cycle is still the cycle.

What an import statement depends on is the module whose names it reads:
`import envsnap.a.b` and `from envsnap.a.b import name` read envsnap.a.b; `from envsnap.a
import b`, where b is a module, reads both envsnap.a (its `__init__`, which may define names of
its own) and envsnap.a.b.

The floors, lowest first. The agent is the lowest: it travels to the host alone in a zip
(hosts/payload.py), so it can import nothing else of envsnap. Packages on one floor stand side
by side and import nothing from each other: one that needs another belongs a floor higher.
A module at the top of envsnap/ (errors.py, defaults.py, any small shared module) stands on
SHARED unless named elsewhere, where the modules may use each other (cycles aside); a new
package must be given its floor here.
"""
from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

ENVSNAP = Path(__file__).resolve().parent.parent / "envsnap"

FLOORS: tuple[tuple[str, ...], ...] = (
    ("agent",),
    ("__init__", "errors", "defaults"),   # and every other module at the top of envsnap/
    ("snapshot",),
    ("hosts", "imports", "history"),
    ("hostops",),
    ("bench",),
    ("diff",),
    ("timeline",),
    ("playbook", "ansible"),
    ("restore",),
    ("bisect",),
    ("explain", "report"),
    ("demo",),
    ("cli",),
    ("__main__",),
)
SHARED = 1

# Below their floor, and still out of bounds. The report only lays out what it is handed and
# reaches no host itself (the CLI reads the host's timeline, then hands it over); explain
# reads what a snapshot recorded from snapshot/, not through restore/'s own use of it.
OUT_OF_BOUNDS: dict[str, tuple[str, ...]] = {
    "report": ("envsnap.hosts", "envsnap.timeline.run", "envsnap.timeline.of_snapshot"),
    "explain": ("envsnap.restore",),
}


@dataclass(frozen=True)
class Import:
    source: str   # the importing module, dotted
    target: str   # the module it reads
    path: Path
    line: int

    def where(self, root: Path) -> str:
        return f"{self.path.relative_to(root.parent)}:{self.line}"


# ---- reading the imports --------------------------------------------------------------------

def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules_under(root: Path) -> dict[str, Path]:
    return {module_name(path, root): path for path in sorted(root.rglob("*.py"))}


def absolute(node: ast.ImportFrom, source: str, is_package: bool) -> str:
    """The dotted module a `from ... import` reads, relative forms (the agent's) resolved."""
    if not node.level:
        return node.module or ""
    base = source.split(".") if is_package else source.split(".")[:-1]
    base = base[:len(base) - node.level + 1]
    return ".".join([*base, node.module] if node.module else base)


def named_modules(node: ast.AST, source: str, is_package: bool,
                  known: Iterable[str]) -> Iterator[str]:
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
        module = absolute(node, source, is_package)
        yield module
        yield from (f"{module}.{alias.name}" for alias in node.names
                    if f"{module}.{alias.name}" in known)
    elif isinstance(node, ast.Call) and called_name(node.func) == "import_module" and node.args:
        yield from literal_module(node.args[0])


def called_name(func: ast.expr) -> str:
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def literal_module(arg: ast.expr) -> Iterator[str]:
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        yield arg.value
    elif isinstance(arg, ast.JoinedStr) and arg.values:
        head = arg.values[0]
        if isinstance(head, ast.Constant) and isinstance(head.value, str) and "." in head.value:
            yield head.value.rsplit(".", 1)[0]


def imports_under(root: Path) -> list[Import]:
    """Every import of a module of `root` (a package folder) in every file under it."""
    known = modules_under(root)
    found = []
    for source, path in known.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for target in named_modules(node, source, is_package, known):
                if (target == root.name or target.startswith(f"{root.name}.")) \
                        and target != source:
                    found.append(Import(source, target, path, getattr(node, "lineno", 0)))
    return found


# ---- floors ---------------------------------------------------------------------------------

def unit(module: str) -> str:
    """The package a module belongs to (`envsnap.diff.keys` -> diff), or the top-level
    module's own name (`envsnap.errors` -> errors, envsnap itself -> __init__)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def floor_of(module: str, root: Path, floors: Sequence[Sequence[str]]) -> int:
    name = unit(module)
    for level, names in enumerate(floors):
        if name in names:
            return level
    if (root / f"{name}.py").is_file():
        return SHARED
    raise AssertionError(f"{root.name}/{name}/ stands on no floor: give it one in FLOORS")


def floor_breaks(imports: Iterable[Import], root: Path,
                 floors: Sequence[Sequence[str]]) -> list[str]:
    """An import up a floor, or sideways between two packages of one floor."""
    broken = []
    for imp in imports:
        if unit(imp.source) == unit(imp.target):
            continue
        low, high = floor_of(imp.source, root, floors), floor_of(imp.target, root, floors)
        if high > low or (high == low != SHARED):
            way = "up a floor" if high > low else "sideways, on its own floor"
            broken.append(f"{imp.where(root)}: {imp.source} ({unit(imp.source)}, floor {low}) "
                          f"imports {imp.target} ({unit(imp.target)}, floor {high}): {way}")
    return broken


def out_of_bounds(imports: Iterable[Import], root: Path,
                  bounds: dict[str, tuple[str, ...]]) -> list[str]:
    """An import of a module (or a module inside a package) its package is kept from."""
    return [f"{imp.where(root)}: {imp.source} imports {imp.target}, which {unit(imp.source)}/ "
            f"must not" for imp in imports
            if any(imp.target == kept or imp.target.startswith(f"{kept}.")
                   for kept in bounds.get(unit(imp.source), ()))]


# ---- cycles ---------------------------------------------------------------------------------

def strongly_connected(edges: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's components of more than one node: each holds at least one cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return components


def cycles(imports: Sequence[Import], root: Path, key: str) -> list[str]:
    """Each import that is part of a cycle between modules (key "module") or between
    packages (key "package"), named with its file, line and both modules."""
    def of(module: str) -> str:
        return module if key == "module" else unit(module)

    edges: dict[str, set[str]] = {}
    for imp in imports:
        if of(imp.source) != of(imp.target):
            edges.setdefault(of(imp.source), set()).add(of(imp.target))
    found = []
    for component in strongly_connected(edges):
        members = ", ".join(sorted(component))
        found.extend(f"{imp.where(root)}: {imp.source} imports {imp.target}, in a cycle of "
                     f"{key}s {members}" for imp in imports
                     if of(imp.source) in component and of(imp.target) in component
                     and of(imp.source) != of(imp.target))
    return found


# ---- envsnap itself -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def imports() -> list[Import]:
    return imports_under(ENVSNAP)


def test_the_reading_finds_imports_in_functions_and_by_name(imports: list[Import]) -> None:
    # what the rules below see: without these, they could pass by seeing nothing
    pairs = {(imp.source, imp.target) for imp in imports}
    assert ("envsnap.cli.main", "envsnap.cli") in pairs            # import_module(f"...")
    assert ("envsnap.agent.nvidia", "envsnap.agent.util") in pairs  # from . import util
    assert len(imports) > 500


def test_each_package_imports_only_from_the_floors_below(imports: list[Import]) -> None:
    assert floor_breaks(imports, ENVSNAP, FLOORS) == []


def test_the_report_reaches_no_host_and_explain_no_restore(imports: list[Import]) -> None:
    assert out_of_bounds(imports, ENVSNAP, OUT_OF_BOUNDS) == []


def test_no_two_modules_import_each_other(imports: list[Import]) -> None:
    assert cycles(imports, ENVSNAP, "module") == []


def test_no_two_packages_import_each_other(imports: list[Import]) -> None:
    assert cycles(imports, ENVSNAP, "package") == []


# ---- the checker, on trees made for it ------------------------------------------------------

def tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "envsnap"
    for name, text in {"__init__.py": "", **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


SMALL_FLOORS = (("__init__", "errors"), ("low",), ("high", "side"))


def test_an_import_up_a_floor_fails_even_inside_a_function(tmp_path: Path) -> None:
    root = tree(tmp_path, {
        "low/__init__.py": "",
        "low/a.py": "def f():\n    from envsnap.high import b\n",
        "high/__init__.py": "", "high/b.py": "from envsnap.low.a import f\n"})
    broken = floor_breaks(imports_under(root), root, SMALL_FLOORS)
    assert broken == ["envsnap/low/a.py:2: envsnap.low.a (low, floor 1) imports envsnap.high "
                      "(high, floor 2): up a floor",
                      "envsnap/low/a.py:2: envsnap.low.a (low, floor 1) imports "
                      "envsnap.high.b (high, floor 2): up a floor"]


def test_an_import_by_name_or_under_type_checking_counts(tmp_path: Path) -> None:
    root = tree(tmp_path, {
        "errors.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                     "    from envsnap.low.a import A\n",
        "low/__init__.py": "",
        "low/a.py": "import importlib\nimportlib.import_module('envsnap.high.b')\n",
        "high/__init__.py": "", "high/b.py": ""})
    broken = floor_breaks(imports_under(root), root, SMALL_FLOORS)
    assert [line.split(":", 2)[:2] for line in broken] == [["envsnap/errors.py", "3"],
                                                           ["envsnap/low/a.py", "2"]]


def test_packages_of_one_floor_do_not_import_each_other(tmp_path: Path) -> None:
    root = tree(tmp_path, {"high/__init__.py": "", "side/__init__.py": "import envsnap.high\n"})
    assert floor_breaks(imports_under(root), root, SMALL_FLOORS) == [
        "envsnap/side/__init__.py:1: envsnap.side (side, floor 2) imports envsnap.high "
        "(high, floor 2): sideways, on its own floor"]


def test_downward_imports_and_shared_modules_pass(tmp_path: Path) -> None:
    root = tree(tmp_path, {
        "words.py": "from envsnap.errors import E\n", "errors.py": "E = 1\n",
        "low/__init__.py": "", "low/a.py": "from envsnap import words, errors\n",
        "high/__init__.py": "", "high/b.py": "from envsnap.low.a import f\nimport envsnap.low\n"})
    found = imports_under(root)
    assert len(found) == 6
    assert floor_breaks(found, root, SMALL_FLOORS) == []
    assert cycles(found, root, "module") == cycles(found, root, "package") == []


def test_an_import_out_of_bounds_fails_though_it_goes_down(tmp_path: Path) -> None:
    root = tree(tmp_path, {
        "low/__init__.py": "", "low/reach.py": "", "low/near.py": "",
        "high/__init__.py": "import envsnap.low.near\n"
                            "def f():\n    from envsnap.low import reach\n"})
    found = imports_under(root)
    assert floor_breaks(found, root, SMALL_FLOORS) == []
    assert out_of_bounds(found, root, {"high": ("envsnap.low.reach",)}) == [
        "envsnap/high/__init__.py:3: envsnap.high imports envsnap.low.reach, which high/ "
        "must not"]


def test_a_package_without_a_floor_is_named(tmp_path: Path) -> None:
    root = tree(tmp_path, {"new/__init__.py": "from envsnap import errors\n", "errors.py": ""})
    with pytest.raises(AssertionError, match="envsnap/new/ stands on no floor"):
        floor_breaks(imports_under(root), root, SMALL_FLOORS)


def test_a_cycle_between_modules_fails_however_it_is_hidden(tmp_path: Path) -> None:
    root = tree(tmp_path, {
        "low/__init__.py": "from envsnap.low import a\n",
        "low/a.py": "from envsnap.low.b import g\n",
        "low/b.py": "def g():\n    from envsnap.low import c\n",
        "low/c.py": "", "low/d.py": "import envsnap.low.a\n"})
    assert cycles(imports_under(root), root, "module") == [
        "envsnap/low/__init__.py:1: envsnap.low imports envsnap.low.a, in a cycle of modules "
        "envsnap.low, envsnap.low.a, envsnap.low.b",
        "envsnap/low/a.py:1: envsnap.low.a imports envsnap.low.b, in a cycle of modules "
        "envsnap.low, envsnap.low.a, envsnap.low.b",
        "envsnap/low/b.py:2: envsnap.low.b imports envsnap.low, in a cycle of modules "
        "envsnap.low, envsnap.low.a, envsnap.low.b"]


def test_a_cycle_between_packages_fails_though_no_module_cycle_does(tmp_path: Path) -> None:
    root = tree(tmp_path, {
        "low/__init__.py": "", "low/a.py": "def f():\n    from envsnap.high.c import h\n",
        "low/b.py": "",
        "high/__init__.py": "", "high/c.py": "from envsnap.low.b import x\n"})
    found = imports_under(root)
    assert cycles(found, root, "module") == []
    assert cycles(found, root, "package") == [
        "envsnap/high/c.py:1: envsnap.high.c imports envsnap.low.b, in a cycle of packages "
        "high, low",
        "envsnap/low/a.py:2: envsnap.low.a imports envsnap.high.c, in a cycle of packages "
        "high, low"]
