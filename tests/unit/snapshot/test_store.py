from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import Cli

from envsnap.errors import SnapshotError, StoreError, UsageError
from envsnap.snapshot import document as snapshot
from envsnap.snapshot.store import Store, label_from_name, validate_label

AGENT_OUTPUT = {"agent": {"version": "1"}, "collectors": {
    "system": {"facts": {"hostname": "h"}, "volatile": {"uptime": 5}, "error": None,
               "seconds": 0.01},
    "git": {"facts": {"repos": {"/x": {"error": "no such directory: /x"}}}, "volatile": {},
            "error": None, "seconds": 0.0},
    "nvidia": {"facts": {}, "volatile": {}, "error": "timed out after 2s", "seconds": 2}}}


def build(label: str = "good") -> dict:
    return snapshot.build(AGENT_OUTPUT, label=label, host="h", address="", captured_at="t",
                          config={})


def test_build_keeps_volatile_apart_and_digests_facts() -> None:
    document = build()
    assert document["facts"]["system"] == {"hostname": "h"}
    assert document["volatile"]["system"] == {"uptime": 5}
    assert document["digests"]["system"] == snapshot.section_digest({"hostname": "h"})
    assert snapshot.problems(document) == ["nvidia: timed out after 2s",
                                           "git: /x: no such directory: /x"]


def test_save_load_round_trip_with_block_strings(tmp_path: Path) -> None:
    store = Store(tmp_path)
    document = build()
    document["facts"]["git"]["patch"] = "diff --git a/x b/x\n+line one\n+line two\n" * 3
    path = store.save(document, "good")
    assert "|" in path.read_text()
    assert store.load("good") == document
    assert store.load(str(path)) == document
    assert [entry.label for entry in store.entries()] == ["good"]


def test_fleet_labels_nest_one_level(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.save(build("run1/node1"), "run1/node1")
    assert (tmp_path / "run1" / "node1.yaml").exists()
    assert store.exists("run1/node1")


@pytest.mark.parametrize("label", ["../x", "a/../../b", "/abs", "a/b/c", "-x", ".x", "", "a b"])
def test_labels_that_could_escape_are_refused(label: str) -> None:
    with pytest.raises(UsageError):
        validate_label(label)


def test_label_from_odd_host_names() -> None:
    assert label_from_name("root@[::1]:2222") == "root_1_2222"
    assert validate_label(label_from_name("../..")) == "host"


def test_newer_schema_and_garbage_are_clear_errors(tmp_path: Path) -> None:
    (tmp_path / "new.yaml").write_text("schema: 7\nmeta: {}\nfacts: {}\n")
    with pytest.raises(SnapshotError, match="schema 7 is newer than this envsnap"):
        Store(tmp_path).load("new")
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    with pytest.raises(SnapshotError, match="not an envsnap snapshot"):
        Store(tmp_path).load("list")


def test_a_failed_write_leaves_no_partial_file(tmp_path: Path, monkeypatch) -> None:
    store = Store(tmp_path)
    store.save(build(), "good")
    before = (tmp_path / "good.yaml").read_text()

    def explode(_document: dict) -> str:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("envsnap.snapshot.store.dump_yaml", explode)
    with pytest.raises(StoreError, match="No space left"):
        store.save(build(), "good")
    assert (tmp_path / "good.yaml").read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["good.yaml"]


# ---- a store or snapshot that cannot be read: one line, never an internal error ----------------

def test_a_name_too_long_for_the_filesystem_is_one_line(cli: Cli) -> None:
    # Path.is_file() lets ENAMETOOLONG (and EACCES) through, unlike a missing file.
    result = cli("show", "a" * 300)
    assert result.returncode == 2
    assert result.stderr.startswith("envsnap: error: cannot read ")
    assert result.stderr.endswith(": File name too long\n")


def test_a_snapshot_nested_too_deeply_is_invalid(cli: Cli) -> None:
    (cli.cwd / "deep.json").write_text('{"schema": ' + "[" * 3000 + "]" * 3000 + "}")
    result = cli("show", "deep.json")
    assert result.returncode == 4
    assert result.stderr == "envsnap: error: deep.json: corrupt snapshot (nested too deeply)\n"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a folder of mode 000 all the same")
def test_a_store_that_cannot_be_read_is_said_not_taken_for_empty(cli: Cli) -> None:
    store = cli.cwd / "store"
    store.mkdir()
    (store / "a.yaml").write_text("schema: 1\n")
    store.chmod(0)
    try:
        listed, shown = cli("list"), cli("show", "a")
    finally:
        store.chmod(0o700)
    assert (listed.returncode, listed.stderr) == \
        (2, f"envsnap: error: cannot list store {store}: Permission denied\n")
    assert (shown.returncode, shown.stderr) == \
        (2, f"envsnap: error: cannot read {store / 'a.yaml'}: Permission denied\n")
