"""A server leaves nothing behind, nor does a benchmark run: a child that left the process
group and session (`setsid`) is stopped with them, on the runs' end, on `kill -9` of
envsnap (the agent's own watchdog, locally and over the test sshd), and, when the agent was
killed with -9 too, by the next benchmark envsnap runs on the host (agent/reaper.py)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest
from conftest import Cli
from helpers.procwatch import processes_with, soon

METRIC = r"throughput: ([0-9.]+) req/s"


def sleeper(marker: str) -> str:
    """A process in a session of its own, named by `marker` in its argv."""
    return f"setsid {sys.executable} -c 'import time; time.sleep(600)' {marker} &"


@pytest.fixture
def marker() -> Iterator[str]:
    tag = f"envsnap-left-{uuid.uuid4().hex[:8]}"
    yield tag
    for pid in processes_with(tag, os.getpid()):   # what a failed test left, ended here
        os.kill(pid, signal.SIGKILL)


def bench_args(host: str, marker: str, run_sleeps: bool) -> list[str]:
    server = f"{sleeper(marker + '-server-child')} echo ready; exec sleep 600"
    run = f"{sleeper(marker + '-run-child')} " + (
        "sleep 600" if run_sleeps else "echo 'throughput: 1 req/s'")
    return ["bench", host, "--cmd", run, "--metric", METRIC, "--repeat", "2",
            "--sample-interval", "0", "--serve", server, "--ready", "^ready$"]


def left(marker: str) -> list[int]:
    return processes_with(marker, os.getpid())


def both_children(marker: str, controller: int) -> bool:
    """The server's setsid child and the run's are running (the run has started); the
    controller's own argv names them too."""
    return all(processes_with(f"{marker}-{whose}-child", controller)
               for whose in ("server", "run"))


@pytest.mark.parametrize("over_ssh", [False, True], ids=["local", "ssh"])
def test_children_that_left_the_session_end_with_the_benchmark(
        request: pytest.FixtureRequest, over_ssh: bool, marker: str) -> None:
    cli: Cli = request.getfixturevalue("ssh_cli" if over_ssh else "cli")
    host = request.getfixturevalue("sshd").addresses[0] if over_ssh else "local"
    result = cli(*bench_args(host, marker, run_sleeps=False), "--label", "served")
    assert result.returncode == 0, result.stdout + result.stderr
    assert soon(lambda: not left(marker), 5), "a setsid child outlived the benchmark"


@pytest.mark.parametrize("over_ssh", [False, True], ids=["local", "ssh"])
def test_kill_9_of_envsnap_leaves_nothing_that_left_the_session(
        request: pytest.FixtureRequest, over_ssh: bool, marker: str) -> None:
    cli: Cli = request.getfixturevalue("ssh_cli" if over_ssh else "cli")
    host = request.getfixturevalue("sshd").addresses[0] if over_ssh else "local"
    controller = subprocess.Popen([sys.executable, "-m", "envsnap",
                                   *bench_args(host, marker, run_sleeps=True)],
                                  cwd=cli.cwd, env=cli.env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
    try:
        assert soon(lambda: both_children(marker, controller.pid), 60), \
            "the runs never started"
        controller.kill()
        controller.wait(timeout=30)
        assert soon(lambda: not left(marker), 30), "a setsid child outlived envsnap"
    finally:
        controller.kill()
        controller.wait()


def test_what_an_agent_killed_with_9_left_is_reaped_by_the_next_benchmark(
        cli: Cli, marker: str) -> None:
    controller = subprocess.Popen([sys.executable, "-m", "envsnap",
                                   *bench_args("local", marker, run_sleeps=True)],
                                  cwd=cli.cwd, env=cli.env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        assert soon(lambda: both_children(marker, controller.pid), 60), \
            "the runs never started"
        os.killpg(controller.pid, signal.SIGKILL)   # envsnap and its agent, at once
        controller.wait(timeout=30)
    finally:
        controller.kill()
        controller.wait()
    # the setsid children of the server and of the run live on: no agent is left to stop them
    # (a benchmark another test runs meanwhile on this host may reap them first: as it should)
    result = cli("bench", "local", "--cmd", "echo 'throughput: 1 req/s'", "--metric", METRIC,
                 "--repeat", "1", "--sample-interval", "0", "--label", "next")
    assert result.returncode == 0, result.stdout + result.stderr
    assert soon(lambda: not left(marker), 5), left(marker)
