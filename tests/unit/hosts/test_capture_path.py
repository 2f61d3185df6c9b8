"""One path from the agent's output to a stored snapshot, whoever ran the agent: over a
transport (`envsnap capture`, `envsnap bench`) or through the Ansible module (the action
plugin's controller). Bad output is one error on both, and both build the same document."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from envsnap.ansible.controller import AgentRun, HostSeen, document_from
from envsnap.errors import EXIT_HOST, HostError
from envsnap.hosts import capture
from envsnap.hosts.capture import CaptureOptions, agent_config, recorded_config, save_snapshot
from envsnap.hosts.inventory import Host
from envsnap.hosts.transport import Follow, Result
from envsnap.snapshot.store import Store

HOST = Host("gpu-box", address="10.0.0.7")
SEEN = HostSeen(name="gpu-box", address="10.0.0.7", interpreter=None)
OUTPUT = json.dumps({"collectors": {
    "system": {"facts": {"hostname": "gpu-box"}, "seconds": 0.1, "error": None},
    "nvidia": {"facts": {}, "seconds": 20.0, "error": "timed out after 20s"}}})


class Printing:
    """A host whose agent prints `stdout`, whatever it is asked."""

    def __init__(self, stdout: str) -> None:
        self.stdout = stdout

    def run(self, command: str, timeout: float, follow: Follow | None = None) -> Result:
        return Result(0, self.stdout, "")

    def put(self, data: bytes, path: str) -> None:
        raise AssertionError("the agent is cached: nothing is uploaded")

    def close(self) -> None:
        pass

    def __enter__(self) -> Printing:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def over_ssh(stdout: str) -> dict[str, Any]:
    return capture.snapshot_document(Printing(stdout), HOST, "today", CaptureOptions())


def through_ansible(stdout: str, captured_at: str = "2026-01-01T00:00:00+00:00") -> dict[str, Any]:
    config = agent_config(HOST, CaptureOptions())
    agent = AgentRun(config=config, python=None, recorded=recorded_config(HOST, config))
    return document_from(stdout, SEEN, "today", captured_at, agent)


@pytest.mark.parametrize("read", [over_ssh, through_ansible], ids=["transport", "ansible"])
def test_output_that_is_not_json_is_a_host_error_on_every_path(read: Any) -> None:
    with pytest.raises(HostError) as caught:
        read("Traceback (most recent call last): ...")
    assert str(caught.value) == ("gpu-box: the agent's output is not JSON: "
                                 "'Traceback (most recent call last): ...'")
    assert caught.value.exit_code == EXIT_HOST


def test_both_paths_build_the_same_document_from_the_same_output() -> None:
    by_ssh = over_ssh(OUTPUT)
    by_ansible = through_ansible(OUTPUT, by_ssh["meta"]["captured_at"])
    assert by_ansible == by_ssh
    assert by_ssh["meta"]["label"] == "today"
    assert by_ssh["facts"]["system"] == {"hostname": "gpu-box"}


def test_a_saved_capture_is_in_the_store_with_its_problems(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    saved = save_snapshot(store, over_ssh(OUTPUT), "today", replace=False)
    assert saved.path == store.path_for("today") and saved.path.is_file()
    assert store.load("today") == saved.document
    assert saved.problems == ["nvidia: timed out after 20s"]
