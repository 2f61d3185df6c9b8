"""What a host sends back is bounded and typed: output past the cap is refused in one line
with the controller's memory bounded by the cap, an agent document of wrong field types is
refused before it is signed or saved, a fleet folder with one bad member names that member,
and a store entry that is not a regular file is never written through.

The "host" is this machine, reached locally or over the test sshd; its python is a small
script that runs the real one for everything but the agent, whose output it replaces."""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import Cli
from helpers.diffdata import agent_output, h200, save
from helpers.folded import words
from helpers.sshd import Sshd

MAX_OUTPUT_MB_VARIABLE = "ENVSNAP_MAX_AGENT_OUTPUT_MB"   # as docs/guide/reference.md lists them
DEFAULT_MAX_OUTPUT_MB = 256


def lying_python(folder: Path, agent_prints: str) -> Path:
    """A python for the host whose agent (the cached agent folder as its first argument)
    runs `agent_prints` as shell instead; unpacking the agent goes to the real python."""
    script = folder / "python-liar"
    script.write_text(f"#!/bin/sh\nif [ -d \"$1\" ]; then {agent_prints}; exit 0; fi\n"
                      f"exec {sys.executable} \"$@\"\n")
    script.chmod(0o755)
    return script


def printing_file(folder: Path, document: Any) -> Path:
    path = folder / "agent-says.json"
    path.write_text(json.dumps(document))
    return lying_python(folder, f"cat {path}")


def stored(cli: Cli) -> list[str]:
    root = Path(cli.env["ENVSNAP_STORE"])
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


def error_lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.strip()]


def test_a_host_that_prints_without_end_is_refused_with_memory_bounded_by_the_cap(
        cli: Cli, tmp_path: Path) -> None:
    """600 MB from a host took the controller to 1.7 GB; now it stops at the default cap."""
    python = lying_python(tmp_path, "head -c 629145600 /dev/zero")
    command = [sys.executable, "-m", "envsnap", "capture", "local", "--python", str(python),
               "--label", "runaway"]
    with open(tmp_path / "stderr", "w") as stderr:
        process = subprocess.Popen(command, cwd=cli.cwd, env=cli.env, stdout=subprocess.DEVNULL,
                                   stderr=stderr, stdin=subprocess.DEVNULL)
        _, status, usage = os.wait4(process.pid, 0)
    peak_mib = usage.ru_maxrss / 1024
    lines = (tmp_path / "stderr").read_text().splitlines()
    assert os.waitstatus_to_exitcode(status) == 3, lines
    assert lines == [f"envsnap: error: local: the host printed more than "
                     f"{DEFAULT_MAX_OUTPUT_MB} MiB, refused unread (a snapshot is a few MB; "
                     f"{MAX_OUTPUT_MB_VARIABLE} raises the cap)"]
    assert peak_mib < DEFAULT_MAX_OUTPUT_MB + 160, f"{peak_mib:.0f} MiB"
    assert stored(cli) == []


@pytest.mark.ssh
def test_over_ssh_output_past_a_cap_set_by_the_user_is_one_line(ssh_cli: Cli, sshd: Sshd,
                                                                tmp_path: Path) -> None:
    python = lying_python(tmp_path, "head -c 3000000 /dev/zero")
    ssh_cli.env[MAX_OUTPUT_MB_VARIABLE] = "1"
    result = ssh_cli("capture", sshd.addresses[0], "--python", str(python), "--label", "big")
    assert result.returncode == 3, result.stderr
    assert error_lines(result) == [
        f"envsnap: error: {sshd.addresses[0]}: the host printed more than 1 MiB, refused "
        f"unread (a snapshot is a few MB; {MAX_OUTPUT_MB_VARIABLE} raises the cap)"]
    assert stored(ssh_cli) == []
    # the same host under the default cap is captured as ever
    del ssh_cli.env[MAX_OUTPUT_MB_VARIABLE]
    assert ssh_cli("capture", sshd.addresses[0], "--label", "fine").returncode == 0
    ssh_cli.env[MAX_OUTPUT_MB_VARIABLE] = "lots"
    bad = ssh_cli("capture", sshd.addresses[0], "--label", "again")
    assert bad.returncode == 2 and error_lines(bad) == [
        f"envsnap: error: {MAX_OUTPUT_MB_VARIABLE}='lots': expected a size in MiB (default "
        f"{DEFAULT_MAX_OUTPUT_MB})"]


def wrong_hostname() -> dict[str, Any]:
    document = agent_output()
    document["collectors"]["system"]["facts"]["hostname"] = ["not", "a", "name"]
    return document


