"""Every writer of a python startup file passes the host-wide gate (hostops/hostwide.py).

The package is read as source, nothing imported. A writer is a function that calls one of
the primitives that write a file on a host (treefile's write, write_many, remove, put_back;
hostops.files.write_file; the playbook's install), or that writes a local file while it
names a startup file (a string or module constant holding sitecustomize, usercustomize or
.pth). Each one found must be listed below: either it reaches `startup_gate` (in its own
module, through the functions and methods it calls there), or the reason it needs no gate is
written beside it. A new writer fails this test until it is one or the other, so none slips
by.
"""
from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ENVSNAP = Path(__file__).resolve().parents[3] / "envsnap"

# Host writes: `treefile.<name>(...)`, or these names called bare.
TREEFILE_WRITES = frozenset({"write", "write_many", "remove", "put_back"})
BARE_WRITES = frozenset({"write_file", "install"})
# Local writes, a writer when the function names a startup file.
LOCAL_WRITES = frozenset({"write_text", "write_bytes", "atomic_write", "write_entry",
                          "write_new"})
STARTUP_NAMES = ("sitecustomize", "usercustomize", ".pth")
GATE = "startup_gate"

GATED = "gated"
# module:function -> GATED, or why that writer needs no gate.
WRITERS: dict[str, str] = {
    "envsnap.hostops.site:write": GATED,
    "envsnap.explain.apply:StartupFiles.put": GATED,
    "envsnap.playbook.tasks.env_file:env_file": GATED,
    "envsnap.hostops.site:put_back": "puts back only what a gated write saved in its backup",
    "envsnap.explain.apply:StartupFiles.__exit__": "puts back the .pth files its gated put() "
                                                   "saved",
    "envsnap.playbook.tasks.gitbackup:put_back": "puts back a checkout's files a restore "
                                                 "saved",
    "envsnap.playbook.tasks.gitsubmodule:put_back_work": "puts back a submodule's files a "
                                                         "restore saved",
    "envsnap.playbook.tasks.untracked:put_files": "untracked files inside a checkout's top, "
                                                  "never outside it (treefile's policy)",
    "envsnap.playbook.tasks.files:copy": "the playbook's own dest, written as it names it",
    "envsnap.playbook.tasks.files:template": "the playbook's own dest, written as it names it",
    "envsnap.playbook.tasks.hostfile:install": "the playbook's one host writer: every caller "
                                               "is listed here",
    # the demo builds its own scene in a folder of its own: its own venv, not the host's
    "envsnap.demo.scene:make_venv": "the demo's own venv, made in its own folder",
    # watch --install writes the user's own systemd unit or crontab line, shown and asked
    "envsnap.cli.watch:cmd_watch": "watch --install: the user's own unit or crontab, asked",
    "envsnap.demo.scene:set_up": "the demo's own venv, made in its own folder",
    "envsnap.demo.scene:the_silent_pull": "the demo's own venv, made in its own folder",
}


def modules() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(ENVSNAP.rglob("*.py")):
        parts = list(path.relative_to(ENVSNAP.parent).with_suffix("").parts)
        if parts[1] == "agent" or parts[-1] == "treefile_host":
            continue   # the agent only reads; treefile_host is the primitives themselves
        if parts[-1] == "__init__":
            parts.pop()
        yield ".".join(parts), ast.parse(path.read_text(encoding="utf-8"))


def functions(tree: ast.Module) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Each function and method by its qualified name (nested ones by their outer one's)."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield f"{node.name}.{item.name}", item


def called(node: ast.AST) -> Iterator[tuple[str | None, str]]:
    """(what the call is made on, the name called) for each call under `node`."""
    for call in ast.walk(node):
        if not isinstance(call, ast.Call):
            continue
        if isinstance(call.func, ast.Name):
            yield None, call.func.id
        elif isinstance(call.func, ast.Attribute):
            owner = call.func.value
            yield (owner.id if isinstance(owner, ast.Name) else ""), call.func.attr


def startup_constants(tree: ast.Module) -> set[str]:
    """The module's constants whose value names a startup file."""
    found = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and \
                isinstance(node.value.value, str) and names_startup(node.value.value):
            found |= {target.id for target in node.targets if isinstance(target, ast.Name)}
    return found


def names_startup(text: str) -> bool:
    return any(name in text for name in STARTUP_NAMES)


def mentions_startup(node: ast.AST, constants: set[str]) -> bool:
    return any((isinstance(leaf, ast.Constant) and isinstance(leaf.value, str)
                and names_startup(leaf.value))
               or (isinstance(leaf, ast.Name) and leaf.id in constants)
               for leaf in ast.walk(node))


def is_writer(node: ast.AST, constants: set[str]) -> bool:
    for owner, name in called(node):
        if owner == "treefile" and name in TREEFILE_WRITES:
            return True
        if owner is None and name in BARE_WRITES:
            return True
        if name in LOCAL_WRITES and mentions_startup(node, constants):
            return True
    return False


def reaches_gate(start: str, defined: dict[str, ast.AST]) -> bool:
    """Whether `start` calls startup_gate, itself or through the functions and methods of
    its module it calls (`self.x` and bare names, resolved by name there)."""
    seen, todo = set(), [start]
    while todo:
        name = todo.pop()
        if name in seen or name not in defined:
            continue
        seen.add(name)
        for owner, callee in called(defined[name]):
            if callee == GATE:
                return True
            cls = name.split(".")[0] if "." in name else ""
            todo += [callee, f"{cls}.{callee}"] if owner in (None, "self") else []
    return False


def found_writers() -> dict[str, bool]:
    """module:function -> whether it reaches the gate, for every writer in the package."""
    found = {}
    for module, tree in modules():
        constants = startup_constants(tree)
        defined: dict[str, ast.AST] = dict(functions(tree))
        for name, node in defined.items():
            if is_writer(node, constants):
                found[f"{module}:{name}"] = reaches_gate(name, defined)
    return found


def test_every_writer_of_startup_files_is_known() -> None:
    """A new writer is listed with GATED (and then reaches the gate) or with its reason."""
    found = found_writers()
    assert sorted(set(found) - set(WRITERS)) == [], "a writer nobody has judged"
    assert sorted(set(WRITERS) - set(found)) == [], "listed, but no longer a writer"


def test_each_writer_listed_as_gated_reaches_the_gate() -> None:
    found = found_writers()
    ungated = [name for name, why in WRITERS.items() if why == GATED and not found.get(name)]
    assert ungated == []


def test_the_scan_sees_a_writer_that_skips_the_gate() -> None:
    """The scan itself: a writer of a .pth that never asks the gate is found, and not gated;
    the same writer asking it is gated."""
    source = ("PTH = 'x.pth'\n"
              "def sneaky(shell):\n    treefile.write(shell, '/usr/lib', PTH, b'', None)\n"
              "def local(folder):\n    (folder / PTH).write_text('import os')\n"
              "def careful(shell):\n    check()\n    treefile.write(shell, '/x', PTH, b'', None)\n"
              "def check():\n    startup_gate(False, True, '3', str)\n")
    tree = ast.parse(source)
    defined: dict[str, ast.AST] = dict(functions(tree))
    constants = startup_constants(tree)
    assert constants == {"PTH"}
    assert [name for name, node in defined.items() if is_writer(node, constants)] == \
        ["sneaky", "local", "careful"]
    assert not reaches_gate("sneaky", defined) and reaches_gate("careful", defined)
