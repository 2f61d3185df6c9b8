"""Patterns that cannot hang: --proc patterns and the --metric regex, on the controller and on
the host (agent/patterns.py).

A pattern that backtracks catastrophically is refused with one line before anything runs
(exit 2 from the command line, exit 4 from a snapshot); one that passes the check but still
backtracks on a long line (`.*.*.*...`) is stopped by a time budget, one line again. Before,
`(a|aa)*b` hung the controller past --run-timeout and a crafted snapshot's procs pattern
kept the agent at 100% CPU on the host.
"""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import Cli, sleeping_worker, unique_marker

from envsnap.agent import benchrun, env, patterns

PATHOLOGICAL = [r"(a+)+$", r"(a|aa)*b", r"(.*a){20}", r"(x+x+)+y", r"((ab)*c)+",
                r"(?:\s|\S)*x", r"(a)\1", r"(?P<x>a)(?P=x)", r"(a)?(?(1)a|b)", "a" * 1001]
ORDINARY = [r"python.*sglang", "torchrun", r"busbw\s+([0-9.]+)", r"([0-9.]+) tok/s",
            r"launch_server.*--tp \d", r"\d+\.\d+(?= ms)", r"(?i)SGLang", r"(prefill|decode)",
            r"(foo|bar)?baz", r"[(]+x", r"(?:ab){3}", r"(\d+)?\.\d+"]
# Passes the syntax check, yet polynomial: about n^9 steps on a line of n letters.
POLYNOMIAL = ".*.*.*.*.*.*.*.*="
BOUND_SECONDS = 30   # the budget is 2 s a match; a hang was unbounded


def one_error(result: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in result.stderr.splitlines() if line.startswith("envsnap: error:")]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


@pytest.mark.parametrize("pattern", PATHOLOGICAL)
def test_a_pathological_pattern_is_refused_on_both_sides(pattern: str) -> None:
    assert patterns.regex_problem(pattern) is not None
    with pytest.raises(patterns.PatternRefused):
        env.compile_patterns([pattern])          # the host refuses it, whoever sent it


@pytest.mark.parametrize("pattern", ORDINARY)
def test_ordinary_patterns_are_allowed(pattern: str) -> None:
    assert patterns.regex_problem(pattern) is None
    assert env.compile_patterns([pattern])[0][1] is not None


def test_matching_under_the_budget_gives_what_re_gives() -> None:
    lines = ["python -m sglang.launch_server --tp 8", "torchrun --nproc 8 train.py", "bash"]
    compiled = [patterns.checked(p) for p in (r"python.*sglang", "torchrun", r"--tp (\d)")]
    assert patterns.search_lines(compiled, lines) == [[0], [1], [0]]
    text = "busbw 10.5\nwarm-up\nbusbw 371.2\n"
    assert patterns.last_match(patterns.checked(r"busbw\s+([0-9.]+)"), text) == "371.2"
    assert patterns.last_match(patterns.checked(r"\d+\.\d+"), text) == "371.2"
    assert patterns.last_match(patterns.checked(r"tok/s\s+(\d+)"), text) is None


def test_the_budget_stops_a_polynomial_match() -> None:
    started = time.monotonic()
    with pytest.raises(patterns.PatternTimeout, match="took more than 0.5s"):
        patterns.search_lines([patterns.checked(POLYNOMIAL)], ["a" * 3000], budget=0.5)
    assert time.monotonic() - started < 10


def test_the_host_refuses_a_refused_metric_before_any_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    out = benchrun.run_bench({"mode": "bench", "cmd": f"touch {marker}", "repeat": 1,
                              "cwd": str(tmp_path), "metric": r"(a|aa)*b",
                              "sample_interval": 0})
    assert "refused" in out["error"] and out["runs"] == [] and not marker.exists()


@pytest.mark.parametrize("pattern", [r"(a+)+$", r"(a|aa)*b", r"(.*a){20}"])
def test_capture_refuses_a_pathological_proc_pattern(cli: Cli, pattern: str) -> None:
    result = cli("capture", "local", "--proc", pattern, "--label", "x", timeout=60)
    assert result.returncode == 2
    line = one_error(result)
    assert pattern in line and "refused" in line and "docs/guide/capture.md#patterns" in line
    assert not list(Path(cli.env["ENVSNAP_STORE"]).rglob("*.yaml"))


@pytest.mark.parametrize("pattern", [r"(a+)+$", r"(a|aa)*b", r"(.*a){20}"])
def test_bench_refuses_a_pathological_metric_before_running(cli: Cli, pattern: str) -> None:
    marker = cli.cwd / "ran"
    result = cli("bench", "local", "--cmd", f"touch {marker}; echo {'a' * 40}",
                 "--metric", pattern, "--repeat", "1", timeout=60)
    assert result.returncode == 2
    assert "--metric regex" in one_error(result) and "refused" in one_error(result)
    assert not marker.exists()


def test_a_polynomial_metric_times_out_in_one_line(cli: Cli) -> None:
    started = time.monotonic()
    result = cli("bench", "local", "--cmd", f"{sys.executable} -c 'print(\"a\" * 3000)'",
                 "--metric", POLYNOMIAL, "--repeat", "1", timeout=120)
    assert time.monotonic() - started < BOUND_SECONDS
    assert result.returncode == 2, result.stderr
    assert "took more than 2s" in one_error(result)


def test_a_polynomial_proc_pattern_does_not_spin_the_agent(cli: Cli) -> None:
    # A worker whose command line is long: the pattern backtracks on it for hours.
    marker = unique_marker("long-cmdline") + "a" * 3000
    with sleeping_worker(marker, {}):
        started = time.monotonic()
        result = cli("capture", "local", "--proc", POLYNOMIAL, "--label", "x", timeout=120)
        seconds = time.monotonic() - started
    assert seconds < BOUND_SECONDS
    assert result.returncode == 3, result.stderr
    warning = [line for line in result.stderr.splitlines() if "local: env:" in line]
    assert len(warning) == 1 and "took more than 2s (it backtracks)" in warning[0]


def crafted(path: Path, **changes: object) -> Path:
    document: dict[str, object] = {
        "schema": 1, "facts": {},
        "meta": {"label": "crafted", "host": "local", "captured_at": "2026-01-01T00:00:00",
                 "config": {"procs": ["sglang"]}}}
    document.update(changes)
    path.write_text(yaml.safe_dump(document))
    return path


@pytest.mark.parametrize("command", [["restore", "--check"], ["show"]])
def test_a_snapshot_with_a_pathological_procs_pattern_is_invalid(cli: Cli,
                                                                 command: list[str]) -> None:
    path = crafted(cli.cwd / "evil.yaml", meta={
        "label": "evil", "host": "local", "captured_at": "2026-01-01T00:00:00",
        "config": {"procs": [r"(a+)+$"]}})
    started = time.monotonic()
    result = cli(command[0], str(path), *command[1:], timeout=60)
    assert time.monotonic() - started < BOUND_SECONDS
    assert result.returncode == 4, result.stderr
    line = one_error(result)
    assert "meta.config.procs[0]: refused '(a+)+$'" in line


def test_a_snapshot_with_a_pathological_bench_metric_is_invalid(cli: Cli) -> None:
    path = crafted(cli.cwd / "evil.yaml", bench={"values": [1.0], "command": "true",
                                                 "metric": r"(.*a){20}"})
    result = cli("restore", str(path), "--rerun", "--check", timeout=60)
    assert result.returncode == 4, result.stderr
    assert "bench.metric: refused '(.*a){20}'" in one_error(result)
