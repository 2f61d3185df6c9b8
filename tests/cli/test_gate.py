"""One gate for every command that acts on a host from a snapshot (hostops/gate.py): a
foreign snapshot's review (every write with its size, every command and interpreter, every
variable, flagged where it changes how a process starts) is shown, and nothing runs without
--trust-foreign or the label typed at a terminal. Through the real CLI, on real checkouts,
locally and over the test sshd. The parser is read for the commands: one that reaches hosts
and is not known to pass the gate fails here."""
from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, Cli
from helpers.bisecthistory import BENCH, METRIC, History, regression_at
from helpers.gitrepos import Story
from helpers.restorestory import capture_good, moved_and_dirty
from helpers.sshd import Sshd

from envsnap.cli.main import build_parser, subcommands
from envsnap.errors import ExitCode

BOTH = pytest.mark.parametrize("over_ssh", [False, pytest.param(True, marks=pytest.mark.ssh)],
                               ids=["local", "ssh"])
# Commands that reach hosts without acting from a snapshot: they capture what is there.
NOT_FROM_A_SNAPSHOT = {"capture": "records a host; takes no snapshot in",
                       "bench": "records a host and its benchmark; takes no snapshot in",
                       "timeline": "reads a host's own evidence; of the store's snapshots it "
                                   "reads times and values, and runs nothing they hold",
                       "report": "reaches a host only for --timeline, and only from the "
                                 "user's own snapshot: a foreign one is refused",
                       "prune": "reaches a host only to remove restore's own backups; runs "
                                "nothing a snapshot holds",
                       "watch": "records hosts as capture does; takes no snapshot in"}


def where(request: pytest.FixtureRequest, over_ssh: bool) -> tuple[Cli, str]:
    if not over_ssh:
        return request.getfixturevalue("cli"), "local"
    sshd: Sshd = request.getfixturevalue("sshd")
    return request.getfixturevalue("ssh_cli"), sshd.addresses[0]


def edit(cli: Cli, label: str, change: object) -> dict[str, object]:
    """The stored snapshot changed by hand (so foreign: its signature no longer holds)."""
    path = Path(cli.env["ENVSNAP_STORE"]) / f"{label}.yaml"
    document = yaml.safe_load(path.read_text())
    change(document)  # type: ignore[operator]
    path.write_text(yaml.safe_dump(document))
    return document


def planted_interpreter(tmp_path: Path) -> tuple[Path, Path]:
    """A "python" that is a script of the stranger's: it leaves a mark, then runs python."""
    mark = tmp_path / "interpreter-ran"
    script = tmp_path / "not-python"
    script.write_text(f"#!/bin/sh\ntouch {mark}\nexec python3 \"$@\"\n")
    script.chmod(0o755)
    return script, mark


def bisected(cli: Cli, history: History, *extra: str) -> tuple[int, str, str]:
    result = cli("bisect", "good", "bad", "--cmd", BENCH, "--metric", METRIC, "--repeat", "1",
                 "--cwd", str(history.repo.path), *extra, timeout=180)
    return result.returncode, result.stdout, result.stderr


@BOTH
def test_bisect_asks_before_a_foreign_bad_names_the_python(request: pytest.FixtureRequest,
                                                           over_ssh: bool,
                                                           tmp_path: Path) -> None:
    """Signature stripped, meta.config.python naming a script: refused, the script never
    runs, and the review names it as the interpreter that would run."""
    cli, host = where(request, over_ssh)
    history = History(tmp_path / "story")
    history.capture(cli, "good", host)
    history.commits(regression_at(2, 3), slow_at=2)
    history.capture(cli, "bad", host)
    script, mark = planted_interpreter(tmp_path)

    def strip_and_plant(document: dict) -> None:  # type: ignore[type-arg]
        document["meta"].pop("signature")
        document["meta"]["config"]["python"] = str(script)
    edit(cli, "bad", strip_and_plant)
    before = history.state()
    code, out, err = bisected(cli, history)
    assert code == ExitCode.DECLINED, out + err
    assert "snapshot bad is foreign (unsigned)" in out and "bisecting with it (as BAD)" in out
    assert f"    {script} (the snapshot's recorded python: runs envsnap's agent)\n" in out
    assert "is foreign (unsigned)" in err and "--trust-foreign" in err
    assert len(err.strip().splitlines()) == 1
    assert not mark.exists() and history.state() == before


