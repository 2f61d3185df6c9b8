"""`envsnap watch` through the real CLI, against real processes: a worker restarted with a
changed env leaves both envs in the history; SIGTERM and Ctrl-C end the watcher; a failed
capture is retried, never fatal; --status; --install and --uninstall through a crontab and
through systemctl --user (stand-ins for both; the unit checked by systemd's own parser)."""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import Cli, CliProcess, unique_marker
from helpers.schedulers import write_fake_crontab, write_fake_systemctl

from envsnap.history.store import History
from envsnap.watch.install import user_systemd_runs

WORKER_CODE = "import time; time.sleep(120)"


def orphan_worker(marker: str, env: dict[str, str]) -> int:
    """A worker this test starts that is no child of it (nor of an in-process watcher): a
    launcher's worker, handed to init once its shell exits. Its pid."""
    shell = subprocess.run(
        ["sh", "-c", f'"$0" -c "{WORKER_CODE}" {marker} >/dev/null 2>&1 & echo $!',
         sys.executable], env={"PATH": "/usr/bin:/bin", **env}, capture_output=True,
        text=True, check=True)
    return int(shell.stdout.strip())


def gone(pid: int, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not Path(f"/proc/{pid}").exists():
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def workers() -> Iterator[list[int]]:
    """The orphan workers a test started, killed at its end."""
    started: list[int] = []
    yield started
    for pid in started:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def store_of(cli: Cli) -> Path:
    return Path(cli.env["ENVSNAP_STORE"])


def status_of(cli: Cli, name: str = "local") -> dict:
    path = store_of(cli) / "watch" / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else {}


def wait_for(condition: Callable[[], bool], within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, "waited too long"
        time.sleep(0.1)


def worker_envs(cli: Cli) -> list[tuple[str, dict[str, dict]]]:
    """(reason, {pid: env}) of each record in the history, oldest first."""
    history = History(store_of(cli) / "history")
    records = []
    for manifest in history.manifests():
        processes = history.load(manifest)["facts"]["env"]["processes"]
        records.append((manifest.reason, {pid: facts["env"] for pid, facts in
                                          processes.items()}))
    return records


def test_a_restarted_worker_leaves_its_old_and_new_env(cli: Cli, workers: list[int]) -> None:
    marker = unique_marker("watch-worker")
    old = orphan_worker(marker, {"NCCL_PROTO": "LL"})
    workers.append(old)
    new: list[int] = []

    def restart() -> None:   # as a person would: once the watcher has its first record
        wait_for(lambda: status_of(cli).get("captures", 0) >= 1)
        os.kill(old, signal.SIGKILL)
        assert gone(old)
        new.append(orphan_worker(marker, {}))
        workers.append(new[0])

    restarter = threading.Thread(target=restart)
    restarter.start()
    result = cli("watch", "local", "--proc", marker, "--every", "1h", "--for", "8s")
    restarter.join()
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"watching local: a capture every 1h, and at each start "
                                    f"of {marker};")
    records = worker_envs(cli)
    assert [reason for reason, _ in records] == ["watch started", f"process {new[0]} started"]
    assert list(records[0][1]) == [str(old)] and records[0][1][str(old)]["NCCL_PROTO"] == "LL"
    assert str(new[0]) in records[1][1] and "NCCL_PROTO" not in records[1][1][str(new[0])]
    assert f"recorded (process {new[0]} started" in result.stdout
    status = status_of(cli)
    assert status["running"] is False and status["captures"] == 2 and status["failures"] == 0


def test_once_captures_each_host_once(cli: Cli) -> None:
    result = cli("watch", "local", "--once")
    assert result.returncode == 0, result.stderr
    assert [reason for reason, _ in worker_envs(cli)] == ["watch started"]
    assert "watching" not in result.stdout and "recorded (watch started" in result.stdout


def test_once_with_a_reason_records_it_beside_a_running_watcher(
        cli: Cli, cli_process: CliProcess) -> None:
    """A Slurm prolog's one-off capture: its record gives the job, and the watcher that runs
    meanwhile keeps its status (it was replaced by the one-off's, which had ended)."""
    watcher = subprocess.Popen([sys.executable, "-m", "envsnap", "watch", "local", "--every",
                                "1h"], cwd=cli_process.cwd, env=cli_process.env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: status_of(cli_process).get("captures", 0) >= 1)
        result = cli_process("watch", "local", "--once", "--reason", " slurm job 77 start ")
        assert result.returncode == 0, result.stderr
        assert "recorded (slurm job 77 start," in result.stdout
        assert [reason for reason, _ in worker_envs(cli)] == ["watch started",
                                                              "slurm job 77 start"]
        status = status_of(cli_process)
        assert (status["pid"], status["running"], status["captures"]) == (watcher.pid, True, 1)
    finally:
        watcher.terminate()
        watcher.wait(timeout=60)
    alone = cli("watch", "local", "--once", "--reason", "slurm job 78 end")
    assert alone.returncode == 0, alone.stderr
    assert status_of(cli)["last"]["reason"] == "slurm job 78 end"   # no watcher: its own


def test_sigterm_ends_it_cleanly_and_ctrl_c_says_interrupted(cli_process: CliProcess) -> None:
    for signum, code in ((signal.SIGTERM, 0), (signal.SIGINT, 130)):
        watcher = subprocess.Popen([sys.executable, "-m", "envsnap", "watch", "local",
                                    "--every", "1h"], cwd=cli_process.cwd,
                                   env=cli_process.env, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
        try:
            wait_for(lambda: status_of(cli_process).get("running") is True)
            watcher.send_signal(signum)
            out, err = watcher.communicate(timeout=60)
        finally:
            watcher.kill()
        assert watcher.returncode == code, err
        assert status_of(cli_process)["running"] is False
        if signum == signal.SIGTERM:
            assert out.rstrip().endswith("stopped (SIGTERM)")
            assert "error" not in err and "warning" not in err
        else:
            assert err.strip().splitlines()[-1] == "envsnap: interrupted"
        shown = cli_process("watch", "--status")
        assert shown.returncode == 0
        assert "local: ended at" in shown.stdout and "of a core of its own" in shown.stdout


def test_a_failing_host_is_retried_and_never_stops_the_watch(cli: Cli) -> None:
    result = cli("watch", "local", "127.0.0.1:1", "--every", "2s", "--for", "5s",
                 "--connect-timeout", "2")
    assert result.returncode == 0, result.stderr
    status = status_of(cli, "local+127.0.0.1_1")
    assert status["failures"] >= 2 and status["captures"] >= 4
    assert status["last_failure"]["host"] == "127.0.0.1:1"
    assert result.stderr.count("capture failed") == status["failures"]
    assert [reason for reason, _ in worker_envs(cli)][:2] == ["watch started", "every 2s"]
    shown = cli("watch", "--status")
    assert f"{status['failures']} failed (the last at" in shown.stdout


def test_once_says_a_failed_capture_in_its_exit_code(cli: Cli) -> None:
    result = cli("watch", "127.0.0.1:1", "--once", "--connect-timeout", "2")
    assert result.returncode == 3
    assert "capture failed" in result.stderr


def test_one_watcher_per_store_and_hosts(cli: Cli, cli_process: CliProcess) -> None:
    first = subprocess.Popen([sys.executable, "-m", "envsnap", "watch", "local", "--every",
                              "1h"], cwd=cli_process.cwd, env=cli_process.env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: status_of(cli_process).get("running") is True)
        second = cli_process("watch", "local", "--every", "1h")
        assert second.returncode == 2
        assert f"another envsnap watch of local runs with this store (pid {first.pid}" in \
            second.stderr
        shown = cli_process("watch", "--status")
        assert f"local: running (pid {first.pid})" in shown.stdout
    finally:
        first.terminate()
        first.wait(timeout=60)


@pytest.mark.parametrize("argv, message", [
    (["watch", "local", "--every", "0"], "is not a period of more than 0 seconds"),
    (["watch", "local", "--every", "10x"], "is not a period"),
    (["watch", "--every", "1m"], "give the hosts to watch"),
    (["watch", "local", "--once", "--install"], "--once and --install do not go together"),
    (["watch", "local", "--scheduler", "cron"], "--scheduler is about --install"),
    (["watch", "local", "--reason", "job 1"], "--reason names a one-off capture: give --once"),
    (["watch", "local", "--once", "--reason", " "], "--reason is empty"),
    (["watch", "local", "--proc", "(a+)+$"], "refused"),
])
def test_bad_input_is_one_line_and_exit_2(cli: Cli, argv: list[str], message: str) -> None:
    result = cli(*argv)
    assert result.returncode == 2 and message in result.stderr
    assert len(result.stderr.strip().splitlines()[-1:]) == 1 and "Traceback" not in result.stderr


# ---- --install / --uninstall ------------------------------------------------------------------

@pytest.fixture
def crontab(cli: Cli, tmp_path: Path) -> Path:
    """A crontab program on the CLI's PATH that keeps the table in a file (the real one where
    the machine has cron would edit this user's table)."""
    tools = tmp_path / "tools"
    tools.mkdir()
    write_fake_crontab(tools)
    table = tmp_path / "crontab.txt"
    cli.env.update(PATH=f"{tools}:{cli.env['PATH']}", CRONTAB_FILE=str(table))
    return table


def test_install_with_cron_keeps_the_users_lines_and_runs_as_written(
        cli: Cli, crontab: Path, tmp_path: Path, workers: list[int]) -> None:
    users = "MAILTO=me\n0 3 * * * /usr/bin/backup --all\n"
    crontab.write_text(users)
    marker = unique_marker("watch-cron")
    asked = cli("watch", "local", "--proc", marker, "--every", "30m", "--install",
                "--scheduler", "cron")
    assert asked.returncode == 5 and "nothing installed in the crontab" in asked.stderr
    assert crontab.read_text() == users
    result = cli("watch", "local", "--proc", marker, "--every", "30m", "--install",
                 "--scheduler", "cron", "--yes")
    assert result.returncode == 0, result.stderr
    table = crontab.read_text()
    assert table.startswith(users)
    added = table[len(users):].splitlines()
    assert len(added) == 3 and all(line.endswith(" # envsnap-watch:local") for line in added)
    assert added[1].startswith("@reboot cd ") and added[2].startswith("*/10 * * * * cd ")
    store = store_of(cli)
    assert f"--store {store}" in added[1] and "flock -n" in added[1]
    assert f"watch local --every 30m --proc {marker}" in added[1]
    assert "will write in the crontab:" in result.stdout

    again = cli("watch", "local", "--proc", marker, "--every", "30m", "--install",
                "--scheduler", "cron", "--yes")
    assert "already installed" in again.stdout and crontab.read_text() == table

    # the line runs as written: a watcher starts and records (stopped here as systemd would)
    line = added[1][len("@reboot "):]
    started = subprocess.Popen(["sh", "-c", line], cwd="/", start_new_session=True,
                               env={"PATH": "/usr/bin:/bin", "HOME": cli.env["HOME"]})
    try:
        wait_for(lambda: status_of(cli).get("captures", 0) >= 1)
        assert status_of(cli)["running"] is True
    finally:
        os.killpg(started.pid, signal.SIGTERM)
        started.wait(timeout=60)
    # flock ends at the signal; the watcher, signalled with it, ends on its own a moment later
    wait_for(lambda: status_of(cli)["running"] is False)
    assert "recorded (watch started" in (store / "watch" / "local.log").read_text()

    removed = cli("watch", "--uninstall", "--yes")
    assert removed.returncode == 0, removed.stderr
    assert crontab.read_text() == users
    assert "removed from the crontab" in removed.stdout
    assert "nothing to remove" in cli("watch", "--uninstall", "--yes").stdout


def test_uninstall_leaves_a_unit_it_did_not_write(cli: Cli, crontab: Path) -> None:
    units = Path(cli.env["XDG_CONFIG_HOME"]) / "systemd" / "user"
    units.mkdir(parents=True)
    theirs = units / "envsnap-watch-local.service"
    theirs.write_text("[Service]\nExecStart=/usr/bin/true\n")
    result = cli("watch", "--uninstall", "--yes")
    assert result.returncode == 0 and "nothing to remove" in result.stdout
    assert theirs.read_text() == "[Service]\nExecStart=/usr/bin/true\n"


def exec_start(unit: str) -> tuple[list[str], str, dict[str, str]]:
    """A unit's ExecStart= words, WorkingDirectory= and Environment=, read back as systemd
    reads the forms the writer uses (double quotes with backslash escapes, %% and $$)."""
    fields: dict[str, list[str]] = {}
    for line in unit.splitlines():
        key, equals, value = line.partition("=")
        if equals and not line.startswith("#"):
            fields.setdefault(key, []).append(value)

    def literal(word: str) -> str:
        """%% and $$ are % and $; any other % or $ systemd would replace (a specifier, a
        variable), so the word would not reach the program as written."""
        assert not re.search(r"%[^%]|\$[^$]", word.replace("%%", "").replace("$$", "")), \
            f"systemd would substitute in {word!r}"
        return word.replace("%%", "%").replace("$$", "$")

    def words(value: str) -> list[str]:
        return [literal(word) for word in shlex.split(value)]
    environment = dict(word.split("=", 1) for value in fields.get("Environment", [])
                       for word in words(value))
    return words(fields["ExecStart"][0]), words(fields["WorkingDirectory"][0])[0], environment


@pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                    reason="systemd-analyze (systemd's own unit parser) is not installed")
def test_install_with_systemd_writes_a_unit_systemd_accepts_and_that_runs(
        cli: Cli, tmp_path: Path) -> None:
    """Where a user systemd answers (a stand-in here: few test machines run one), the unit
    is written, checked by systemd's own parser, enabled with systemctl --user, runs as
    written; --uninstall disables and removes it."""
    tools = tmp_path / "tools"
    tools.mkdir()
    write_fake_systemctl(tools)
    calls = tmp_path / "systemctl.log"
    cli.env.update(PATH=f"{tools}:{cli.env['PATH']}", SYSTEMCTL_LOG=str(calls),
                   ENVSNAP_STORE=str(tmp_path / "a store, 100% $HOME's"))   # words to quote
    marker = unique_marker("watch-systemd")
    result = cli("watch", "local", "--proc", marker, "--every", "30m", "--install", "--yes")
    assert result.returncode == 0, result.stderr
    unit = Path(cli.env["XDG_CONFIG_HOME"]) / "systemd/user/envsnap-watch-local.service"
    assert unit.read_text().startswith("# envsnap-watch:local")
    assert calls.read_text().splitlines()[-2:] == [
        "--user daemon-reload", "--user enable --now envsnap-watch-local.service"]
    checked = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True,
                             text=True)
    assert checked.returncode == 0 and "envsnap-watch-local" not in checked.stderr, \
        checked.stderr

    argv, folder, environment = exec_start(unit.read_text())
    assert f"watch local --every 30m --proc {marker}" in " ".join(argv)
    assert argv[argv.index("--store") + 1] == str(store_of(cli))
    started = subprocess.Popen(argv, cwd=folder, start_new_session=True,
                               env={"HOME": cli.env["HOME"], **environment})
    try:
        wait_for(lambda: status_of(cli).get("captures", 0) >= 1)
        assert status_of(cli)["running"] is True
    finally:
        started.terminate()   # as systemctl stop does: SIGTERM to the service's process
        started.wait(timeout=60)
    assert status_of(cli)["running"] is False

    removed = cli("watch", "--uninstall", "--yes")
    assert removed.returncode == 0, removed.stderr
    assert not unit.exists()
    assert "--user disable --now envsnap-watch-local.service" in calls.read_text()


