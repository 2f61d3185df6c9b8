"""`envsnap bench` through the real CLI, on `local` and over a real sshd, and the rerun."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest
import yaml
from conftest import Cli
from helpers.benchscript import write_bench
from helpers.procwatch import processes_with, soon
from helpers.sshd import Sshd

from envsnap.bench import run as bench
from envsnap.errors import SnapshotError, UsageError
from envsnap.hosts.capture import CaptureOptions
from envsnap.hosts.inventory import parse_host_spec
from envsnap.snapshot import document as snapshot
from envsnap.snapshot.store import Store

METRIC = r"gen throughput \(token/s\): ([0-9.]+)"

def saved(cli: Cli) -> list[Path]:
    return sorted(Path(cli.env["ENVSNAP_STORE"]).rglob("*.yaml"))


def load(cli: Cli, label: str) -> dict:
    return yaml.safe_load((Path(cli.env["ENVSNAP_STORE"]) / f"{label}.yaml").read_text())


def test_bench_local_saves_the_runs_in_the_snapshot(cli: Cli, tmp_path: Path) -> None:
    cmd = write_bench(tmp_path / "b")
    result = cli("bench", "local", "--cmd", cmd, "--metric", METRIC, "--repeat", "5",
                 "--label", "good-bench")
    assert result.returncode == 0, result.stderr
    document = load(cli, "good-bench")
    record = document["bench"]
    assert record["values"] == [91.0, 91.7, 92.4, 93.1, 93.8]
    assert all(isinstance(value, float) for value in record["values"])
    assert record["summary"]["median"] == 92.4 and record["summary"]["n"] == 5
    assert record["summary"]["spread"] == pytest.approx(2.8 / 92.4)
    assert record["command"] == cmd and record["metric"] == METRIC
    assert record["lower_is_better"] is False and record["cwd"] == str(cli.cwd)
    assert [run["run"] for run in record["runs"]] == [1, 2, 3, 4, 5]
    assert all(run["seconds"] > 0 and run["exit_code"] == 0 for run in record["runs"])
    assert record["runs"][0]["output_tail"].endswith("shutting down\n")
    assert record["telemetry"]["available"] is False and record["telemetry"]["reason"]
    assert record["started_at"] <= record["finished_at"]
    # the snapshot it ran on is the same document, and it is a valid snapshot
    assert document["meta"]["label"] == "good-bench" and "nvidia" in document["facts"]
    assert "bench" not in document["facts"] and "bench" not in document["digests"]
    assert cli("show", "good-bench", "--json").returncode == 0
    lines = result.stdout.splitlines()
    assert lines[0].split()[:3] == ["run", "value", "seconds"]
    assert lines[3].split()[:2] == ["3", "92.4"]
    assert "median 92.4  min 91  max 93.8  spread 3.0%" in result.stdout
    assert "saved good-bench" in result.stdout


def test_bench_over_ssh(ssh_cli: Cli, sshd: Sshd, tmp_path: Path) -> None:
    cmd = write_bench(tmp_path / "b")
    result = ssh_cli("bench", sshd.addresses[0], "--cmd", cmd, "--metric", METRIC,
                     "--repeat", "3", "--label", "remote", "--cwd", str(tmp_path),
                     "--lower-is-better")
    assert result.returncode == 0, result.stderr
    document = load(ssh_cli, "remote")
    assert document["meta"]["address"] == sshd.addresses[0]
    assert document["bench"]["values"] == [91.0, 91.7, 92.4]
    assert document["bench"]["cwd"] == str(tmp_path)
    assert document["bench"]["lower_is_better"] is True
    assert "lower is better" in result.stdout


@pytest.mark.parametrize("over_ssh", [False, True], ids=["local", "ssh"])
@pytest.mark.parametrize("stopped_by", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "kill-9"])
def test_a_stopped_bench_leaves_no_benchmark_running(request: pytest.FixtureRequest,
                                                     over_ssh: bool, stopped_by: int) -> None:
    # A ten-minute benchmark on shared GPUs must not outlive the person who gave up on it:
    # Ctrl-C ends `envsnap bench` at once, and a killed controller or dropped connection
    # (the agent's stdin lifeline ends) stops the run on the host too.
    cli: Cli = request.getfixturevalue("ssh_cli" if over_ssh else "cli")
    host = request.getfixturevalue("sshd").addresses[0] if over_ssh else "local"
    marker = f"envsnap-long-benchmark-{uuid.uuid4().hex[:8]}"
    command = f"{sys.executable} -c 'import time; time.sleep(600)' {marker}"
    controller = subprocess.Popen(
        [sys.executable, "-m", "envsnap", "bench", host, "--cmd", command, "--metric", METRIC,
         "--repeat", "3", "--sample-interval", "0"], cwd=cli.cwd, env=cli.env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert soon(lambda: bool(processes_with(marker, controller.pid)), 60), \
            "the benchmark never started"
        os.kill(controller.pid, stopped_by)
        controller.wait(timeout=20)
        if stopped_by == signal.SIGINT:
            assert controller.returncode == 130
        assert soon(lambda: not processes_with(marker, controller.pid), 20), \
            "the benchmark outlived its controller"
    finally:
        controller.kill()
        controller.communicate()
        for pid in processes_with(marker, controller.pid):
            os.kill(pid, signal.SIGKILL)


# Run 1 ends at once; run 2 waits until the test, having seen run 1 reported, says go.
WAITER = """\
import pathlib, sys, time
here = pathlib.Path(sys.argv[0]).parent
counter = here / "counter"
n = int(counter.read_text()) if counter.exists() else 0
counter.write_text(str(n + 1))
while n and not (here / "go").exists():
    time.sleep(0.05)
