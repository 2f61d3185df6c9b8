"""`envsnap capture local` starts the agent before it loads what builds and stores the
snapshot (hosts/headstart.py): the process started early is the one whose output is saved,
and one left unused (the label exists) is stopped, not left behind."""
from __future__ import annotations

import io
import subprocess
import sys
import zipfile
from pathlib import Path

import yaml
from conftest import Cli, fresh_agent_cache

from envsnap.errors import ExitCode
from envsnap.hosts import payload


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
    assert agent.stdout is not None and agent.stdout.closed   # its pipes read to their end


def facts_of(store: Path, label: str) -> dict[str, object]:
    document = yaml.safe_load((store / f"{label}.yaml").read_text())
    return {"facts": document["facts"], "python": document["meta"]["agent"]["python"]}


def test_capturing_with_this_very_python_forks_it_and_records_what_a_fresh_one_would(
        cli_process: Cli) -> None:
    """The agent of `capture local --python P`, P the interpreter running envsnap, is a fork
    of envsnap (no second interpreter start, nothing cached in ~/.cache); what it records is
    what the same python started fresh records (the controller started with an option a
    fresh one lacks, -W here, spawns the agent as ever)."""
    store, cache = Path(cli_process.env["ENVSNAP_STORE"]), Path(cli_process.env["HOME"])
    fresh_agent_cache(cache)
    forked = cli_process("capture", "local", "--label", "forked", "--python", sys.executable)
    assert forked.returncode == 0, forked.stderr
    assert not list(cache.rglob("agent-*")), "a forked agent needs no cached copy"
    fresh = subprocess.run([sys.executable, "-W", "default", "-m", "envsnap", "capture",
                            "local", "--label", "fresh", "--python", sys.executable],
                           cwd=cli_process.cwd, env=cli_process.env, capture_output=True,
                           text=True, timeout=120)
    assert fresh.returncode == 0, fresh.stderr
    assert list(cache.rglob("agent-*")), "a spawned agent is shipped into the cache first"
    assert facts_of(store, "forked") == facts_of(store, "fresh")


def capture_watching_the_fork(cli: Cli, label: str, at_fork: str = "",
                              at_end: str = "") -> subprocess.CompletedProcess[str]:
    """`capture local --label LABEL --python <this python>` in a process of its own, with
    headstart.fork_agent watched: `at_fork` runs as each fork starts, `at_end` once main has
    returned (Python lines; `forks`, the agents forked so far, and `sys` in scope)."""
    probe = "\n".join([
        "import sys", "from envsnap.hosts import headstart", "forks = []",
        "real = headstart.fork_agent", "def watched(config):",
        *(f"    {line}" for line in at_fork.splitlines()),
        "    forks.append(real(config))", "    return forks[-1]",
        "headstart.fork_agent = watched", "from envsnap.cli.main import main",
        "code = main(sys.argv[1:])", *at_end.splitlines(), "sys.exit(code)", ""])
    return subprocess.run([sys.executable, "-c", probe, "capture", "local", "--label", label,
                           "--python", sys.executable], cwd=cli.cwd, env=cli.env,
                          capture_output=True, text=True, timeout=120)


def test_a_forked_agent_left_unused_is_stopped(cli_process: Cli) -> None:
    store = Path(cli_process.env["ENVSNAP_STORE"])
    store.mkdir(parents=True, exist_ok=True)
    (store / "taken.yaml").write_text("a snapshot saved before\n")
    result = capture_watching_the_fork(cli_process, "taken", at_end=REAPED)
    assert result.returncode == ExitCode.USAGE and "already exists" in result.stderr
    assert result.stdout == "forked: 1 reaped: [True] pipes closed: [True]\n"


# what capture_watching_the_fork prints at the end of the forked agents
REAPED = ("print('forked:', len(forks), 'reaped:', [agent.returncode is not None "
          "for agent in forks], 'pipes closed:', [agent.stdout.closed and agent.stderr.closed "
          "for agent in forks])")


def test_a_fork_made_before_the_capture_fails_to_start_is_stopped(cli_process: Cli) -> None:
    """The agent is forked first; if what follows before it is handed over fails (here the
    agent's files cannot be read), the fork is killed and reaped, not left running."""
    result = capture_watching_the_fork(cli_process, "unread", at_fork=(
        "import envsnap.hosts.payload as payload\n"
        "def unreadable():\n"
        "    raise PermissionError('agent files unreadable')\n"
        "payload.agent_digest = unreadable"), at_end=REAPED)
    assert result.returncode != 0 and "agent files unreadable" in result.stderr
    assert result.stdout == "forked: 1 reaped: [True] pipes closed: [True]\n"


def test_the_agent_is_forked_before_the_capture_loads_what_it_alone_needs(
        cli_process: Cli) -> None:
    """Everything loaded before the fork delays the agent one for one; building, signing and
    storing the snapshot can load while it runs."""
    heavy = ("dataclasses", "inspect", "socket", "yaml", "envsnap.hosts.payload",
             "envsnap.hosts.capture", "envsnap.snapshot.store")
    result = capture_watching_the_fork(cli_process, "early", at_fork=(
        f"print('at fork:', sorted(m for m in {heavy!r} if m in sys.modules))"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "at fork: []", result.stdout
