"""A capture of a checkout that an envsnap bisect holds (issue 24): the snapshot records the
holder (pid, command, since), and `show` and `diff` say the state is envsnap's, not the
user's. A real `envsnap bisect` moving a real checkout, locally and over the real sshd."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import Cli
from helpers.bisecthistory import BENCH, METRIC, History, regression_at


def wait_for(what: str, ready: object, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not ready():   # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.mark.parametrize("over_ssh", [False, True], ids=["local", "ssh"])
def test_a_capture_during_bisect_says_the_state_is_envsnaps(
        request: pytest.FixtureRequest, cli: Cli, tmp_path: Path, over_ssh: bool) -> None:
    host, home = "local", Path(cli.env["HOME"])
    if over_ssh:
        sshd = request.getfixturevalue("sshd")
        sshd.write_home(Path(cli.env["HOME"]))
        host, home = sshd.addresses[0], sshd.host_home
    history = History(tmp_path / "h")
    history.capture(cli, "good", host)
    history.commits(regression_at(3, 4), slow_at=3)
    history.capture(cli, "bad", host)
    locks = home / ".cache" / "envsnap" / "locks"
    # each benchmark run sleeps first: the bisect holds the checkout while it waits
    bisect = subprocess.Popen(
        [sys.executable, "-m", "envsnap", "bisect", "good", "bad", "--cmd", f"{BENCH} 60",
         "--metric", METRIC, "--repeat", "1", "--cwd", str(history.repo.path)],
        env=cli.env, cwd=cli.cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for("the bisect's lock", lambda: any(
            (lock / "owner").exists() for lock in locks.glob("*.lock")))
        wait_for("the bisect to move HEAD", lambda: history.repo.head() == history.good)
        during = cli("capture", host, "--label", "during", "--repo", str(history.repo.path))
    finally:
        bisect.send_signal(signal.SIGINT)   # bisect puts the checkout back as it found it
        bisect.wait(timeout=120)
    assert history.repo.head() == history.shas[-1]   # put back: nothing of the user's moved
    assert during.returncode == 0, during.stderr   # a note, not a failed capture
    assert f"note: {host}: {history.repo.path} was held by envsnap (pid {bisect.pid} on " \
        in during.stderr
    repo = json.loads(cli("show", "during", "--json").stdout)["facts"]["git"]["repos"][
        str(history.repo.path)]
    held = repo["held_by"]
    assert held["pid"] == bisect.pid and held["command"].startswith("envsnap bisect good bad")
    assert held["since"]
    shown = " ".join(cli("show", "during").stdout.split())   # rows wrap at the terminal's width
    said = (f"{history.repo.path} was held by envsnap (pid {bisect.pid} on ")
    assert said in shown and "the state recorded there is envsnap's, not the user's" in shown
    verdict = " ".join(cli("diff", "bad", "during").stdout.split("\n\n")[1].split())
    assert f"during: {said}" in verdict
    assert "held_by" not in cli("diff", "bad", "during").stdout   # a note, not a finding
    assert "held_by" not in json.loads(cli("show", "bad", "--json").stdout)["facts"]["git"][
        "repos"][str(history.repo.path)]
