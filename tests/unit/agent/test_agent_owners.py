"""Whose a mark is (agent/owners.py): what a mark holds, and the record of it the agent keeps
on the host, which is believed only as a regular file of this uid in a folder of this uid
alone, never through a link."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from envsnap.agent import owners


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def records(home: Path) -> Path:
    return home / ".cache" / "envsnap" / "owners"


def test_a_mark_names_this_boot_namespace_uid_and_agent(home: Path) -> None:
    owner = owners.new_owner("run")
    mark = owner.mark
    assert mark.identity == owners.identity()
    assert (mark.pid, mark.started, mark.role) == (os.getpid(), owners.start_time(os.getpid()),
                                                   "run")
    assert owners.parse(mark.text()) == mark
    assert (os.getpid(), mark.started) in owner.lineage   # the agent itself, and up to pid 1
    assert any(pid == 1 for pid, _ in owner.lineage)
    assert owner.mark != owners.new_owner("run").mark    # a nonce of its own each time


@pytest.mark.parametrize("text", [
    "1234:5678:run",                                    # the old kind: never acted on
    "1234:5678:run:v1:boot:4026531836:0:" + "a" * 32,   # another version
    "1234:5678:run:v2:boot:ns:0:" + "a" * 32,           # a namespace that is no number
    "1234:5678:run:v2:boot:4026531836:0:" + "g" * 32,   # a nonce that is no hex
    "1234:5678:run:v2:boot:4026531836:0:" + "a" * 31,   # too short a nonce
    "1234:5678:run:v2::4026531836:0:" + "a" * 32,       # no boot id
    "",
])
def test_what_is_no_mark_of_these_rules(text: str) -> None:
    assert owners.parse(text) is None


def test_the_record_is_written_read_and_forgotten(home: Path) -> None:
    owner = owners.new_owner("server")
    folder = records(home)
    assert (folder.stat().st_mode & 0o777, (folder / owner.mark.nonce).stat().st_mode & 0o777) \
        == (0o700, 0o600)
    found = owners.recorded(owner.mark.nonce)
    assert found is not None and found.owner == owner
    owners.forget(owner)
    assert owners.recorded(owner.mark.nonce) is None and not list(folder.iterdir())


def test_a_record_through_a_link_or_not_a_file_is_not_believed(home: Path) -> None:
    owner = owners.new_owner("run")
    folder = records(home)
    real = folder / owner.mark.nonce
    moved = home / "elsewhere"
    real.rename(moved)
    (folder / owner.mark.nonce).symlink_to(moved)
    assert owners.recorded(owner.mark.nonce) is None
    (folder / owner.mark.nonce).unlink()
    os.mkfifo(folder / owner.mark.nonce)                # no hang, no record
    assert owners.recorded(owner.mark.nonce) is None


def test_a_record_of_another_mark_is_not_believed(home: Path) -> None:
    owner = owners.new_owner("run")
    other = owners.new_owner("run")
    folder = records(home)
    (folder / other.mark.nonce).replace(folder / owner.mark.nonce)   # names another nonce
    assert owners.recorded(owner.mark.nonce) is None


def test_a_record_is_never_written_through_a_link(home: Path) -> None:
    owners.new_owner("run")                              # makes the folder
    folder = records(home)
    nonce = "b" * 32
    target = home / "target"
    (folder / nonce).symlink_to(target)
    owner = owners.new_owner("run")
    mark = owner.mark._replace(nonce=nonce)
    owners.write_record(owners.Owner(mark, owner.lineage))
    assert not target.exists()


def test_a_folder_open_to_others_holds_no_record(home: Path) -> None:
    owner = owners.new_owner("run")
    records(home).chmod(0o777)
    assert owners.recorded(owner.mark.nonce) is None
    assert owners.all_records() == []
    records(home).chmod(0o700)
    assert [found.owner for found in owners.all_records()] == [owner]
