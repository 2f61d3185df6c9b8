"""The agent's collectors, each forked into a process of its own (agent/runner.py): the
facts they record on this machine are the ones the threads recorded, a hung one is killed
at its deadline, and one that crashes its process costs only its own section."""
from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from helpers.secretrepo import SECRET, make_repo

from envsnap.agent import redact, runner, util
from envsnap.agent.sections import SECTIONS
from envsnap.agent.util import escaped_document


@pytest.fixture
def forking(monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine forks the collectors as a host of 4 cores or more does (CI has 2), in a
    test process whose other threads (pytest-xdist's channel) stay out of what the forked
    collectors touch."""
    monkeypatch.setattr(runner, "MIN_CORES_TO_FORK", 1)
    monkeypatch.setattr(util, "lone_thread", lambda: True)
    assert runner.can_fork()


def test_forked_collectors_record_the_facts_the_threads_recorded(tmp_path: Path) -> None:
    make_repo(tmp_path / "repo")
    config = {"repos": [str(tmp_path / "repo")], "procs": [], "timeout": 20.0}
    forked = runner.collect_in_processes(list(SECTIONS), config, time.monotonic() + 20)
    threaded = runner.collect_in_threads(list(SECTIONS), config, time.monotonic() + 20)
    assert set(forked) == set(threaded) == set(SECTIONS)
    for name in SECTIONS:
        assert forked[name]["error"] is None and threaded[name]["error"] is None, name
        assert forked[name]["facts"] == threaded[name]["facts"], name
    assert forked["git"]["facts"]["repos"]   # the repo was read, not skipped
    assert set(forked["system"]) == {"facts", "volatile", "error", "seconds"}


def test_a_hung_collector_is_killed_at_the_deadline_and_the_others_reported(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, forking: None) -> None:
    pid_file = tmp_path / "pid"

    def hangs(config: dict[str, Any]) -> dict[str, Any]:
        pid_file.write_text(str(os.getpid()))
        time.sleep(60)
        return {}

    monkeypatch.setitem(runner.COLLECTORS, "system", lambda: hangs)
    started = time.monotonic()
    results = runner.collect_all({"collectors": ["system", "env"], "timeout": 0.5})
    assert time.monotonic() - started < 5
    assert results["system"]["error"] == "timed out after 0.5s"
    assert results["env"]["error"] is None and results["env"]["facts"]
    hung = int(pid_file.read_text())
    assert hung != os.getpid()
    with pytest.raises(ProcessLookupError):   # killed and reaped, not left running
        os.kill(hung, 0)


def test_a_collector_that_crashes_its_process_costs_only_its_section(
        monkeypatch: pytest.MonkeyPatch, forking: None) -> None:
    def crashes(config: dict[str, Any]) -> dict[str, Any]:
        os.kill(os.getpid(), signal.SIGKILL)   # as the OOM killer, or a library that crashed
        return {}

    monkeypatch.setitem(runner.COLLECTORS, "nvidia", lambda: crashes)
    results = runner.collect_all({"collectors": ["nvidia", "system"]})
    assert results["nvidia"]["error"] == "the collector's process was killed by signal 9"
    assert results["nvidia"]["facts"] == {} and results["system"]["error"] is None


def test_each_result_masked_where_it_ran_is_the_whole_pass_s_result(
        monkeypatch: pytest.MonkeyPatch, forking: None) -> None:
    facts = {"remote": f"https://bob:{SECRET}@example.invalid/x.git", "HF_TOKEN": SECRET,
             "path": "/data/caf\udce9", SECRET: ["a list", ("a", "tuple")]}
    monkeypatch.setitem(runner.COLLECTORS, "env", lambda: lambda config: {"facts": facts})
    monkeypatch.setitem(runner.COLLECTORS, "git", lambda: lambda config: 1 / 0)
    monkeypatch.setattr(redact.Markers, "digests", redact.Markers.digests)  # agent_output sets it
    output = json.loads(runner.agent_output({"collectors": ["env", "git"]}))
    whole = redact.redact_document(escaped_document({"facts": facts}))   # as the agent did
    assert output["collectors"]["env"]["facts"] == json.loads(json.dumps(whole["facts"]))
    assert SECRET not in json.dumps(output)
    assert output["collectors"]["git"]["error"] == "ZeroDivisionError: division by zero"
