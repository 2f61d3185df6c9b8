"""`envsnap timeline` reads the watched history: a real worker with NCCL_PROTO=LL captured
and recorded, restarted without it and recorded again, and the timeline names the restart
with the lost value and the command that starts it with it again; with no history, its
header says so once, with the `envsnap watch` that would have kept one."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from conftest import Cli, unique_marker

from envsnap.history.store import History
from envsnap.snapshot.store import Store


def worker(marker: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", marker],
                            env={"PATH": "/usr/bin:/bin", **env})


def record(cli: Cli, tmp_path: Path, marker: str, label: str, reason: str) -> None:
    """A real capture of the workers, kept only in the history (as `envsnap watch` keeps
    one): captured into a scratch store, recorded into the store's history."""
    scratch = tmp_path / "scratch"
    done = cli("capture", "local", "--proc", marker, "--label", label, "--store", str(scratch))
    assert done.returncode == 0, done.stderr
    History.of_store(Store(tmp_path / "store")).record(Store(scratch).load(label), reason=reason)


def test_a_restarted_worker_names_the_env_it_lost(cli: Cli, tmp_path: Path) -> None:
    marker = unique_marker("timeline-watched")
    first = worker(marker, {"NCCL_PROTO": "LL", "NCCL_DEBUG": "WARN"})
    second = None
    try:
        time.sleep(0.3)
        record(cli, tmp_path, marker, "before", "every 10m")
        first.kill()
        first.wait()
        second = worker(marker, {"NCCL_DEBUG": "WARN"})
        time.sleep(1.1)   # a record's time keeps whole seconds
        record(cli, tmp_path, marker, "after", f"process {second.pid} started")
        shown = cli("timeline", "local", "--proc", marker, "--since", "10m")
        assert shown.returncode == 0, shown.stderr
        text = " ".join(shown.stdout.split())
        assert "watched history: 2 records in the window" in text
        assert f"worker {sys.executable} -c" in text
        assert "NCCL_PROTO: LL -> (absent) (between" in text
        assert f"replaces pid {first.pid}" in text
        assert f"process {second.pid} started" in text      # the record's reason
        assert "env NCCL_PROTO=LL" in text                   # the env to put back
        events = json.loads(cli("timeline", "local", "--proc", marker, "--since", "10m",
                                "--json").stdout)
        [restart] = [event for event in events["events"] if event["kind"] == "process-start"]
        assert restart["subject"] == str(second.pid) and "restarted at" in restart["what"]
        assert ["NCCL_DEBUG", "WARN"] in restart["env"]
        assert events["watched"].startswith("watched history: 2 records")
    finally:
        for each in (first, second):
            if each is not None:
                each.kill()
                each.wait()


def test_without_a_history_the_header_says_so_with_the_watch_to_run(cli: Cli) -> None:
    marker = unique_marker("timeline-unwatched")
    with_worker = worker(marker, {"NCCL_PROTO": "LL"})
    try:
        shown = cli("timeline", "local", "--proc", marker, "--since", "10m")
        assert shown.returncode == 0, shown.stderr
        text = " ".join(shown.stdout.split())
        assert text.count("watched history: none of this host") == 1
        assert f"`envsnap watch local --proc {marker}` keeps one" in text
        assert f"process {with_worker.pid} started:" in text and "restarted at" not in text
    finally:
        with_worker.kill()
        with_worker.wait()
