"""The reaper of the next benchmark (agent/reaper.py, agent/owners.py) stops only what an
agent of this host, this PID namespace and this uid started and left behind when it was
killed with -9: a benchmark in a PID namespace of its own (as in a container), a marked
process of another uid, a process given a copy of the mark by a parent of its own (as Slurm
copies the environment into a job) and a process with a mark of the old kind all survive a
host-side `envsnap bench local`, while the orphan of the killed agent is stopped; and the
agent's own stop of its run (envsnap killed, its agent alive) spares the copy too."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Cli
from helpers.procwatch import processes_with, soon

METRIC = r"throughput: ([0-9.]+) req/s"
NOBODY = 65534
SLEEP = "import time; time.sleep(600)"


@pytest.fixture
def marker() -> Iterator[str]:
    tag = f"envsnap-reap-{uuid.uuid4().hex[:8]}"
    yield tag
    for pid in processes_with(tag, os.getpid()):   # what the test left, ended here
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def running(name: str, argv: list[str] | None = None) -> bool:
    """A process runs `argv` (by default: the sleeper named `name`), exactly: the commands
    that started it name it in their own arguments too."""
    wanted = [sys.executable, "-c", SLEEP, name] if argv is None else argv
    for pid in processes_with(name, os.getpid()):
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1] == \
                    [arg.encode() for arg in wanted]:
                return True
        except OSError:
            continue   # ended while we looked
    return False


def next_benchmark(cli: Cli) -> None:
    """A host-side benchmark: its agent reaps orphans before its runs."""
    result = cli("bench", "local", "--cmd", "echo 'throughput: 1 req/s'", "--metric", METRIC,
                 "--repeat", "1", "--sample-interval", "0", "--label", "next")
    assert result.returncode == 0, result.stdout + result.stderr


def started_run(cli: Cli, host: str, marker: str, tmp_path: Path
                ) -> tuple[subprocess.Popen[bytes], str]:
    """envsnap (in a session of its own) running a benchmark on `host` whose run writes down
    its mark and leaves a child in a session of its own (named `marker`-orphan), once that
    child runs; and the mark."""
    written = tmp_path / "mark"
    run = (f'printf %s "$ENVSNAP_OWNER" > {written}; '
           f"setsid {sys.executable} -c '{SLEEP}' {marker}-orphan & sleep 600")
    controller = subprocess.Popen(
        [sys.executable, "-m", "envsnap", "bench", host, "--cmd", run, "--metric", METRIC,
         "--repeat", "1", "--sample-interval", "0"], cwd=cli.cwd, env=cli.env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        assert soon(lambda: running(f"{marker}-orphan") and written.exists()
                    and written.stat().st_size > 0, 60), "the run never started"
    except BaseException:
        controller.kill()
        controller.wait()
        raise
    return controller, written.read_text()


def killed_agent(cli: Cli, marker: str, tmp_path: Path) -> str:
    """Kill envsnap and its agent with -9 while a run goes on, and return the run's mark:
    its owner is gone, its orphan runs on."""
    controller, mark = started_run(cli, "local", marker, tmp_path)
    try:
        os.killpg(controller.pid, signal.SIGKILL)   # envsnap and its agent, at once
    finally:
        controller.kill()
        controller.wait()
    return mark


def copier(mark: str, marker: str) -> subprocess.Popen[bytes]:
    """A parent of its own (as slurmstepd is to a job step) that starts a process with the
    mark copied into its environment, and waits for it. It carries no mark itself."""
    child = f"{sys.executable} -c '{SLEEP}' {marker}-copy"
    script = ("import os, subprocess, sys; subprocess.run(sys.argv[2], shell=True, "
              "env=dict(os.environ, ENVSNAP_OWNER=sys.argv[1]))")
    return subprocess.Popen([sys.executable, "-c", script, mark, child],
                            start_new_session=True)


def test_a_copy_of_a_mark_survives_and_the_orphan_is_reaped(
        cli: Cli, marker: str, tmp_path: Path) -> None:
    mark = killed_agent(cli, marker, tmp_path)
    launcher = copier(mark, marker)
    try:
        assert soon(lambda: running(f"{marker}-copy"), 30), "the copy never started"
        next_benchmark(cli)
        assert soon(lambda: not running(f"{marker}-orphan"), 5), "the orphan was not reaped"
        assert running(f"{marker}-copy"), "a process given a copy of the mark was stopped"
        assert launcher.poll() is None
        # the killed agent's record went with its orphan, the next agent's with its run
        assert not list((Path(cli.env["HOME"]) / ".cache/envsnap/owners").iterdir())
    finally:
        launcher.kill()
        launcher.wait()


@pytest.mark.parametrize("over_ssh", [False, True], ids=["local", "ssh"])
def test_a_copy_of_a_mark_survives_the_agents_own_stop(
        request: pytest.FixtureRequest, over_ssh: bool, marker: str, tmp_path: Path) -> None:
    """envsnap killed with -9, its agent lives on and stops what its run started (its
    lifeline ended): not the process a parent of its own gave the run's mark."""
    cli: Cli = request.getfixturevalue("ssh_cli" if over_ssh else "cli")
    host = request.getfixturevalue("sshd").addresses[0] if over_ssh else "local"
    controller, mark = started_run(cli, host, marker, tmp_path)
    launcher = copier(mark, marker)
    try:
        assert soon(lambda: running(f"{marker}-copy"), 30), "the copy never started"
        controller.kill()                            # envsnap alone: its agent stops the run
        controller.wait(timeout=30)
        assert soon(lambda: not running(f"{marker}-orphan"), 30), "the run's child was left"
        assert running(f"{marker}-copy"), "the agent stopped a process given a copy of its mark"
    finally:
        controller.kill()
        controller.wait()
        launcher.kill()
        launcher.wait()


