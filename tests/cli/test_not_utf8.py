"""Bytes that are not UTF-8, planted in every channel a capture reads, through the real CLI:
a variable's name and value in the capturing shell, a worker's env, argv and working
folder (a real process started with them), an untracked file's name and a commit subject
in a real checkout, a benchmark's output, a --serve server's env and argv.

Each is recorded as util.escaped writes it (the byte 0xff as the four characters \\xff),
the same text whichever path captured it: capture local, capture over the test sshd,
bench local with --serve; and show and diff print that text. Nothing ends in exit 3 or 70.
"""
from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import Cli, unique_marker
from helpers.gitrepos import Repo, git_env, init
from helpers.sshd import Sshd

# What every snapshot records of what was planted (see `planted`), on every path.
RECORDED = {
    "shell env": {"NCCL_DEBUG": "IN\\xffFO", "NCCL_S\\xffHELL": "1"},
    "worker env": {"NCCL_IB_HCA": "ml\\xe9x5", "NCCL_W\\xffN": "1"},
    "worker argv": "arg\\xfe",
    "worker cwd": "cwd\\xfd",
    "untracked": ["new\\xffname.txt"],
    "subject": "raw \\xff subject",
}


@dataclass
class Planted:
    repo: Path
    tag: str          # the worker's command-line tag, for --proc
    python: Path      # the agent's interpreter: the shell env of the capture is its env


@pytest.fixture
def planted(tmp_path: Path) -> Iterator[Planted]:
    repo = init(tmp_path / "repo", git_env(tmp_path / "githome"))
    repo.commit("first", {"a.txt": "a\n"})
    commit_raw_subject(repo, b"raw \xff subject")
    repo.write(b"new\xffname.txt", "fresh\n")
    # `env` execs the agent with a name and a value no shell would pass on (dash drops a
    # name that is not an identifier): the one way to plant both, over SSH too.
    python = tmp_path / "python-not-utf8"
    python.write_text("#!/bin/sh\nexec env \"$(printf 'NCCL_S\\377HELL=1')\" "
                      f"NCCL_DEBUG=\"$(printf 'IN\\377FO')\" {sys.executable} \"$@\"\n")
    python.chmod(0o755)
    tag = unique_marker("not-utf8-worker")
    folder = bytes(tmp_path) + b"/cwd\xfd"
    Path(folder.decode("utf-8", "surrogateescape")).mkdir()
    worker = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", tag, b"arg\xfe"], cwd=folder,
        env={b"PATH": b"/usr/bin:/bin", b"NCCL_W\xffN": b"1", b"NCCL_IB_HCA": b"ml\xe9x5"})
    try:
        yield Planted(repo.path, tag, python)
    finally:
        worker.kill()
        worker.wait()


def commit_raw_subject(repo: Repo, subject: bytes) -> None:
    """A commit whose subject is these very bytes: `git commit` would re-encode them as
    latin1 (and `i18n.commitEncoding=latin1` makes git log re-encode them), so the commit
    object is written as is."""
    header = repo.git_bytes("cat-file", "commit", "HEAD").split(b"\n\n", 1)[0]
    tree = repo.git("rev-parse", "HEAD^{tree}")
    lines = [b"tree " + tree.encode(), b"parent " + repo.head().encode(),
             *(line for line in header.split(b"\n") if line.startswith((b"author", b"committer")))]
    raw = b"\n".join(lines) + b"\n\n" + subject + b"\n"
    made = subprocess.run(["git", "hash-object", "-t", "commit", "-w", "--stdin"],
                          cwd=repo.path, input=raw, capture_output=True, check=True)
    repo.git("reset", "-q", made.stdout.decode().strip())


def load(cli: Cli, label: str) -> dict[str, Any]:
    return yaml.safe_load((Path(cli.env["ENVSNAP_STORE"]) / f"{label}.yaml").read_text())


def channels(document: dict[str, Any], planted: Planted) -> dict[str, Any]:
    """What a snapshot recorded of each planted channel."""
    env = document["facts"]["env"]
    (worker,) = [p for p in env["processes"].values() if planted.tag in p["cmdline"]]
    git = document["facts"]["git"]["repos"][str(planted.repo)]
    return {
        "shell env": {k: v for k, v in env["shell"].items() if k.startswith("NCCL_")},
        "worker env": {k: v for k, v in worker["env"].items() if k.startswith("NCCL_")},
        "worker argv": worker["cmdline"][-1],
        "worker cwd": worker["cwd"].rpartition("/")[2],
        "untracked": sorted(git["uncommitted"]["untracked"]),
        "subject": git["history"][0]["subject"],
    }