def test_bisect_asks_before_applying_a_foreign_goods_patch(cli: Cli, tmp_path: Path) -> None:
    history = History(tmp_path / "story")
    history.repo.write("tune.txt", "0.9\n")          # GOOD's uncommitted patch
    history.capture(cli, "good")
    history.repo.git("checkout", "--", "tune.txt")
    history.commits(regression_at(2, 3), slow_at=2)
    history.capture(cli, "bad")
    edit(cli, "good", lambda document: document["meta"].pop("signature"))
    before = history.state()
    code, out, err = bisected(cli, history, "--with-patch")
    assert code == ExitCode.DECLINED, out + err
    assert "snapshot good is foreign (unsigned)" in out
    assert f"{history.repo.path}/tune.txt  (patched: " in out
    assert "apply  (the snapshot's uncommitted patch, " in out
    assert "--trust-foreign" in err and history.state() == before
    code, out, err = bisected(cli, history, "--with-patch", "--trust-foreign")
    assert code in (0, 1), out + err
    assert "snapshot good is foreign (unsigned)" in out   # shown, then run: consented


def test_explain_shows_the_review_with_the_pth_line_visible(cli: Cli, tmp_path: Path) -> None:
    """A .pth startup line with a carriage return and an erase-line escape: the review shows
    the exact bytes, and nothing is put in place."""
    history = History(tmp_path / "story")
    history.capture(cli, "good")
    history.commits(regression_at(2, 3), slow_at=2)
    history.capture(cli, "bad")
    line = "import os; os.system('touch /tmp/x') #\r\x1b[2K import site"

    def plant(document: dict) -> None:  # type: ignore[type-arg]
        document["facts"]["python_env"]["startup_pth"] = {
            "/usr/lib/python3/dist-packages/zz.pth": {"code_lines": [line], "sha256": "0" * 64}}
    edit(cli, "good", plant)
    before = history.state()
    result = cli("explain", "good", "bad", "--cmd", BENCH, "--metric", METRIC, "--yes")
    assert result.returncode == ExitCode.DECLINED, result.stdout + result.stderr
    out = result.stdout
    assert "snapshot good is foreign (content changed)" in out
    assert "explaining with it (as GOOD)" in out
    assert ("import os; os.system('touch /tmp/x') #\\r\\x1b[2K import site  (a startup line "
            "of /usr/lib/python3/dist-packages/zz.pth") in out, out
    assert "\r" not in out and "\x1b" not in out
    assert "--trust-foreign" in result.stderr and history.state() == before


@pytest.mark.parametrize("named_by", ["extra var", "host var"])
def test_play_shows_the_review_then_refuses(cli: Cli, tmp_path: Path, named_by: str) -> None:
    """`-e snapshot=good`, or an inventory whose host vars name it."""
    story = Story(tmp_path / "story")
    capture_good(cli, story, "local")
    moved_and_dirty(story)
    edit(cli, "good", lambda document: document["meta"].pop("signature"))
    playbook = str(ROOT / "playbooks" / "restore.yml")
    head = story.checkout.head()
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"local": {"snapshot": "good"}}}}))
    naming = ["-e", "snapshot=good"] if named_by == "extra var" else \
        ["--inventory", str(inventory)]
    refused = cli("play", playbook, *naming, "-l", "local")
    assert refused.returncode == ExitCode.DECLINED, refused.stdout + refused.stderr
    assert "snapshot good is foreign (unsigned)" in refused.stdout
    assert "bench_one.py  (untracked file: " in refused.stdout
    assert story.checkout.head() == head


