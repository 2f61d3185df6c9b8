"""`envsnap capture local` starts the agent before it loads what builds and stores the
snapshot (hosts/headstart.py): the process started early is the one whose output is saved,
and one left unused (the label exists) is stopped, not left behind."""
from __future__ import annotations

import io
import subprocess
import zipfile
from pathlib import Path

import pytest
import yaml
from conftest import Cli

from envsnap.errors import ExitCode
from envsnap.hosts import headstart, payload


@pytest.fixture
def spawned(monkeypatch: pytest.MonkeyPatch) -> list[subprocess.Popen[bytes]]:
    """Every local command's process, as started (the real spawn, watched)."""
    started: list[subprocess.Popen[bytes]] = []
    real = headstart.spawn

    def watched(command: str) -> subprocess.Popen[bytes]:
        started.append(real(command))
        return started[-1]

    monkeypatch.setattr(headstart, "spawn", watched)
    return started


def test_the_agent_started_early_is_the_one_saved(cli: Cli,
                                                  spawned: list[subprocess.Popen[bytes]]) -> None:
    zipped, digest = payload.build_payload()   # cached as a first capture leaves it
    zipfile.ZipFile(io.BytesIO(zipped)).extractall(
        Path(cli.env["HOME"]) / payload.agent_dir(digest))
    result = cli("capture", "local", "--label", "fast")
    assert result.returncode == 0, result.stderr
    document = yaml.safe_load((Path(cli.env["ENVSNAP_STORE"]) / "fast.yaml").read_text())
    [agent] = spawned   # one process: the early one, taken by the capture
    assert document["meta"]["agent"]["pid"] == agent.pid   # sh exec'd the agent's python
    assert agent.returncode == 0


def test_an_agent_started_for_a_capture_refused_is_stopped(
        cli: Cli, spawned: list[subprocess.Popen[bytes]]) -> None:
    store = Path(cli.env["ENVSNAP_STORE"])
    store.mkdir(parents=True, exist_ok=True)
    (store / "taken.yaml").write_text("a snapshot saved before\n")
    result = cli("capture", "local", "--label", "taken")
    assert result.returncode == ExitCode.USAGE and "already exists" in result.stderr
    [agent] = spawned
    assert agent.returncode is not None   # stopped and reaped with the command
    assert headstart.take(str(agent.args[-1])) is None
