"""Every file envsnap writes into its store or its caches goes through the one writer
(snapshot/entries.py: never through a link, never into a FIFO or a device).

The package is read as source, nothing imported. Every direct write found (open for writing,
os.open, write_text, write_bytes, a rename, a link, a temp file, atomic_write, write_new) is
listed below with why it is not a store entry nor a cache file, or why it is safe as it is.
A new direct write fails this test until it goes through entries.write_entry (or
append_entry, create_entry) or is judged here: so none writes into the store by another way.
"""
from __future__ import annotations

import ast
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from envsnap.errors import StoreError
from envsnap.snapshot.entries import append_entry, create_entry, write_entry

ENVSNAP = Path(__file__).resolve().parents[3] / "envsnap"

# Writes whatever the arguments (write_text and write_bytes: a Path's methods); and these,
# called on os or shutil.
WRITE_CALLS = frozenset({"write_text", "write_bytes", "mkstemp", "NamedTemporaryFile",
                         "atomic_write", "write_new"})
METHODS = frozenset({"write_text", "write_bytes"})
OS_WRITES = {"os": frozenset({"replace", "rename", "link", "symlink", "mkfifo"}),
             "shutil": frozenset({"copyfile", "copy", "copy2", "copytree", "move"})}
# os.open with one of these flags, open()/Path.open()/fdopen with one of these modes.
WRITE_FLAGS = frozenset({"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"})
WRITE_MODES = ("w", "a", "x", "+")
# What these are called on is no file on disk (a str, a tar in memory, a dict).
NOT_FILES = frozenset({"str", "tarfile", "gzip", "zipfile", "re"})

USER_NAMED = "a file the user named (an output option), written as named: not the store's"
# module:function -> why a direct write there is not a store entry's, or is safe as it is.
DIRECT: dict[str, str] = {
    "envsnap.snapshot.store:atomic_write": "the writer of files the user names (report -o, "
                                           "--plot, bundles); store entries use write_entry",
    "envsnap.snapshot.store:write_new": "links a new file into place: a link never replaces "
                                        "what is there, nor is it followed (O_EXCL)",
    "envsnap.snapshot.store:Store.check_writable": "a probe: a new temp file (O_EXCL)",
    "envsnap.snapshot.store:Store.save": "write_new for a label that must be new (write_entry "
                                         "replaces)",
    "envsnap.timeline.saved:save": "write_new: a saved timeline's label must be new",
    "envsnap.history.store:History.claim": "write_new: a history manifest's name must be new",
    "envsnap.history.upkeep:delete_unless_used": "moves a part aside within its folder and "
                                                 "back: a rename, never through a link",
    "envsnap.report.build:save_text": USER_NAMED,
    "envsnap.report.bundle:write_bytes": USER_NAMED,
    "envsnap.cli.bisect:write_plot": USER_NAMED,
    "envsnap.snapshot.provenance:make_key": "the key in the config folder, made new and "
                                            "linked into place (never replaces)",
    "envsnap.cli.crash:write_crash_log": "a new crash log of its own name (O_EXCL)",
    "envsnap.hosts.transport:known_hosts_policy": "the user's ~/.ssh/known_hosts, as OpenSSH "
                                                  "appends to it",
    "envsnap.ansible.build:build": "the collection into the DEST the user named, which "
                                   "envsnap made (never replaced otherwise)",
    "envsnap.cli.main:silence_stdout": "/dev/null, opened to stand for a closed stdout",
    "envsnap.demo.scene:set_up": "the demo's own scene in a folder of its own",
    "envsnap.demo.scene:make_venv": "the demo's own scene in a folder of its own",
    "envsnap.demo.scene:the_silent_pull": "the demo's own scene in a folder of its own",
    "envsnap.demo.scene:Scene.write": "the demo's own scene in a folder of its own",
    "envsnap.demo.scene:start_watch": "the demo's own scene in a folder of its own",
    "envsnap.watch.status:WatcherLock.__init__": "a lock file opened O_NOFOLLOW and flocked, "
                                                 "never written",
    "envsnap.demo.snapshots:write_examples": "the demo's own snapshots into the folder it "
                                             "was given",
}


def modules() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(ENVSNAP.rglob("*.py")):
        parts = list(path.relative_to(ENVSNAP.parent).with_suffix("").parts)
        # the agent writes no file; treefile_host is the host's own write policy; entries
        # is the writer itself
        if parts[1] == "agent" or parts[-1] in ("treefile_host", "entries"):
            continue
        if parts[-1] == "__init__":
            parts.pop()
        yield ".".join(parts), ast.parse(path.read_text(encoding="utf-8"))


def functions(tree: ast.Module) -> Iterator[tuple[str, ast.AST]]:
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield f"{node.name}.{item.name}", item


