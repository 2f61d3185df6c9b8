"""How every command ends, through the real CLI: an envsnap error, an internal error (a
bug: one line and a crash log), Ctrl-C, a reader that closes the pipe, Ctrl-D at [y/N]."""
from __future__ import annotations

import os
import pty
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, Cli
from helpers.gitrepos import Story
from helpers.restorestory import capture_good, moved_and_dirty, snapshot_of_tree

from envsnap.errors import (
    EXIT_DRIFT,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    ExitCode,
)

EXAMPLES = ROOT / "snapshots" / "examples"
GOOD, BAD = str(EXAMPLES / "story-good.yaml"), str(EXAMPLES / "story-bad.yaml")
INTERNAL = re.compile(r"envsnap: internal error: ZeroDivisionError: boom in the store "
                      r"\(details in (?P<log>/\S+\.log)\)")


def run_with_broken_library(cli: Cli, raised: str, *args: str
                            ) -> subprocess.CompletedProcess[str]:
    """The real main() in a subprocess, after one library function is made to raise."""
    probe = ("import sys\n"
             "from envsnap.snapshot import store\n"
             "def broken(self, label):\n"
             f"    raise {raised}\n"
             "store.Store.load = broken\n"
             "from envsnap.cli.main import main\n"
             f"sys.exit(main({list(args)!r}))\n")
    return subprocess.run([sys.executable, "-c", probe], cwd=cli.cwd, env=cli.env,
                          capture_output=True, text=True, timeout=60)


@pytest.fixture
def state(cli: Cli, tmp_path: Path) -> Path:
    cli.env["XDG_STATE_HOME"] = str(tmp_path / "state")
    cli.env.pop("ENVSNAP_DEBUG", None)
    return tmp_path / "state" / "envsnap"


def test_an_envsnap_error_is_one_line_with_its_code(cli: Cli) -> None:
    result = cli("show", "nope")
    assert result.returncode == EXIT_USAGE
    assert result.stderr == (f"envsnap: error: no snapshot labelled 'nope' in "
                             f"{cli.env['ENVSNAP_STORE']} ($ENVSNAP_STORE); envsnap list "
                             "shows what there is\n")
    assert result.stdout == ""


def test_a_bug_is_one_line_and_a_crash_log(cli: Cli, state: Path) -> None:
    result = run_with_broken_library(cli, "ZeroDivisionError('boom\\nin the store')",
                                     "show", GOOD)
    assert result.returncode == EXIT_INTERNAL
    (line,) = result.stderr.splitlines()
    found = INTERNAL.fullmatch(line)
    assert found, line
    log = Path(found["log"])
    assert log.parent == state and log.name.startswith("crash-")
    text = log.read_text()
    assert "Traceback (most recent call last)" in text and "def broken" not in text
    assert "in broken" in text and "ZeroDivisionError: boom" in text
    assert "argv: ['show'," in text
    assert log.stat().st_mode & 0o777 == 0o600


def test_the_crash_log_masks_secrets_in_the_command_line(cli: Cli, state: Path) -> None:
    # `--` makes the flag-like word the label: it reaches the (broken) store as typed
    result = run_with_broken_library(cli, "ZeroDivisionError('boom')", "show", "--",
                                     "--token=hunter2-s3cret-value")
    assert result.returncode == EXIT_INTERNAL, result.stderr
    (log,) = state.glob("crash-*.log")
    text = log.read_text()
    assert "argv: ['show', '--', '--token=" in text and "hunter2-s3cret-value" not in text


def test_without_xdg_state_home_the_crash_log_is_under_home(cli: Cli) -> None:
    cli.env.pop("XDG_STATE_HOME", None)
    result = run_with_broken_library(cli, "ZeroDivisionError('boom in the store')",
                                     "diff", GOOD, BAD)
    assert result.returncode == EXIT_INTERNAL
    found = INTERNAL.fullmatch(result.stderr.strip())
    assert found, result.stderr
    assert Path(found["log"]).parent == Path(cli.env["HOME"]) / ".local" / "state" / "envsnap"


def test_a_crash_log_that_cannot_be_written_still_gives_one_line(cli: Cli, tmp_path: Path
                                                                 ) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    cli.env["XDG_STATE_HOME"] = str(blocked)
    result = run_with_broken_library(cli, "ZeroDivisionError('boom')", "show", GOOD)
    assert result.returncode == EXIT_INTERNAL
    (line,) = result.stderr.splitlines()
    assert line.startswith("envsnap: internal error: ZeroDivisionError: boom (no crash log: ")
    assert "ENVSNAP_DEBUG=1" in line


def test_envsnap_debug_prints_the_traceback_instead(cli: Cli, state: Path) -> None:
    cli.env["ENVSNAP_DEBUG"] = "1"
    result = run_with_broken_library(cli, "ZeroDivisionError('boom')", "show", GOOD)
    assert result.returncode == EXIT_INTERNAL
    assert result.stderr.startswith("Traceback (most recent call last)")
    assert result.stderr.rstrip().endswith("ZeroDivisionError: boom")
    assert not state.exists()


