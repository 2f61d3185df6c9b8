from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import unique_marker

from envsnap.agent import env

TOKEN = "hf_" + "xK3mQ8wR2t" * 3   # a run of one letter is a fill-in, kept
MARKER = unique_marker("test-worker")
DEFAULT = (env.DEFAULT_PREFIXES, env.DEFAULT_NAMES)

LIMITS = """Limit                     Soft Limit           Hard Limit           Units
Max cpu time              unlimited            unlimited            seconds
Max open files            1024                 1048576              files
Max locked memory         8388608              unlimited            bytes
"""


def test_select_env_keeps_prefixes_and_names_and_masks_secrets() -> None:
    environ = {"NCCL_PROTO": "LL", "HF_TOKEN": TOKEN, "PATH": "/usr/bin", "HOME": "/root",
               "NCCLX": "no", "MASTER_ADDR": "10.0.0.1", "HF_HOME": "/data/hf"}
    assert env.select_env(environ, DEFAULT) == {
        "NCCL_PROTO": "LL", "HF_TOKEN": "<secret>", "PATH": "/usr/bin",
        "MASTER_ADDR": "10.0.0.1", "HF_HOME": "/data/hf"}


def test_select_env_masks_secret_values_under_innocent_names() -> None:
    environ = {"HF_ENDPOINT": "https://user:pw@hub.example", "CUDA_X": "ghp_" + "aT5nB2vC9x" * 3}
    selected = env.select_env(environ, DEFAULT)
    assert selected == {"HF_ENDPOINT": "https://user:<secret>@hub.example",
                        "CUDA_X": "<secret>"}


def test_parse_environ_handles_equals_and_undecodable_bytes() -> None:
    raw = b"A=1\0B=x=y\0C=\xff\0NOEQUALS\0\0"
    assert env.parse_environ(raw) == {"A": "1", "B": "x=y", "C": "\\xff"}


def test_parse_cmdline_drops_the_trailing_nul() -> None:
    assert env.parse_cmdline(b"python\0-c\0\0x\0") == ["python", "-c", "", "x"]
    assert env.parse_cmdline(b"") == []


def test_parse_stat_survives_parentheses_in_the_name() -> None:
    fields = " ".join(str(n) for n in range(4, 60))
    text = f"1234 (a) b (c)) S {fields}"
    # after the name: state, ppid (field 4), ... starttime (field 22)
    assert env.parse_stat(text) == (4, 22)


def test_parse_btime() -> None:
    assert env.parse_btime("cpu 1 2 3\nbtime 1700000000\nprocesses 5\n") == 1700000000
    assert env.parse_btime("") is None


def test_parse_limits_keeps_nofile_and_memlock() -> None:
    assert env.parse_limits(LIMITS) == {"nofile": {"soft": 1024, "hard": 1048576},
                                        "memlock": {"soft": 8388608, "hard": "unlimited"}}


def test_patterns_match_as_substring_or_regex() -> None:
    matchers = env.compile_patterns(["[bad", r"launch_server.*--tp \d", "a+b"])
    assert env.matching_pattern(["x", "[bad"], matchers) == "[bad"
    assert env.matching_pattern(["python", "-m", "sglang.launch_server", "--tp", "8"],
                                matchers) == r"launch_server.*--tp \d"
    assert env.matching_pattern(["echo", "a+b"], matchers) == "a+b"  # substring, not regex
    assert env.matching_pattern(["echo", "nothing"], matchers) is None


def test_unreadable_environ_is_recorded_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    def deny(path: str) -> bytes:
        raise PermissionError(13, "Permission denied", path)
    monkeypatch.setattr(env, "read_bytes", deny)
    assert env.read_process_env("/proc/1/environ", DEFAULT) == {"error": "permission denied"}


def test_no_patterns_means_no_process_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NCCL_ALGO", "Ring")
    facts = env.collect({})["facts"]
    assert facts["processes"] == {} and facts["proc_patterns"] == []
    assert facts["shell"]["NCCL_ALGO"] == "Ring"


def test_env_prefixes_replace_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NCCL_ALGO", "Ring")
    monkeypatch.setenv("MYAPP_MODE", "fast")
    facts = env.collect({"env_prefixes": ["MYAPP_"]})["facts"]
    assert facts["shell"]["MYAPP_MODE"] == "fast"
    assert "NCCL_ALGO" not in facts["shell"] and "PATH" in facts["shell"]
    assert facts["env_prefixes"] == ["MYAPP_"]


