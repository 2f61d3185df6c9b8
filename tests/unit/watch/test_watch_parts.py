"""The watcher's parts: periods, the new-process finder (on a /proc of files and on the real
one), the loop with captures that fail, the status file, and the unit and cron text."""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import unique_marker

from envsnap.errors import HostError, UsageError
from envsnap.hosts.inventory import Host
from envsnap.watch.install import (
    Service,
    cron_lines,
    is_ours,
    systemd_word,
    unit_text,
    without_ours,
)
from envsnap.watch.period import parse_period, period_text
from envsnap.watch.procstarts import ProcessStarts
from envsnap.watch.run import Watcher, WatchPlan
from envsnap.watch.status import (
    WatcherLock,
    WatchStatus,
    read_statuses,
    status_path,
    write_status,
)


@pytest.mark.parametrize("text, seconds", [("30s", 30), ("10m", 600), ("2h", 7200),
                                           ("1d", 86400), ("45", 45), ("1.5m", 90)])
def test_periods_read_and_said_back(text: str, seconds: float) -> None:
    assert parse_period(text) == seconds
    assert parse_period(period_text(seconds)) == seconds


@pytest.mark.parametrize("text", ["0", "0m", "10x", "-1m", "m", "", "1e9999"])
def test_bad_periods_are_refused(text: str) -> None:
    with pytest.raises(UsageError):
        parse_period(text)


# ---- new processes ----------------------------------------------------------------------------

def fake_proc(root: Path, last_pid: int, processes: dict[int, tuple[int, str]]) -> None:
    """A /proc of files: loadavg with its last pid, and pid -> (parent, command line)."""
    root.mkdir(exist_ok=True)
    (root / "loadavg").write_text(f"0.00 0.01 0.05 1/90 {last_pid}\n")
    for pid, (parent, command) in processes.items():
        folder = root / str(pid)
        folder.mkdir(exist_ok=True)
        (folder / "cmdline").write_bytes(b"".join(word.encode() + b"\0"
                                                  for word in command.split()))
        (folder / "stat").write_text(f"{pid} (x) S {parent} 1 1 0 -1 0 0 0 0 0 0 0 0 0 0 20 0 "
                                     "1 0 4242 0 0\n")


def test_proc_is_listed_only_when_the_last_pid_moved(tmp_path: Path) -> None:
    root = tmp_path / "proc"
    fake_proc(root, 100, {1: (0, "init"), 50: (1, "python serve.py --model a")})
    starts = ProcessStarts(["serve.py"], own_pid=7, root=str(root))
    fake_proc(root, 100, {120: (1, "python serve.py --model b")})
    assert starts.poll() == []   # the last pid did not move: /proc is not even listed
    fake_proc(root, 121, {121: (1, "python other.py")})
    found = starts.poll()
    assert [(s.pid, s.argv, s.pattern) for s in found] == \
        [(120, ("python", "serve.py", "--model", "b"), "serve.py")]
    assert starts.poll() == []


def test_envsnap_and_its_own_children_are_never_workers(tmp_path: Path) -> None:
    root = tmp_path / "proc"
    fake_proc(root, 10, {1: (0, "init"), 7: (1, "envsnap watch local --proc serve.py")})
    starts = ProcessStarts(["serve.py"], own_pid=7, root=str(root))
    fake_proc(root, 30, {20: (7, "sh -c python -m pip list # serve.py"),
                         21: (20, "python serve.py"),
                         22: (1, "/usr/bin/envsnap capture local --proc serve.py"),
                         23: (1, "python serve.py --port 1")})
    assert [started.pid for started in starts.poll()] == [23]


def test_a_real_process_is_found_at_its_start(tmp_path: Path) -> None:
    marker = unique_marker("procstart")
    starts = ProcessStarts([marker])
    shell = subprocess.run(["sh", "-c", f'"$0" -c "import time; time.sleep(30)" {marker} '
                            '>/dev/null 2>&1 & echo $!', sys.executable],
                           capture_output=True, text=True, check=True)
    pid = int(shell.stdout)
    own = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", marker])
    try:
        deadline, found = time.monotonic() + 10, []
        while not found and time.monotonic() < deadline:
            found = starts.poll()
            time.sleep(0.05)
        assert [started.pid for started in found] == [pid]   # not the child of this process
    finally:
        os.kill(pid, 9)
        own.kill()
        own.wait()


# ---- the loop ---------------------------------------------------------------------------------

