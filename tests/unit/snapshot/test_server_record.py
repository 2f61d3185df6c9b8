"""The server a `bench --serve` recorded, read from the snapshot (snapshot/document.py:
server_worker, recorded_server_env): the server itself, not its children nor a --proc
worker, and its env as restore and explain both put it back."""
from __future__ import annotations

from typing import Any

from envsnap.snapshot.document import recorded_server_env, server_worker


def with_processes(processes: dict[str, Any]) -> Any:
    return {"schema": 1, "meta": {}, "facts": {"env": {"processes": processes}}}


CHILD = {"role": "server", "matched": "child of 200", "env": {"NCCL_ALGO": "Ring"}}
PROC = {"matched": "sglang", "env": {"NCCL_ALGO": "Tree"}}


def test_the_server_itself_is_found_among_its_children_and_other_workers() -> None:
    server = {"role": "server", "matched": "envsnap --serve",
              "env": {"NCCL_PROTO": "LL", "NCCL_DEBUG": None, "HOME": "/root"}}
    document = with_processes({"100": PROC, "150": CHILD, "200": server})
    assert server_worker(document) == ("200", server)
    assert recorded_server_env(document) == {"NCCL_PROTO": "LL", "HOME": "/root"}


def test_no_server_recorded_or_its_env_unread_is_said_as_none() -> None:
    assert server_worker(with_processes({"100": PROC, "150": CHILD})) is None
    assert recorded_server_env(with_processes({"100": PROC})) == {}
    unread = {"role": "server", "matched": "envsnap --serve",
              "env": {"error": "permission denied"}}
    assert recorded_server_env(with_processes({"200": unread})) == {}
    assert server_worker({"schema": 1, "meta": {}, "facts": {}}) is None