def start(argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen(argv, env={"NCCL_PROTO": "LL", "HF_TOKEN": TOKEN}, **kwargs)


@pytest.fixture
def worker() -> Iterator[subprocess.Popen[bytes]]:
    proc = start([sys.executable, "-c", "import time; time.sleep(30)", MARKER,
                  "--api-key", "s3cret-value"])
    cmdline = Path(f"/proc/{proc.pid}/cmdline")
    deadline = time.monotonic() + 10
    while MARKER.encode() not in cmdline.read_bytes() and time.monotonic() < deadline:
        time.sleep(0.01)  # once, under load, the collector missed it: wait for its argv
    yield proc
    proc.kill()
    proc.wait()


def test_collect_reads_a_matching_worker(worker: subprocess.Popen[bytes]) -> None:
    result = env.collect({"procs": [MARKER]})
    dumped = json.dumps(result)
    assert TOKEN not in dumped and "s3cret-value" not in dumped
    facts = result["facts"]
    assert facts["proc_patterns"] == [MARKER]
    assert list(facts["processes"]) == [str(worker.pid)]
    info = facts["processes"][str(worker.pid)]
    assert info["env"] == {"NCCL_PROTO": "LL", "HF_TOKEN": "<secret>"}
    assert info["cmdline"][-1] == "<secret>" and MARKER in info["cmdline"]
    assert info["ppid"] == os.getpid()
    assert os.path.realpath(info["exe"]) == os.path.realpath(sys.executable)
    assert abs(info["start_epoch"] - time.time()) < 60
    assert info["matched"] == f"pattern {MARKER}"
    assert set(info["limits"]) == {"nofile", "memlock"}


def test_collect_follows_workers_spawned_by_a_match() -> None:
    # The child says it runs before its pid is passed on: right after exec the kernel shows
    # an empty command line and environment for a moment, a loaded machine makes it longer.
    code = ("import subprocess, sys, time\n"
            "c = subprocess.Popen([sys.executable, '-c', "
            "'import time; print(1, flush=True); time.sleep(30)'], stdout=subprocess.PIPE)\n"
            "c.stdout.readline()\n"
            "print(c.pid, flush=True)\n"
            "time.sleep(30)\n")
    parent = start([sys.executable, "-c", code, MARKER], stdout=subprocess.PIPE)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    try:
        processes = env.collect({"procs": [MARKER]})["facts"]["processes"]
        assert processes[str(child)]["matched"] == f"child of {parent.pid}"
        assert processes[str(child)]["env"]["NCCL_PROTO"] == "LL"  # inherited
    finally:
        os.kill(child, 9)
        parent.kill()
        parent.wait()


def test_agent_and_its_ancestors_are_never_reported() -> None:
    # This test process's own command line holds "pytest"; the agent runs inside it.
    processes = env.collect({"procs": ["pytest", "python"]})["facts"]["processes"]
    assert str(os.getpid()) not in processes and str(os.getppid()) not in processes


def test_process_cap_is_reported(monkeypatch: pytest.MonkeyPatch,
                                 worker: subprocess.Popen[bytes]) -> None:
    monkeypatch.setattr(env, "MAX_PROCESSES", 0)
    facts = env.collect({"procs": [MARKER]})["facts"]
    assert facts["processes"] == {} and facts["processes_omitted"] == 1


@pytest.mark.parametrize(("argv", "envsnap"), [
    (["envsnap", "capture", "--proc", "x"], True),
    (["/v/bin/python3", "/v/bin/envsnap", "diff", "a", "b"], True),
    (["python3.12", "-X", "dev", "-m", "envsnap", "bench"], True),
    (["/usr/bin/python3", "/home/u/.cache/envsnap/agent-0a1b", "e30="], True),
    (["python3", "-c", "import envsnap", "envsnap"], False),
    (["python3", "-m", "sglang.launch_server", "--envsnap"], False),
    (["/usr/bin/python3", "/srv/agent-1/run.py"], False),
    (["sh", "-c", "envsnap capture local"], False),   # a parent that runs it: by ancestry
])
def test_envsnap_commands_are_known_by_their_command_line(argv: list[str],
                                                          envsnap: bool) -> None:
    assert env.is_envsnap_command(argv) is envsnap


def test_the_boot_time_is_the_same_in_every_capture() -> None:
    # A worker's start time is the boot time plus its start in ticks: a boot time that moved
    # between two captures made a worker that ran on look changed (its env section's digest).
    readings = []
    for _ in range(300):
        readings.append(env.boot_epoch())
        time.sleep(0.0005)
    known = [each for each in readings if each is not None]
    assert len(known) == len(readings)
    assert max(known) - min(known) < 0.002