def names_in(node: ast.AST) -> set[str]:
    return {leaf.id if isinstance(leaf, ast.Name) else leaf.attr for leaf in ast.walk(node)
            if isinstance(leaf, (ast.Name, ast.Attribute))}


def write_mode(call: ast.Call, position: int) -> bool:
    given = call.args[position] if len(call.args) > position else next(
        (keyword.value for keyword in call.keywords if keyword.arg == "mode"), None)
    return isinstance(given, ast.Constant) and isinstance(given.value, str) and \
        any(mark in given.value for mark in WRITE_MODES)


def writes(call: ast.Call) -> bool:
    func = call.func
    name = func.id if isinstance(func, ast.Name) else \
        func.attr if isinstance(func, ast.Attribute) else ""
    owner = func.value.id if isinstance(func, ast.Attribute) and \
        isinstance(func.value, ast.Name) else ""
    if owner in NOT_FILES:
        return False
    if name in METHODS and not isinstance(func, ast.Attribute):
        return False   # a function of that name, whose own writes are judged where it is
    if name in WRITE_CALLS or name in OS_WRITES.get(owner, ()):
        return True
    if name == "open" and owner == "os":
        return bool(call.args[1:2]) and bool(names_in(call.args[1]) & WRITE_FLAGS)
    if name == "open":
        return write_mode(call, 0 if isinstance(func, ast.Attribute) else 1)
    if name == "fdopen":
        return write_mode(call, 1)
    return False


def direct_writers() -> set[str]:
    found = set()
    for module, tree in modules():
        for name, node in functions(tree):
            if any(isinstance(call, ast.Call) and writes(call) for call in ast.walk(node)):
                found.add(f"{module}:{name}")
    return found


def test_every_direct_write_is_judged() -> None:
    """Each direct write is listed with its reason; every other goes through the writer."""
    found = direct_writers()
    assert sorted(found - set(DIRECT)) == [], "write it with entries.write_entry, or judge it"
    assert sorted(set(DIRECT) - found) == [], "listed, but it writes no file now"


def test_the_scan_sees_each_way_of_writing() -> None:
    source = ("def a(p):\n    p.write_text('x')\n"
              "def b(p):\n    open(p, 'a').write('x')\n"
              "def c(p):\n    os.close(os.open(p, os.O_WRONLY | os.O_CREAT))\n"
              "def d(p):\n    os.replace('t', p)\n"
              "def e(p):\n    p.open('wb')\n"
              "def f(p):\n    open(p).read(); os.open(p, os.O_RDONLY); str.replace('a', 'b', 'c')\n"
              "def g(p):\n    write_entry(p, 'x')\n")
    tree = ast.parse(source)
    assert [name for name, node in functions(tree)
            if any(isinstance(call, ast.Call) and writes(call) for call in ast.walk(node))] \
        == ["a", "b", "c", "d", "e"]


# ---- the writer itself, on what may stand at a path --------------------------------------

def test_a_link_is_replaced_its_target_untouched(tmp_path: Path) -> None:
    target = tmp_path / "bashrc"
    target.write_text("mine\n")
    entry = tmp_path / "entry"
    entry.symlink_to(target)
    write_entry(entry, "new\n")
    assert target.read_text() == "mine\n"
    assert not entry.is_symlink() and entry.read_text() == "new\n"
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600


@pytest.mark.parametrize("kind", ["fifo", "link-to-fifo", "device"])
def test_what_is_no_regular_file_is_refused_in_one_line(tmp_path: Path, kind: str) -> None:
    entry = tmp_path / "entry"
    if kind == "fifo":
        os.mkfifo(entry)
    elif kind == "link-to-fifo":
        os.mkfifo(tmp_path / "fifo")
        entry.symlink_to(tmp_path / "fifo")
    else:
        entry.symlink_to("/dev/null")
    with pytest.raises(StoreError, match=r"^.*entry: the store entry is not a regular file "
                                         r"\(a (FIFO|character device)\), refused: move it away$"):
        write_entry(entry, "x")
    with pytest.raises(StoreError, match="the store entry is not a regular file"):
        append_entry(entry, "x")


def test_a_journal_grows_only_in_a_regular_file_of_its_own(tmp_path: Path) -> None:
    journal = tmp_path / "journal.jsonl"
    create_entry(journal)
    append_entry(journal, "one\n")
    append_entry(journal, "two\n")
    assert journal.read_text() == "one\ntwo\n"
    with pytest.raises(FileExistsError):
        create_entry(journal)
    linked = tmp_path / "linked.jsonl"
    linked.symlink_to(journal)
    with pytest.raises(StoreError, match=r"not a regular file \(a link\)"):
        append_entry(linked, "three\n")
    with pytest.raises(FileExistsError):
        create_entry(linked)
    assert journal.read_text() == "one\ntwo\n"
