"""Where the schema lets one field hold two shapes, document.py's accessors say which, so
no reader outside snapshot/ guards a validated document with isinstance: a repo that could
not be read ({"error": why}), a process env the agent could not read, an untracked file's
free-form record, a python without sitecustomize."""
from __future__ import annotations

from typing import Any, cast

from envsnap.snapshot import document as snap
from envsnap.snapshot.records import Process, Repo, Snapshot


def document(facts: dict[str, Any]) -> Snapshot:
    return snap.validate({"schema": 1, "meta": {"label": "x", "host": "h", "captured_at": "t"},
                          "facts": facts}, "test")


def test_only_repos_read_with_a_commit_can_be_checked_out() -> None:
    found = document({"git": {"repos": {"/srv/a": {"head": "a" * 40},
                                        "/srv/gone": {"error": "not a git repository"},
                                        "/srv/empty": {"head": None}}}})
    assert list(snap.repos_with_head(found)) == ["/srv/a"]
    assert snap.unreadable_repos(found) == {"/srv/gone": "not a git repository"}


def test_a_process_env_is_none_where_the_agent_could_not_read_it() -> None:
    assert snap.process_env(cast(Process, {"env": {"error": "permission denied"}})) is None
    assert snap.process_env(cast(Process, {})) is None
    assert snap.process_env(cast(Process, {"env": {"NCCL_PROTO": "LL", "EMPTY": None}})) \
        == {"NCCL_PROTO": "LL", "EMPTY": None}


UNTRACKED = {"notes.txt": {"bytes": 3, "sha256": "d1", "content": "hi\n"},
             "model.bin": {"bytes": 9, "sha256": "d2", "content_skipped": "binary"},
             "link": {"symlink": "notes.txt"},
             "gone": {"error": "No such file or directory"},
             "odd": "kept as recorded"}


def test_untracked_files_written_back_are_those_recorded_with_content() -> None:
    repo = cast(Repo, {"uncommitted": {"untracked": UNTRACKED}})
    assert snap.untracked_contents(repo) == {"notes.txt": "hi\n"}
    assert snap.untracked_contents(cast(Repo, {"uncommitted": None})) == {}


def test_untracked_digests_tell_every_file_apart() -> None:
    repo = cast(Repo, {"uncommitted": {"untracked": UNTRACKED}})
    assert snap.untracked_digests(repo) == {"notes.txt": "d1", "model.bin": "d2", "link": None,
                                            "gone": None, "odd": "kept as recorded"}
    assert snap.untracked_digests(cast(Repo, {})) == {}


def test_sitecustomize_is_none_when_the_python_had_none() -> None:
    assert snap.sitecustomize(document({"python_env": {"customize": {}}})) is None
    site = {"path": "/usr/lib/python3/sitecustomize.py", "content": "import os\n"}
    found = document({"python_env": {"customize": {"sitecustomize": site}}})
    assert snap.sitecustomize(found) == site
    assert snap.sitecustomize(document({})) is None
