"""Short GPU phases on a real H200 (tests/data/h200-telemetry/, recorded by
tests/data/record_telemetry.py, issue 14): a benchmark whose only GPU work is a 0.2 s bf16
matmul burst, polled every 0.2 s. Utilization never reads busy around such a burst; the
driver's buffered power samples (every ~20 ms) do, and the clocks read inside that phase
are the ones shown."""
from __future__ import annotations

import json
from typing import Any

import yaml
from conftest import Cli
from helpers.paths import DATA

from envsnap.bench import run as bench

RECORDING = DATA / "h200-telemetry"
BURST = RECORDING / "snapshots" / "burst.yaml"


def record() -> dict[str, Any]:
    return dict(yaml.safe_load(BURST.read_text())["bench"])


def test_the_driver_buffers_power_every_20_ms_and_utilization_every_200_ms() -> None:
    probe = json.loads((RECORDING / "nvml_samples.json").read_text())
    assert 15 <= probe["NVML_TOTAL_POWER_SAMPLES"]["median_spacing_ms"] <= 25
    assert 150 <= probe["NVML_GPU_UTILIZATION_SAMPLES"]["median_spacing_ms"] <= 250
    assert "NotFound" in probe["NVML_PROCESSOR_CLK_SAMPLES"]["error"]
    # the timestamps are the CPU's epoch in microseconds: the sampler aligns them on that
    assert abs(probe["NVML_GPU_UTILIZATION_SAMPLES"]["first_minus_wall_s"]) < 1


def test_a_burst_shorter_than_the_polling_shows_its_busy_clocks() -> None:
    runs = record()["runs"]
    unseen = [run for run in runs
              if max(next(iter(run["samples"].values()))["util_gpu_pct"]) < 50]
    assert len(runs) == 3 and unseen, "in some runs utilization never read busy"
    for run in runs:
        (gpu,) = run["gpus"].values()
        assert gpu["power_busy"]["phases"] >= 1 and 0.05 < gpu["power_busy"]["seconds"] < 0.4
        assert gpu["busy"]["samples"] >= 1, "a reading fell inside the busy phase"
        clocks = bench.sm_clock_text(run["gpus"])
        assert clocks.replace("-", "").isdigit() and int(clocks.split("-")[0]) > 1000, clocks
        (buffered,) = run["buffered"].values()
        assert len(buffered["t"]) > 250 and 0 <= buffered["t"][0] < buffered["t"][-1]
    assert "idle" not in (RECORDING / "bench_burst.txt").read_text()


def test_the_report_says_the_clocks_are_those_under_load(cli: Cli) -> None:
    result = cli("report", str(BURST))
    assert result.returncode == 0, result.stderr
    assert "SM clock median" in result.stdout and "while busy" in result.stdout