print("gen throughput (token/s): %d" % (90 + n))
"""


@pytest.mark.parametrize("over_ssh", [False, True], ids=["local", "ssh"])
def test_each_run_is_reported_as_it_ends(request: pytest.FixtureRequest, over_ssh: bool,
                                         tmp_path: Path) -> None:
    cli: Cli = request.getfixturevalue("ssh_cli" if over_ssh else "cli")
    host = request.getfixturevalue("sshd").addresses[0] if over_ssh else "local"
    (tmp_path / "waiter.py").write_text(WAITER)
    controller = subprocess.Popen(
        [sys.executable, "-m", "envsnap", "bench", host, "--cmd",
         f"{sys.executable} {tmp_path / 'waiter.py'}", "--metric", METRIC, "--repeat", "2",
         "--sample-interval", "0"], cwd=cli.cwd, env=cli.env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        stream = controller.stderr
        assert stream is not None
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.append(stream.readline()), daemon=True)
        reader.start()
        reader.join(30)   # the line must come while run 2 still waits
        (tmp_path / "go").touch()
        assert lines, "run 1 was not reported before the benchmark ended"
        assert lines[0].startswith(f"{host}: run 1 of 2: ")
        assert lines[0].endswith(", exit 0, metric 90\n"), lines[0]
        out, err = controller.communicate(timeout=60)
    finally:
        controller.kill()
        controller.communicate()
    assert controller.returncode == 0, err
    assert err.startswith(f"{host}: run 2 of 2: ") and "metric 91" in err
    assert "median 90.5" in out


def test_a_failing_run_is_one_clear_line_and_nothing_is_saved(cli: Cli, tmp_path: Path) -> None:
    cmd = write_bench(tmp_path / "b")
    (tmp_path / "b" / "fail_at").write_text("2")
    result = cli("bench", "local", "--cmd", cmd, "--metric", METRIC, "--label", "x")
    assert result.returncode == 3
    *progress, error = result.stderr.splitlines()
    assert error == ("envsnap: error: benchmark run 2 of 5 exited 2; last output "
                     "line: RuntimeError: CUDA error: an illegal memory access")
    first, second = progress  # each run reported as it ended, the error line last
    assert first.startswith("local: run 1 of 5: ") and first.endswith(", exit 0, metric 91.0")
    assert second.startswith("local: run 2 of 5: ") and second.endswith(", exit 2")
    assert saved(cli) == []
    assert (tmp_path / "b" / "counter").read_text() == "2"   # the runs after it were skipped


def test_output_without_the_metric_is_a_clear_error(cli: Cli, tmp_path: Path) -> None:
    cmd = write_bench(tmp_path / "b")
    result = cli("bench", "local", "--cmd", cmd, "--metric", r"tok/s=([0-9.]+)")
    assert result.returncode == 3
    *progress, error = result.stderr.splitlines()
    assert "benchmark run 1 of 5: no match for --metric 'tok/s=([0-9.]+)' in its output; " \
           "last output line: shutting down" in error
    (first,) = progress
    assert first.startswith("local: run 1 of 5: ") and first.endswith(", exit 0")
    assert saved(cli) == []


@pytest.mark.parametrize("printed, why", [("n/a", "'n/a', not a number"),
                                          ("nan", "'nan', not a finite number"),
                                          ("inf", "'inf', not a finite number")])
def test_a_metric_that_is_no_finite_number_fails_at_the_first_run(cli: Cli, tmp_path: Path,
                                                                  printed: str,
                                                                  why: str) -> None:
    runs = tmp_path / "runs"
    result = cli("bench", "local", "--cmd", f"echo run >> {runs}; echo 'speed: {printed}'",
                 "--metric", r"speed: (\S+)", "--repeat", "4", "--label", "x")
    assert result.returncode == 3, result.stderr
    *progress, error = result.stderr.splitlines()
    assert error == (f"envsnap: error: benchmark run 1 of 4: the metric regex matched {why}; "
                     f"last output line: speed: {printed}")
    assert len(progress) == 1 and progress[0].endswith(f", exit 0, metric {printed}")
    assert runs.read_text() == "run\n"        # the three runs after it were never started
    assert saved(cli) == []


def test_a_run_past_its_timeout_is_killed_and_reported(cli: Cli) -> None:
    result = cli("bench", "local", "--cmd", "echo starting; sleep 30", "--metric", "x",
                 "--run-timeout", "0.5", timeout=20)
    assert result.returncode == 3
    assert "benchmark run 1 of 5 timed out after 0.5" in result.stderr
    assert "last output line: starting" in result.stderr and saved(cli) == []


def test_a_missing_cwd_is_reported_and_nothing_saved(cli: Cli, tmp_path: Path) -> None:
    result = cli("bench", "local", "--cmd", "true", "--metric", "x",
                 "--cwd", str(tmp_path / "absent"))
    assert result.returncode == 3 and "does not exist on the host" in result.stderr
    assert saved(cli) == []


def test_invalid_regex_is_refused_before_any_host_is_contacted(cli: Cli) -> None:
    result = cli("bench", "root@127.0.0.1:1", "--cmd", "true", "--metric", "tok/s: ([0-9.]+")
    assert result.returncode == 2
    assert "invalid --metric regex 'tok/s: ([0-9.]+'" in result.stderr
    assert "unreachable" not in result.stderr


def test_bad_repeat_is_a_usage_error(cli: Cli) -> None:
    result = cli("bench", "local", "--cmd", "true", "--metric", "x", "--repeat", "0")
    assert result.returncode == 2
    assert "argument --repeat: '0' is not a whole number of at least 1" in result.stderr


def test_regex_without_a_group_uses_the_whole_match(cli: Cli, tmp_path: Path) -> None:
    cmd = write_bench(tmp_path / "b")
    result = cli("bench", "local", "--cmd", cmd, "--metric", r"(?m)[0-9]+\.[0-9]+$",
                 "--repeat", "2", "--label", "whole")
    assert result.returncode == 0, result.stderr
    assert load(cli, "whole")["bench"]["values"] == [91.0, 91.7]


def test_an_existing_label_is_refused_before_running(cli: Cli, tmp_path: Path) -> None:
    cmd = write_bench(tmp_path / "b")
    assert cli("capture", "local", "--label", "taken").returncode == 0
    result = cli("bench", "local", "--cmd", cmd, "--metric", METRIC, "--label", "taken")
    assert result.returncode == 2 and "already exists" in result.stderr
    assert not (tmp_path / "b" / "counter").exists()
    assert "bench" not in load(cli, "taken")


def test_rerun_and_compare_gives_a_verdict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                           ) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    cmd = write_bench(tmp_path / "b")
    store = Store(tmp_path / "store")
    host = parse_host_spec("local")
    spec = bench.BenchSpec(cmd=cmd, metric=METRIC, repeat=5, sample_interval=0)
    outcome = bench.capture_and_bench(host, spec, store, CaptureOptions(label="good"))
    document = store.load("good")
    assert document["bench"]["values"] == outcome.record["values"]

    (tmp_path / "b" / "base").write_text("60")   # the STORY: 94 tok/s became 60
    record, verdict = bench.rerun_and_compare(document, host)
    assert record["values"] == [60.0, 60.7, 61.4, 62.1, 62.8]
    assert verdict["verdict"] == "regression" and verdict["p_value"] < 0.01

    (tmp_path / "b" / "base").write_text("91")
    assert bench.rerun_and_compare(document, host)[1]["verdict"] == "same"


def test_rerun_needs_a_recorded_benchmark() -> None:
    host = parse_host_spec("local")
    with pytest.raises(UsageError, match="'plain' has no recorded benchmark"):
        bench.rerun_and_compare({"meta": {"label": "plain"}, "facts": {}}, host)


def test_snapshot_validation_checks_the_bench_section() -> None:
    document = {"schema": 1, "meta": {}, "facts": {}, "bench": {"values": [1.0, 2]}}
    assert snapshot.validate(document, "a.yaml") is document
    with pytest.raises(SnapshotError, match=r"a.yaml: bench.values\[0\]: expected a number, got a"):
        snapshot.validate(dict(document, bench={"values": ["fast"]}), "a.yaml")


@pytest.mark.parametrize(("option", "value"), [("--cmd", "echo \udcff 1"), ("--cwd", "/\udcff")])
def test_a_command_or_folder_that_is_not_utf8_is_refused_before_any_run(
        cli: Cli, option: str, value: str) -> None:
    # The runs went ahead and the snapshot's YAML then failed on it: an internal error.
    args = {"--cmd": "echo 1", "--metric": "(1)", "--repeat": "1", option: value}
    result = cli("bench", "local", *[word for pair in args.items() for word in pair])
    assert result.returncode == 2
    assert result.stderr.endswith(f"envsnap: error: argument {option}: {value!r} is not "
                                  "UTF-8 text\n")
    assert not (cli.cwd / "store").exists()


def test_a_metric_regex_that_python_cannot_compile_is_a_usage_error(cli: Cli) -> None:
    # re.compile raises OverflowError, not re.error, for a repetition this large: exit 70 once.
    result = cli("bench", "local", "--cmd", "echo 1", "--metric", r"\d{99999999999}")
    assert result.returncode == 2
    assert result.stderr.endswith("envsnap: error: invalid --metric regex '\\\\d{99999999999}': "
                                  "the repetition number is too large\n")