def test_an_interrupt_is_one_line_and_130(cli: Cli, state: Path) -> None:
    result = run_with_broken_library(cli, "KeyboardInterrupt", "diff", GOOD, BAD)
    assert result.returncode == EXIT_INTERRUPTED
    assert result.stderr == "envsnap: interrupted\n"
    assert not state.exists()


def test_ctrl_c_during_a_benchmark_is_one_line_and_130(cli: Cli, tmp_path: Path) -> None:
    started = tmp_path / "started"
    running = subprocess.Popen(
        [sys.executable, "-m", "envsnap", "bench", "local", "--cmd",
         f"touch {started}; sleep 60", "--metric", "x", "--repeat", "1"],
        cwd=cli.cwd, env=cli.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 90
    while not started.exists() and running.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    running.send_signal(2)   # SIGINT: what Ctrl-C sends
    out, err = running.communicate(timeout=60)
    assert running.returncode == EXIT_INTERRUPTED, out + err
    assert err.splitlines()[-1] == "envsnap: interrupted" and "Traceback" not in err


def test_a_reader_that_closes_the_pipe_ends_it_quietly(cli: Cli) -> None:
    for args in (["diff", GOOD, BAD, "--all"], ["show", GOOD, "--json"]):
        running = subprocess.Popen([sys.executable, "-m", "envsnap", *args], cwd=cli.cwd,
                                   env=cli.env, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE)
        assert running.stdout is not None and running.stderr is not None
        running.stdout.close()   # `| head -0`: gone before the first line is written
        err = running.stderr.read().decode()
        assert running.wait(timeout=60) in (EXIT_OK, EXIT_DRIFT), err
        assert err == ""


def test_a_shell_pipe_into_head(cli: Cli) -> None:
    result = subprocess.run(f"{sys.executable} -m envsnap show {GOOD} --yaml | head -1",
                            shell=True, cwd=cli.cwd, env=cli.env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0 and len(result.stdout.splitlines()) == 1
    assert result.stderr == ""


def test_ctrl_d_at_the_restore_question_is_no(cli: Cli, tmp_path: Path) -> None:
    story = Story(tmp_path / "story")
    capture_good(cli, story, "local")
    moved_and_dirty(story)
    before = snapshot_of_tree(story)
    main_end, child_end = pty.openpty()   # a terminal, so restore asks instead of refusing
    running = subprocess.Popen([sys.executable, "-m", "envsnap", "restore", "good"],
                               cwd=cli.cwd, env=cli.env, stdin=child_end,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    os.close(child_end)
    os.write(main_end, b"\x04")   # Ctrl-D on an empty line: end of input
    out, err = running.communicate(timeout=120)
    os.close(main_end)
    assert "apply these changes to local? [y/N]" in out, out + err
    assert "EOFError" not in err and "Traceback" not in err and "internal error" not in err
    assert running.returncode == ExitCode.DECLINED, out + err   # no answer is a no
    assert err == "envsnap: declined: nothing was changed on local\n"
    assert snapshot_of_tree(story) == before


def test_ctrl_c_at_the_restore_question_says_nothing_changed(cli: Cli, tmp_path: Path) -> None:
    """SIGINT while restore waits for its answer (a real point: the prompt is on stdout)."""
    story = Story(tmp_path / "story")
    capture_good(cli, story, "local")
    moved_and_dirty(story)
    before = snapshot_of_tree(story)
    main_end, child_end = pty.openpty()
    running = subprocess.Popen([sys.executable, "-m", "envsnap", "restore", "good"],
                               cwd=cli.cwd, env=cli.env, stdin=child_end,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    os.close(child_end)
    assert running.stdout is not None
    said = b""
    while b"[y/N] " not in said:
        chunk = os.read(running.stdout.fileno(), 4096)
        assert chunk, said
        said += chunk
    running.send_signal(signal.SIGINT)
    _out, err = running.communicate(timeout=60)
    os.close(main_end)
    assert running.returncode == EXIT_INTERRUPTED, err
    assert err.decode() == ("envsnap: interrupted: nothing was changed on local: the restore "
                            "of 'good' stopped before it began\n")
    assert snapshot_of_tree(story) == before


def test_the_process_entry_exits_with_mains_code_its_objects_frozen_out_of_the_last_collection(
        cli: Cli) -> None:
    """`python -m envsnap` and the installed script both end through console(): main's exit
    code, atexit still run, and what the command made frozen (the interpreter's last
    collection would walk it all, ~20 ms after the answer is out)."""
    probe = ("import atexit, gc, sys\n"
             "atexit.register(lambda: print('frozen at exit:', gc.get_freeze_count() > 0))\n"
             "sys.argv = ['envsnap', 'show', 'nope']\n"
             "import runpy\nrunpy.run_module('envsnap', run_name='__main__')\n")
    result = subprocess.run([sys.executable, "-c", probe], cwd=cli.cwd, env=cli.env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == EXIT_USAGE
    assert result.stdout == "frozen at exit: True\n"
    project = (Path(__file__).parents[2] / "pyproject.toml").read_text()
    assert '\nenvsnap = "envsnap.cli.main:console"\n' in project   # the installed script