def test_a_failed_capture_is_counted_and_the_watch_goes_on(tmp_path: Path) -> None:
    host = Host("gpu9", address="gpu9.example")
    tries: list[str] = []
    kept: list[tuple[object, str]] = []
    statuses: list[WatchStatus] = []

    def capture(host: Host) -> dict:
        tries.append(host.name)
        if len(tries) == 2:
            raise HostError("gpu9: unreachable")
        if len(tries) == 3:
            raise RuntimeError("a surprise")
        return {"n": len(tries)}

    plan = WatchPlan(hosts=(host,), every=0.2, duration=1.1)
    watcher = Watcher(plan, capture, lambda document, reason: kept.append((document, reason)),
                      statuses.append)
    runs = watcher.run()
    assert len(runs) >= 5 and [run.ok for run in runs[:3]] == [True, False, False]
    assert runs[1].error == "gpu9: unreachable"
    assert runs[2].error == "gpu9: RuntimeError: a surprise"
    assert [reason for _, reason in kept][:2] == ["watch started", "every 0.2s"]
    last = statuses[-1]
    assert last.running is False and last.failures == 2 and last.captures == len(runs)
    assert last.last_failure == runs[2]
    write_status(tmp_path, last)
    assert read_statuses(tmp_path) == [last]


def test_once_is_one_round(tmp_path: Path) -> None:
    hosts = (Host("a", address="a"), Host("b", address="b"))
    kept: list[str] = []
    runs = Watcher(WatchPlan(hosts=hosts, every=3600, once=True), lambda host: {},
                   lambda document, reason: kept.append(reason), lambda status: None).run()
    assert [run.host for run in runs] == ["a", "b"] and kept == ["watch started"] * 2


def test_a_status_file_that_is_not_one_is_said(tmp_path: Path) -> None:
    path = status_path(tmp_path, "local")
    path.parent.mkdir()
    path.write_text('{"name": "local"}')
    (problem,) = read_statuses(tmp_path)
    assert "not a watcher's status file" in str(problem)


def test_the_lock_keeps_one_watcher(tmp_path: Path) -> None:
    lock = WatcherLock(tmp_path, "local")
    with pytest.raises(UsageError, match=f"pid {os.getpid()}"):
        WatcherLock(tmp_path, "local")
    lock.release()
    WatcherLock(tmp_path, "local").release()


# ---- what --install writes --------------------------------------------------------------------

SERVICE = Service(name="local", argv=("/opt/env/bin/envsnap", "watch", "local", "--proc",
                                      "serve 50%", "--repo", "/home/u/it's here"),
                  workdir="/home/u/my work", environment=(("PATH", "/opt/env/bin:/usr/bin"),),
                  lock="/s/watch/local.cron.lock", log="/s/watch/local.log")


def test_a_unit_says_each_word_as_systemd_reads_it() -> None:
    text = unit_text(SERVICE)
    assert text.startswith("# envsnap-watch:local ")
    assert "Type=simple\n" in text and "WantedBy=default.target\n" in text
    assert ('ExecStart=/opt/env/bin/envsnap watch local --proc "serve 50%%" --repo '
            '"/home/u/it\'s here"\n') in text
    assert 'WorkingDirectory="/home/u/my work"\n' in text
    assert systemd_word('a"b\\c$HOME') == '"a\\"b\\\\c$$HOME"'


def test_cron_lines_run_the_same_words_and_are_found_again() -> None:
    lines = cron_lines(SERVICE, guarded=True).splitlines()
    assert [line.split(" ")[0] for line in lines] == ["#", "@reboot", "*/10"]
    command = lines[1][len("@reboot "):].replace("\\%", "%")
    words = shlex.split(command, comments=True)
    assert words[:3] == ["cd", "/home/u/my work", "&&"]
    assert words[3:7] == ["PATH=/opt/env/bin:/usr/bin", "flock", "-n", SERVICE.lock]
    assert words[7:14] == list(SERVICE.argv)
    assert "\\%" in lines[1] and "%" not in lines[1].replace("\\%", "")
    assert len(cron_lines(SERVICE, guarded=False).splitlines()) == 2
    users = "MAILTO=me\n# envsnap-watch: a note of the user's own\n@daily backup\n"
    table = users + cron_lines(SERVICE, guarded=True)
    kept, ours = without_ours(table, "local")
    assert kept == users and len(ours.splitlines()) == 3
    assert without_ours(table, "gpu1") == (table, "")
    assert not is_ours("# envsnap-watch:local", None)