@pytest.mark.ssh
@pytest.mark.parametrize(("document", "message"), [
    (wrong_hostname(), "the agent's output: facts.system.hostname: expected a string or "
                       "null, got a list"),
    ([1, 2], "the agent's output is refused: the document: expected a mapping, got "),
    ({"collectors": {"system": "up"}}, "the agent's output is refused: collectors.system: "
                                       "expected a mapping, got "),
], ids=["field-type", "not-an-object", "collector-not-an-object"])
def test_an_agent_document_of_wrong_types_is_refused_before_it_is_signed_or_saved(
        ssh_cli: Cli, sshd: Sshd, tmp_path: Path, document: Any, message: str) -> None:
    python = printing_file(tmp_path, document)
    result = ssh_cli("capture", sshd.addresses[0], "--python", str(python), "--label", "odd")
    assert result.returncode == 3, result.stderr
    (line,) = error_lines(result)
    assert line.startswith(f"envsnap: error: {sshd.addresses[0]}: {message}"), line
    assert "nothing saved" in line
    assert stored(ssh_cli) == []


def test_a_fleet_folder_with_one_bad_member_names_it_and_compares_the_rest(
        cli: Cli, tmp_path: Path) -> None:
    folder = tmp_path / "store" / "run1"
    folder.mkdir(parents=True)
    for name in ("node1", "node2", "node3"):
        save(h200(label=f"run1/{name}", host=name), folder / f"{name}.yaml")
    bad = h200(label="run1/node4", host="node4")
    bad["facts"]["system"]["hostname"] = 42
    save(bad, folder / "node4.yaml")
    result = cli("diff", "--fleet", "run1", "--json")
    assert result.returncode == 4, result.stderr
    report = json.loads(result.stdout)
    assert report["hosts"] == ["node1", "node2", "node3"]
    (unreadable,) = report["unreadable"]
    assert unreadable["source"] == str(folder / "node4.yaml")
    assert "facts.system.hostname: expected a string or null, got an integer" in \
        unreadable["error"]
    assert error_lines(result) == [f"envsnap: error: {unreadable['error']} (left out of the "
                                   "fleet)"]
    human = cli("diff", "--fleet", "run1")
    assert human.returncode == 4
    assert "1 snapshot unreadable" in human.stdout
    # folded to 80 columns where the temporary path ends: read as words
    assert f"unreadable: {folder / 'node4.yaml'} (" in words(human.stdout)


def special_entries(store: Path, tmp_path: Path) -> dict[str, Path]:
    """Store entries that are no regular file: a FIFO, a link to one, a link to a device."""
    store.mkdir(parents=True, exist_ok=True)
    os.mkfifo(tmp_path / "fifo")
    os.mkfifo(store / "fifo.yaml")
    (store / "linked-fifo.yaml").symlink_to(tmp_path / "fifo")
    (store / "device.yaml").symlink_to("/dev/null")
    return {"fifo": store / "fifo.yaml", "linked-fifo": tmp_path / "fifo",
            "device": Path("/dev/null")}


def test_a_store_entry_that_is_not_a_regular_file_is_refused(cli: Cli, tmp_path: Path) -> None:
    store = Path(cli.env["ENVSNAP_STORE"])
    targets = special_entries(store, tmp_path)
    # held open for reading and writing: a write through would not block, and shows here
    fifos = {label: os.open(path, os.O_RDWR | os.O_NONBLOCK)
             for label, path in targets.items() if stat.S_ISFIFO(path.stat().st_mode)}
    try:
        for label in targets:
            kind = "a character device" if label == "device" else "a FIFO"
            saved = cli("capture", "local", "--label", label, "--force", timeout=60)
            assert saved.returncode == 2, saved.stderr
            assert error_lines(saved) == [
                f"envsnap: error: {store / (label + '.yaml')}: the store entry is not a "
                f"regular file ({kind}), refused: move it away"]
            shown = cli("show", label, timeout=10)
            assert shown.returncode == 2 and "is not a regular file" in shown.stderr
        for fifo in fifos.values():
            with pytest.raises(BlockingIOError):
                os.read(fifo, 1)   # nothing was written through
    finally:
        for fifo in fifos.values():
            os.close(fifo)
    assert sorted(p.name for p in store.iterdir()) == ["device.yaml", "fifo.yaml",
                                                       "linked-fifo.yaml"]


@pytest.mark.parametrize(("bench", "where", "kind"), [
    (["runs"], "bench", "a list"),
    ({"runs": [], "server": "up"}, "bench.server", "a string"),
], ids=["bench-not-an-object", "server-not-an-object"])
def test_a_benchmark_report_of_wrong_shape_is_refused_where_the_agent_output_is_read(
        cli: Cli, tmp_path: Path, bench: Any, where: str, kind: str) -> None:
    """The agent's output is read once (hosts/capture.py): what the benchmark's reader takes
    for granted, an object for bench and for its server, is checked there too."""
    python = printing_file(tmp_path, {"collectors": {}, "agent": {}, "bench": bench})
    result = cli("bench", "local", "--python", str(python), "--cmd", "true", "--metric", "x",
                 "--label", "odd")
    assert result.returncode == 3, result.stderr
    assert [line for line in error_lines(result) if line.startswith("envsnap: error:")] == [
        f"envsnap: error: local: the agent's output is refused: {where}: expected a mapping, "
        f"got {kind}; nothing saved"]
    assert stored(cli) == []