@pytest.mark.skipif(not user_systemd_runs(), reason="no systemd user instance answers here "
                                                    "(systemctl --user)")
def test_install_with_systemd_enables_a_running_service(cli: Cli) -> None:
    # the user's own systemd reads its units from their config folder, not the test's
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    if (Path(config) / "systemd/user/envsnap-watch-local.service").exists():
        pytest.skip("this user has an envsnap-watch-local unit of their own")
    cli.env["XDG_CONFIG_HOME"] = config
    marker = unique_marker("watch-systemd")
    result = cli("watch", "local", "--proc", marker, "--install", "--scheduler", "systemd",
                 "--yes")
    assert result.returncode == 0, result.stderr
    try:
        wait_for(lambda: status_of(cli).get("captures", 0) >= 1)
        unit = Path(cli.env["XDG_CONFIG_HOME"]) / "systemd/user/envsnap-watch-local.service"
        assert unit.read_text().startswith("# envsnap-watch:local")
    finally:
        removed = cli("watch", "--uninstall", "local", "--yes")
    assert removed.returncode == 0, removed.stderr
    assert not unit.exists()


def test_install_without_systemd_or_crontab_says_so(cli: Cli, tmp_path: Path) -> None:
    empty = tmp_path / "no-tools"
    empty.mkdir()
    cli.env["PATH"] = str(empty)
    result = cli("watch", "local", "--install", "--yes")
    assert result.returncode == 3
    assert result.stderr.strip() == (
        "envsnap: error: crontab is not installed here: no systemd user instance and no "
        "crontab, so nothing can keep a watcher running; run `envsnap watch` in a terminal "
        "multiplexer instead")
