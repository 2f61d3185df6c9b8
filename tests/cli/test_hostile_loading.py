"""Hostile snapshot files through the real CLI: every one is refused with one line, exit 4,
within 2 s and 200 MB, by every command that reads a snapshot (show, diff, restore --check,
report, bisect).

Each child's time and peak memory are its own (os.wait4), so the bounds are measured, not
assumed. Before the hardening a billion-laughs file took `diff` 27 s and 2 GB to a
MemoryError, and `report` ran on past 30 s.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from conftest import Cli

MAX_SECONDS = 2.0
MAX_PEAK_MB = 200.0


@dataclass
class Measured:
    returncode: int
    stderr: str
    seconds: float
    peak_mb: float


def measured(cli: Cli, *args: str, env: dict[str, str] | None = None) -> Measured:
    """The real `envsnap` with its own rusage; killed at 60 s (old code ran on for minutes)."""
    stderr_path = cli.cwd / f"stderr-{time.monotonic_ns()}"
    with stderr_path.open("w") as stderr:
        started = time.monotonic()
        process = subprocess.Popen([sys.executable, "-m", "envsnap", *args], cwd=cli.cwd,
                                   env={**cli.env, **(env or {})}, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=stderr)
        killer = threading.Timer(60, process.kill)
        killer.start()
        try:
            _, status, usage = os.wait4(process.pid, 0)
        finally:
            killer.cancel()
        seconds = time.monotonic() - started
    process.returncode = os.waitstatus_to_exitcode(status)   # reaped here, not by Popen
    return Measured(process.returncode, stderr_path.read_text(), seconds,
                    usage.ru_maxrss / 1024)


def billion_laughs(path: Path) -> Path:
    """1 KB on disk, 10^9 strings once its aliases are followed; in a section that diff,
    report and the digests walk."""
    lines = ["schema: 1", "meta: {label: x, host: local, captured_at: '2026-01-01'}",
             "facts:", "  custom:", '    a0: &a0 ["lol","lol","lol","lol","lol","lol","lol",'
             '"lol","lol","lol"]']
    lines += [f"    a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 10)]
    path.write_text("\n".join(lines) + "\n")
    return path


def merge_key_bomb(path: Path) -> Path:
    """The same through merge keys: each level merges the one before ten times."""
    lines = ["schema: 1", "meta: {label: x, host: local, captured_at: '2026-01-01'}",
             "facts:", "  custom:", "    m0: &m0 {" + ", ".join(f"k{i}: {i}" for i in range(10))
             + "}"]
    lines += [f"    m{i}: &m{i} {{<<: [" + ", ".join([f"*m{i - 1}"] * 10) + "]}"
              for i in range(1, 12)]
    path.write_text("\n".join(lines) + "\n")
    return path


def oversize(path: Path) -> Path:
    """One byte over the 64 MiB default cap, sparse: its size costs no disk."""
    with path.open("wb") as out:
        out.write(b"schema: 1\n")
        out.truncate((64 << 20) + 1)
    return path


def deeply_nested_yaml(path: Path) -> Path:
    """Deep enough to overflow whatever walks it recursively (a report, a digest), shallow
    enough for the YAML parser: valid YAML, no snapshot."""
    path.write_text("schema: 1\nmeta: {label: x, host: local, captured_at: '2026-01-01'}\n"
                    "facts: {custom: {x: " + "[" * 500 + "]" * 500 + "}}\n")
    return path


def deeply_nested_json(path: Path) -> Path:
    path.write_text('{"schema": 1, "meta": {"label": "x", "host": "local", "captured_at": '
                    '"2026-01-01"}, "facts": {"custom": {"x": ' + "[" * 900 + "]" * 900
                    + "}}}")
    return path


HOSTILE = {
    "billion-laughs.yaml": (billion_laughs, "aliases (*name) are not allowed"),
    "merge-bomb.yaml": (merge_key_bomb, "merge keys (<<) are not allowed"),
    "oversize.yaml": (oversize, "larger than 64 MiB, refused unread"),
    "nested.yaml": (deeply_nested_yaml, 'facts.custom["x"]: nested more than 32 levels deep'),
    "nested.json": (deeply_nested_json, 'facts.custom["x"]: nested more than 32 levels deep'),
}
COMMANDS = {
    "show": lambda file: ["show", file],
    "diff": lambda file: ["diff", file, file],
    "restore --check": lambda file: ["restore", file, "--check"],
    "report": lambda file: ["report", file, "-o", "report.md"],
    "bisect": lambda file: ["bisect", file, file, "--cmd", "true", "--metric", "x"],
    "explain": lambda file: ["explain", file, file, "--cmd", "true", "--metric", "x"],
}


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_file_is_one_line_exit_4_fast_and_small(cli: Cli, name: str,
                                                         command: str) -> None:
    make, reason = HOSTILE[name]
    path = make(cli.cwd / name)
    result = measured(cli, *COMMANDS[command](str(path)))
    assert result.returncode == 4, result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("envsnap: error: "), \
        result.stderr
    assert reason in result.stderr and str(path) in result.stderr
    assert result.seconds < MAX_SECONDS, f"{result.seconds:.2f} s"
    assert result.peak_mb < MAX_PEAK_MB, f"{result.peak_mb:.0f} MB"
    assert not (cli.cwd / "report.md").exists()


def small_snapshot(padding: int) -> dict[str, object]:
    return {"schema": 1, "meta": {"label": "x", "host": "local", "captured_at": "2026-01-01"},
            "facts": {"custom": {"padding": "p" * padding}}}


def test_the_cap_is_raised_by_an_environment_variable(cli: Cli) -> None:
    path = cli.cwd / "two-mb.yaml"
    path.write_text(yaml.safe_dump(small_snapshot(2 << 20)))
    refused = measured(cli, "show", str(path), env={"ENVSNAP_MAX_SNAPSHOT_MB": "1"})
    assert refused.returncode == 4
    assert "larger than 1 MiB, refused unread" in refused.stderr
    assert "ENVSNAP_MAX_SNAPSHOT_MB" in refused.stderr
    raised = measured(cli, "show", str(path), env={"ENVSNAP_MAX_SNAPSHOT_MB": "3"})
    assert raised.returncode == 0, raised.stderr
    bad = measured(cli, "show", str(path), env={"ENVSNAP_MAX_SNAPSHOT_MB": "lots"})
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr
    assert "ENVSNAP_MAX_SNAPSHOT_MB='lots'" in bad.stderr


def test_envsnap_writes_no_aliases_and_reads_what_it_writes(cli: Cli) -> None:
    # An object met twice in a document (a shared dict) was written as &id001 / *id001,
    # which loading now refuses: the writer must spell it out.
    from envsnap.snapshot.store import Store

    shared = {"sm_mhz": [1980.0, 1980.0]}
    document = small_snapshot(1)
    document["facts"] = {"custom": {"first": shared, "second": shared}}
    store = Store(cli.env["ENVSNAP_STORE"])
    path = store.save(document, "shared")
    assert "&id" not in path.read_text() and "*id" not in path.read_text()
    shown = cli("show", "shared", "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["facts"]["custom"]["second"] == shared
