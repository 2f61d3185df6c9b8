"""Connections as context managers: `with open_transport(host) as transport:` closes the
connection however the block ends, and the playbook engine closes the connections it opened
itself, never one the caller lent it (restore's, which serves the whole restore)."""
from __future__ import annotations

from pathlib import Path

import pytest

from envsnap.agent.benchserve import STOP_GRACE
from envsnap.hosts.inventory import Host, Inventory
from envsnap.hosts.transport import (
    LIFELINE_GRACE_S,
    Follow,
    LocalTransport,
    Result,
    SSHTransport,
)
from envsnap.playbook import run as playbook_run
from envsnap.playbook.load import load
from envsnap.playbook.run import RunOptions, RunResult, run_playbook
from envsnap.snapshot.store import Store


class Counted(LocalTransport):
    """This machine, counting the commands it runs and the times it is closed."""

    def __init__(self, host: Host) -> None:
        super().__init__(host)
        self.commands: list[str] = []
        self.closed = 0

    def run(self, command: str, timeout: float, follow: Follow | None = None) -> Result:
        self.commands.append(command)
        return super().run(command, timeout, follow)

    def close(self) -> None:
        self.closed += 1


class Closable:
    def __init__(self, name: str, closed: list[str]) -> None:
        self.name, self.closed = name, closed

    def close(self) -> None:
        self.closed.append(self.name)


def test_leaving_the_block_closes_the_connection_however_it_ends() -> None:
    transport = Counted(Host("local"))
    with pytest.raises(RuntimeError, match="the block failed"), transport as entered:
        assert entered is transport
        raise RuntimeError("the block failed")
    assert transport.closed == 1


def test_an_ssh_connection_closes_with_the_bastions_it_went_through() -> None:
    transport = SSHTransport(Host("gpu-box", address="127.0.0.1", port=9))   # never dialled
    closed: list[str] = []
    transport.connection = Closable("gpu-box", closed)  # type: ignore[assignment]
    transport.bastions = [Closable("first hop", closed), Closable("second hop", closed)]  # type: ignore[list-item]
    with transport:
        pass
    assert closed == ["gpu-box", "second hop", "first hop"]


PLAYBOOK = """- hosts: all
  tasks:
    - shell: echo first-task
    - shell: echo second-task; exit 3
"""


def played(tmp_path: Path, options: RunOptions) -> RunResult:
    path = tmp_path / "play.yml"
    path.write_text(PLAYBOOK)
    return run_playbook(load(path), Inventory(None), Store(tmp_path / "store"), options)


def test_a_lent_connection_serves_every_task_and_is_left_open(tmp_path: Path) -> None:
    lent = Counted(Host("local"))
    result = played(tmp_path, RunOptions(limit=("local",), connection=lent))
    assert [r.msg for r in result.results][1:] == ["exit 3: second-task"]
    assert sum("first-task" in c for c in lent.commands) == 1
    assert sum("second-task" in c for c in lent.commands) == 1
    assert lent.closed == 0


def test_a_connection_the_run_opens_is_closed_when_it_ends(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[Counted] = []

    def open_counted(host: Host, *_: object) -> Counted:
        opened.append(Counted(host))
        return opened[-1]

    monkeypatch.setattr(playbook_run, "open_transport", open_counted)
    result = played(tmp_path, RunOptions(limit=("local",)))
    assert result.outcome == "failed"
    assert len(opened) == 1 and opened[0].closed == 1
    assert sum("second-task" in c for c in opened[0].commands) == 1


def test_a_cut_lifeline_gives_the_agent_time_to_stop_its_server() -> None:
    """The controller waits for an agent whose lifeline it cut longer than the agent's own
    grace for a server (SIGTERM, then SIGKILL, then the marked ones): killed sooner, the agent
    would leave the server running."""
    assert LIFELINE_GRACE_S > STOP_GRACE + 2.0