def test_a_mark_of_the_old_kind_is_never_acted_on(cli: Cli, marker: str) -> None:
    """<pid>:<start time>:<role>, its owner long gone: no record, so not ours."""
    old = subprocess.Popen([sys.executable, "-c", SLEEP, f"{marker}-old"],
                           env=dict(os.environ, ENVSNAP_OWNER="999999999:1:run"),
                           start_new_session=True)
    try:
        next_benchmark(cli)
        assert old.poll() is None, "a process with a mark of the old kind was stopped"
    finally:
        old.kill()
        old.wait()


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can start a process of another uid,"
                    " and only root's reaper could stop one")
@pytest.mark.skipif(shutil.which("setpriv") is None, reason="no setpriv to change uid")
def test_a_marked_process_of_another_uid_survives_roots_benchmark(
        cli: Cli, marker: str, tmp_path: Path) -> None:
    mark = killed_agent(cli, marker, tmp_path)
    # the killed agent's own mark, on a process of uid nobody whose parent (this test) is
    # one of the killed agent's ancestors: only the uid tells it apart
    name = f"{marker}-nobody"
    nobody_argv = ["sh", "-c", f"sleep 600; : {name}"]
    other = subprocess.Popen(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
         "env", f"ENVSNAP_OWNER={mark}", *nobody_argv], cwd="/", start_new_session=True)
    try:
        assert soon(lambda: running(name, nobody_argv), 30), "the process never started"
        next_benchmark(cli)
        assert soon(lambda: not running(f"{marker}-orphan"), 5), "the orphan was not reaped"
        assert running(name, nobody_argv), "root's benchmark stopped a process of uid nobody"
    finally:
        other.kill()
        other.wait()


def can_unshare() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"],
                           capture_output=True)
    return probe.returncode == 0


@pytest.mark.skipif(not can_unshare(), reason="needs root and a working "
                    "`unshare --pid --fork --mount-proc` for a PID namespace of its own")
def test_a_benchmark_in_another_pid_namespace_survives_a_host_benchmark(
        cli: Cli, marker: str) -> None:
    inner = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-m", "envsnap",
         "bench", "local", "--cmd", f"{sys.executable} -c '{SLEEP}' {marker}-inner",
         "--metric", METRIC, "--repeat", "1", "--sample-interval", "0"],
        cwd=cli.cwd, env=cli.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)
    try:
        assert soon(lambda: running(f"{marker}-inner"), 60), "the inner benchmark never ran"
        next_benchmark(cli)
        assert running(f"{marker}-inner"), "the host's benchmark stopped the namespace's run"
        assert inner.poll() is None
    finally:
        os.killpg(inner.pid, signal.SIGKILL)
        inner.wait()
