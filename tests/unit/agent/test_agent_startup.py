"""The agent's start-up on the host (agent/runner.py): it imports what the capture uses and
nothing more, asks `ldconfig -p` only where the loader's cache names a libnccl, and, run in
threads, lets a hung collector cost the others a moment, not the deadline."""
from __future__ import annotations

import base64
import io
import json
import os
import stat
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from envsnap.agent import cuda_nccl, nvml_reader, runner
from envsnap.hosts import payload

# What a capture of a plain host never needs: forking (pickle), a command (subprocess),
# OpenSSL (hashlib), typing (annotations are text), and what the host name, a folder's
# listing, the config did cost.
NEVER_ON_A_PLAIN_HOST = {"pickle", "subprocess", "hashlib", "_hashlib", "typing", "socket",
                         "glob", "fnmatch", "base64"}


def agent_imports(tmp_path: Path, config: dict[str, Any]) -> set[str]:
    """The modules the shipped agent imports, run as a capture runs it (python FOLDER
    CONFIG, from its unpacked payload), as -X importtime names them, less those the
    interpreter imports for itself (site and its .pth files)."""
    zipped, _ = payload.build_payload()
    folder = tmp_path / "agent"
    zipfile.ZipFile(io.BytesIO(zipped)).extractall(folder)
    encoded = base64.b64encode(json.dumps(config).encode()).decode()
    agent = imports([str(folder), encoded], tmp_path)
    assert all(agent.collectors[name]["error"] is None for name in config["collectors"])
    return agent.modules - imports(["-c", "print('{}')"], tmp_path).modules


class Imports:
    def __init__(self, stdout: str, stderr: str) -> None:
        self.collectors = json.loads(stdout).get("collectors")
        self.modules = {line.rpartition("|")[2].strip() for line in stderr.splitlines()
                        if line.startswith("import time:")}


def imports(args: list[str], home: Path) -> Imports:
    result = subprocess.run([sys.executable, "-X", "importtime"] + args, cwd=home,
                            env=dict(os.environ, HOME=str(home)), capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return Imports(result.stdout, result.stderr)


def test_a_plain_capture_imports_only_what_it_uses(tmp_path: Path) -> None:
    imported = agent_imports(tmp_path, {"collectors": ["system", "env", "git"]})
    assert "envsnap.agent.git" in imported and "json" in imported
    assert imported & NEVER_ON_A_PLAIN_HOST == set()


def test_a_host_without_an_nvidia_driver_never_imports_ctypes(tmp_path: Path) -> None:
    if nvml_reader.load_nvml()[0] is not None:
        pytest.skip("this host has a usable NVML")
    imported = agent_imports(tmp_path, {"collectors": ["nvidia"]})
    assert "_ctypes" in imported   # the loader was asked for libnvidia-ml, as ctypes asks it
    assert "ctypes" not in imported and "pynvml" not in imported


@pytest.fixture
def fake_ldconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An `ldconfig` first on PATH that lists one libnccl and leaves a mark when run."""
    folder = tmp_path / "bin"
    folder.mkdir()
    script = folder / "ldconfig"
    script.write_text(f"#!/bin/sh\ntouch {tmp_path}/ran\n"
                      f"echo '\tlibnccl.so.2 (libc6,x86-64) => {tmp_path}/libnccl.so.2'\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return tmp_path / "ran"


@pytest.mark.parametrize("cache, asked", [(b"glibc-ld.so.cache1.1\0libc.so.6\0", False),
                                          (b"glibc-ld.so.cache1.1\0libnccl.so.2\0", True),
                                          (None, True)])
def test_ldconfig_is_asked_only_where_its_cache_may_name_a_libnccl(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_ldconfig: Path,
        cache: bytes | None, asked: bool) -> None:
    path = tmp_path / "ld.so.cache"   # None: unreadable here, so ldconfig is asked
    if cache is not None:
        path.write_bytes(cache)
    monkeypatch.setattr(cuda_nccl, "LOADER_CACHE", str(path))
    found = cuda_nccl.system_nccl(cuda_nccl.loader_listing(5.0))
    assert fake_ldconfig.exists() is asked
    listed = {how for how in found.values() if how.startswith("ldconfig -p: ")}
    assert listed == ({f"ldconfig -p: {tmp_path}/libnccl.so.2"} if asked else set())


@pytest.fixture
def hung() -> Iterator[threading.Event]:
    release = threading.Event()
    yield release
    release.set()   # the abandoned thread ends with the test


def test_in_threads_a_hung_collector_costs_the_others_a_moment(
        monkeypatch: pytest.MonkeyPatch, hung: threading.Event) -> None:
    monkeypatch.setattr(runner, "can_fork", lambda: False)   # as on a host of < 4 cores
    monkeypatch.setitem(runner.COLLECTORS, "system", lambda: lambda config: hung.wait(60))
    started = time.monotonic()
    results = runner.collect_all({"collectors": ["system", "env", "git"], "timeout": 0.3})
    assert time.monotonic() - started < 5
    assert results["system"]["error"] == "timed out after 0.3s"
    assert results["env"]["error"] is None and results["env"]["facts"]
    assert results["git"]["error"] is None
    assert results["env"]["seconds"] < 0.3   # it did not wait for the hung one's deadline


def test_in_threads_a_collector_named_twice_runs_once_without_waiting(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "can_fork", lambda: False)
    started = time.monotonic()
    results = runner.collect_all({"collectors": ["env", "env"], "timeout": 5.0})
    assert time.monotonic() - started < 2 and results["env"]["error"] is None