def test_trusts_review_includes_the_recorded_server_env(cli: Cli, tmp_path: Path) -> None:
    """restore --rerun --serve starts the server with the env the snapshot records: a
    PYTHONPATH at a folder with a sitecustomize.py would run there, so trust shows it."""
    story = Story(tmp_path / "story")
    capture_good(cli, story, "local")

    def plant(document: dict) -> None:  # type: ignore[type-arg]
        document["facts"]["env"]["processes"] = {"4242": {
            "role": "server", "matched": "envsnap --serve", "cmdline": ["python3", "serve.py"],
            "env": {"PYTHONPATH": "/tmp/stranger", "NCCL_DEBUG": "INFO"}}}
    edit(cli, "good", plant)
    result = cli("trust", "good")
    assert result.returncode == ExitCode.DECLINED, result.stdout + result.stderr
    assert "  variables it would start a process with (2):\n" in result.stdout, result.stdout
    assert "    PYTHONPATH=/tmp/stranger  (changes how a process starts)\n" in result.stdout
    assert "    NCCL_DEBUG=INFO\n" in result.stdout


# ---- every command that acts on a host from a snapshot passes the gate ---------------------

def gated_invocations(story: Story) -> dict[str, list[str]]:
    """Each command that acts on a host from a snapshot, run on a foreign `good` (and `bad`)."""
    repo = str(story.checkout.path)
    return {
        "restore": ["restore", "good", "--yes", "--repo", repo],
        "bisect": ["bisect", "good", "bad", "--cmd", BENCH, "--metric", METRIC],
        "explain": ["explain", "good", "bad", "--cmd", BENCH, "--metric", METRIC, "--yes"],
        "play": ["play", str(ROOT / "playbooks" / "restore.yml"), "-e", "snapshot=good",
                 "-l", "local"],
        "trust": ["trust", "good"],
    }


def acts_on_hosts(parser: argparse.ArgumentParser) -> bool:
    return bool(parser.get_default("reaches_hosts"))


def test_every_command_that_acts_on_a_host_from_a_snapshot_passes_the_gate(
        cli: Cli, tmp_path: Path) -> None:
    story = Story(tmp_path / "story")
    capture_good(cli, story, "local")
    story.checkout.write("README.md", "later\n")
    story.checkout.git("commit", "-qam", "later")
    assert cli("capture", "local", "--label", "bad", "--repo",
               str(story.checkout.path)).returncode == 0
    edit(cli, "good", lambda document: document["meta"].pop("signature"))
    invocations = gated_invocations(story)
    commands = subcommands(build_parser([]))
    reaching = {name for name, parser in commands.items() if acts_on_hosts(parser)}
    unknown = reaching - set(invocations) - set(NOT_FROM_A_SNAPSHOT)
    assert not unknown, f"commands that reach hosts but do not pass the gate: {unknown}"
    for name, argv in invocations.items():
        assert name in commands
        assert "--trust-foreign" in commands[name].format_help() or name == "trust", name
        head = story.checkout.head()
        result = cli(*argv)
        assert result.returncode == ExitCode.DECLINED, (name, result.stdout, result.stderr)
        unchanged = "nothing was stored" if name == "trust" else "nothing was changed on "
        assert result.stderr.startswith(f"envsnap: declined: {unchanged}"), (name, result.stderr)
        header = "good: foreign (unsigned)" if name == "trust" else \
            "snapshot good is foreign (unsigned)"
        assert header in result.stdout, (name, result.stdout)
        assert "commands it would run (" in result.stdout and "files it would write (" \
            in result.stdout, (name, result.stdout)
        assert len(result.stderr.strip().splitlines()) == 1, (name, result.stderr)
        assert story.checkout.head() == head, name