def capture_options(planted: Planted) -> list[str]:
    return ["--python", str(planted.python), "--repo", str(planted.repo), "--proc", planted.tag]


def test_capture_local_records_every_channel_escaped(cli: Cli, planted: Planted) -> None:
    result = cli("capture", "local", "--label", "here", *capture_options(planted))
    assert result.returncode == 0, result.stderr
    assert channels(load(cli, "here"), planted) == RECORDED


def test_capture_over_ssh_records_the_same_text(ssh_cli: Cli, sshd: Sshd,
                                                planted: Planted) -> None:
    result = ssh_cli("capture", sshd.addresses[0], "--label", "there", *capture_options(planted))
    assert result.returncode == 0, result.stderr
    assert channels(load(ssh_cli, "there"), planted) == RECORDED


def test_bench_with_serve_records_the_same_text_and_the_output(cli: Cli, planted: Planted,
                                                               tmp_path: Path) -> None:
    server_tag = unique_marker("not-utf8-server")
    # the server itself says ready, after the exec: the argv recorded then is its own
    server = (f"exec {sys.executable} -c 'import sys, time; "
              f"sys.stdout.buffer.write(b\"ready \\xff\\n\"); sys.stdout.flush(); "
              f"time.sleep(60)' {server_tag} \"$(printf 'arg\\376')\"")
    result = cli("bench", "local", "--label", "bench", *capture_options(planted),
                 "--cmd", "printf 'out\\377put 12.5\\n'", "--metric", r"put ([0-9.]+)",
                 "--repeat", "2", "--sample-interval", "0", "--cwd", str(tmp_path),
                 "--serve", server, "--ready", "ready")
    assert result.returncode == 0, result.stderr
    document = load(cli, "bench")
    assert channels(document, planted) == RECORDED
    runs = document["bench"]["runs"]
    assert [run["output_tail"] for run in runs] == ["out\\xffput 12.5\n"] * 2
    served = document["bench"]["server"]
    assert served["argv"][-1] == "arg\\xfe"
    assert served["env"]["NCCL_DEBUG"] == "IN\\xffFO"


def test_show_and_diff_print_the_escaped_text(cli: Cli, planted: Planted) -> None:
    cli.env["NCCL_DEBUG"] = "INFO"
    assert cli("capture", "local", "--label", "clean").returncode == 0
    assert cli("capture", "local", "--label", "odd", *capture_options(planted)).returncode == 0
    shown = cli("show", "odd")
    assert shown.returncode == 0, shown.stderr
    words = " ".join(shown.stdout.split())   # as wrapped to the width
    for text in ("NCCL_DEBUG=IN\\xffFO", "NCCL_S\\xffHELL=1", "NCCL_W\\xffN=1",
                 "NCCL_IB_HCA=ml\\xe9x5", '"raw \\xff subject"'):
        assert text in words, shown.stdout
    as_json = cli("show", "odd", "--json")
    assert as_json.returncode == 0, as_json.stderr
    assert channels(json.loads(as_json.stdout), planted) == RECORDED
    diff = cli("diff", "clean", "odd")
    assert diff.returncode == 1, diff.stderr   # drift found, a result
    assert "NCCL_DEBUG in the shell INFO -> IN\\xffFO" in diff.stdout, diff.stdout
    assert "NCCL_S\\xffHELL" in diff.stdout and "\ufffd" not in diff.stdout + shown.stdout


@pytest.mark.parametrize("command", [
    ["capture", "local"],
    ["bench", "local", "--cmd", "echo 1", "--metric", "([0-9]+)", "--repeat", "1",
     "--sample-interval", "0"]])
def test_a_shell_variable_that_is_not_utf8_is_recorded_escaped(cli: Cli,
                                                               command: list[str]) -> None:
    # NCCL_DEBUG=$(printf 'IN\xffFO') envsnap capture local: what Python makes of the byte
    cli.env["NCCL_DEBUG"] = "IN\udcffFO"
    result = cli(*command, "--label", "x")
    assert result.returncode == 0, result.stderr
    assert load(cli, "x")["facts"]["env"]["shell"]["NCCL_DEBUG"] == "IN\\xffFO"
