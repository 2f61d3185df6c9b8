"""The agent's bench mode: runs, output tails, timeouts, early stops, telemetry sampling.

There is no GPU in CI: the sampler is driven by a fake pynvml with the readings an H200
gives (same function names, values and units as the real module).
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from helpers.paths import DATA

from envsnap.agent import benchpcie, benchrun, benchsample, nvml_reader
from envsnap.bench import run as bench

PY = sys.executable


class FakeNvml:
    """Just enough of pynvml: two H200s, one without PCIe byte counters."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0
    NVML_FI_DEV_PCIE_COUNT_TX_BYTES, NVML_FI_DEV_PCIE_COUNT_RX_BYTES = 197, 198
    NVML_PCIE_UTIL_TX_BYTES, NVML_PCIE_UTIL_RX_BYTES = 0, 1

    class NVMLError(Exception):
        pass

    def __init__(self) -> None:
        self.bytes = 0
        self.shut = False

    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        self.shut = True

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetPciInfo(self, handle: int) -> dict[str, str]:
        return {"busId": "00000000:%02X:00.0" % (0x19 + handle)}

    def nvmlDeviceGetName(self, handle: int) -> str:
        return "NVIDIA H200"

    def nvmlDeviceGetClockInfo(self, handle: int, clock: int) -> int:
        return 1980 if clock == self.NVML_CLOCK_SM else 3201

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: int) -> int:
        return 0x4 if handle == 0 else 0x1   # sw_power_cap on GPU 0, idle GPU 1

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        return 650_123

    def nvmlDeviceGetTemperature(self, handle: int, sensor: int) -> int:
        if handle == 1:
            raise self.NVMLError("Not Supported")
        return 45

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> dict[str, int]:
        return {"gpu": 99, "memory": 40}

    def nvmlDeviceGetFieldValues(self, handle: int, ids: list[int]) -> list[Any]:
        if handle == 1:
            raise self.NVMLError("Not Supported")
        self.bytes += 1 << 20
        return [SimpleNamespace(nvmlReturn=0, value=SimpleNamespace(ullVal=self.bytes * 2)),
                SimpleNamespace(nvmlReturn=0, value=SimpleNamespace(ullVal=self.bytes))]

    def nvmlDeviceGetPcieThroughput(self, handle: int, counter: int) -> int:
        return 700 + counter


@pytest.fixture
def fake_gpus(monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    nvml = FakeNvml()
    monkeypatch.setattr(nvml_reader, "load_nvml", lambda: (nvml, None))
    return nvml


def run_bench(cmd: str, **config: Any) -> dict[str, Any]:
    return benchrun.run_bench({"cmd": cmd, "repeat": 3, "sample_interval": 0, **config})


def test_runs_record_exit_seconds_and_merged_output(tmp_path: Path) -> None:
    # flushed, so the bytes reach the pipe in the order the lines are printed
    result = run_bench(f"{PY} -c \"import sys; print('tok 1', flush=True); "
                       f"print('oops', file=sys.stderr)\"",
                       cwd=str(tmp_path))
    assert result["error"] is None and result["stopped"] is None
    assert [run["run"] for run in result["runs"]] == [1, 2, 3]
    run = result["runs"][0]
    assert run["exit_code"] == 0 and not run["timed_out"] and run["seconds"] > 0
    assert run["output_tail"] == "tok 1\noops\n"
    assert result["cwd"] == str(tmp_path)
    assert result["telemetry"] == {"available": False, "reason": "sampling disabled"}


def test_the_command_runs_in_cwd_with_stdin_closed(tmp_path: Path) -> None:
    result = run_bench("pwd; cat; echo end", cwd=str(tmp_path), repeat=1)
    assert result["runs"][0]["output_tail"] == f"{tmp_path}\nend\n"


def test_output_tail_is_capped_and_keeps_the_end() -> None:
    result = run_bench(f"{PY} -c \"print('x' * 300000); print('metric: 93.1')\"", repeat=1)
    run = result["runs"][0]
    assert len(run["output_tail"]) == benchrun.TAIL_BYTES
    assert run["output_tail"].endswith("metric: 93.1\n") and run["output_bytes"] > 300000


def test_non_zero_exit_stops_the_runs() -> None:
    result = run_bench("echo broken; exit 3")
    assert len(result["runs"]) == 1 and result["runs"][0]["exit_code"] == 3
    assert result["stopped"] == "run 1 exited 3"


def test_no_metric_match_stops_the_runs() -> None:
    result = run_bench("echo nothing here", metric=r"tok/s: ([0-9.]+)")
    assert len(result["runs"]) == 1 and result["stopped"] == "run 1 printed no metric"


@pytest.mark.parametrize("printed, why", [("n/a", "'n/a', not a number"),
                                          ("nan", "'nan', not a finite number"),
                                          ("-inf", "'-inf', not a finite number")])
def test_a_metric_that_is_no_finite_number_stops_the_runs(printed: str, why: str) -> None:
    result = run_bench(f"echo 'tok/s: {printed}'", metric=r"tok/s: (\S+)")
    assert len(result["runs"]) == 1
    assert result["stopped"] == f"run 1: the metric regex matched {why}"


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    marker = tmp_path / "survived"
    started = time.monotonic()
    result = run_bench(f"(sleep 2; touch {marker}) & sleep 30", repeat=1, timeout=0.5)
    run = result["runs"][0]
    assert run["timed_out"] and run["exit_code"] < 0 and time.monotonic() - started < 10
    time.sleep(2.5)
    assert not marker.exists()   # the background child died with the run


def test_missing_cwd_is_an_error_not_a_crash(tmp_path: Path) -> None:
    result = run_bench("true", cwd=str(tmp_path / "absent"))
    assert "does not exist" in result["error"] and result["runs"] == []


def test_no_nvml_means_no_samples_and_a_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nvml_reader, "load_nvml", lambda: (None, "libnvidia-ml.so.1 missing"))
    result = run_bench("true", repeat=1, sample_interval=0.2)
    assert result["telemetry"] == {"available": False, "reason": "libnvidia-ml.so.1 missing"}
    assert "gpus" not in result["runs"][0]


def test_sampling_during_runs_with_fake_gpus(fake_gpus: FakeNvml) -> None:
    result = run_bench("sleep 0.35", repeat=2, sample_interval=0.05)
    telemetry = result["telemetry"]
    assert telemetry["available"] and telemetry["sample_interval"] == 0.05
    assert telemetry["gpus"]["00000000:19:00.0"] == {"index": 0, "name": "NVIDIA H200",
                                                     "pcie_source": "counters"}
    assert telemetry["gpus"]["00000000:1A:00.0"]["pcie_source"] == "throughput"
    gpu0 = result["runs"][1]["gpus"]["00000000:19:00.0"]
    assert gpu0["samples"] >= 4
    assert gpu0["sm_mhz"] == {"min": 1980, "median": 1980, "max": 1980}
    assert gpu0["power_w"]["median"] == 650.1 and gpu0["temp_c"]["max"] == 45
    assert gpu0["clock_event_reasons"] == {"sw_power_cap": gpu0["samples"]}
    assert gpu0["pcie_rx_kbs"]["min"] > 0 and gpu0["pcie_tx_kbs"]["min"] > 0
    gpu1 = result["runs"][1]["gpus"]["00000000:1A:00.0"]
    assert gpu1["temp_c"] is None and gpu1["errors"] == {"temp_c": "Not Supported"}
    assert gpu1["pcie_rx_kbs"]["max"] == 701   # the blocking call, GPUs in turn
    sampler = result["runs"][1]["sampler"]
    assert sampler["ticks"] == gpu0["samples"] and sampler["cpu_seconds"] >= 0
    samples = result["runs"][0]["samples"]["00000000:19:00.0"]
    assert samples["t"][0] == pytest.approx(0, abs=0.05) and samples["sm_mhz"][0] == 1980
    assert fake_gpus.shut


def test_raw_samples_are_thinned_but_summaries_use_all(fake_gpus: FakeNvml) -> None:
    result = run_bench("sleep 0.4", repeat=1, sample_interval=0.01, max_samples=5)
    run = result["runs"][0]
    assert len(run["samples"]["00000000:19:00.0"]["t"]) <= 5
    assert run["gpus"]["00000000:19:00.0"]["samples"] > 10


def test_controller_record_shows_telemetry_per_run(fake_gpus: FakeNvml) -> None:
    reported = run_bench("echo 'gen throughput (token/s): 93.1'", repeat=2,
                         sample_interval=0.05)
    spec = bench.BenchSpec(cmd="x", metric=r"\(token/s\): ([0-9.]+)", repeat=2)
    record = bench.build_record(spec, reported, "gpu-box")
    assert record["values"] == [93.1, 93.1]
    over = record["telemetry"]["gpus"]["00000000:19:00.0"]
    assert over["sm_mhz"]["median"] == 1980 and over["clock_event_reasons"]["sw_power_cap"] >= 2
    table = "\n".join(bench.format_record(record))
    assert "1980" in table and "gpu_idle,sw_power_cap" in table


# ---- pure helpers ----------------------------------------------------------------------

def test_reason_counts_decode_masks() -> None:
    assert benchsample.reason_counts([0x4, 0x5, None, {"error": "x"}]) == \
        {"sw_power_cap": 2, "gpu_idle": 1}


def test_summarise_columns_and_thin() -> None:
    columns = {name: [] for name in benchsample.COLUMNS}
    columns.update(t=[0.0, 0.2, 0.4], sm_mhz=[1980, None, 1755], reasons_mask=[0, 0x20, 0x20])
    summary = benchsample.summarise(columns, {})
    assert summary["samples"] == 3 and summary["power_w"] is None
    assert summary["sm_mhz"] == {"min": 1755, "median": 1867.5, "max": 1980}
    assert summary["clock_event_reasons"] == {"sw_thermal_slowdown": 2}
    assert benchsample.thin({"t": list(range(10))}, 4)["t"] == [0, 3, 6, 9]
    assert benchsample.thin({"t": [1, 2]}, 600)["t"] == [1, 2]


class Counters:
    """A fake pynvml whose PCIe byte counters are given, reading by reading."""

    NVML_FI_DEV_PCIE_COUNT_TX_BYTES, NVML_FI_DEV_PCIE_COUNT_RX_BYTES = 197, 198

    def __init__(self, readings: list[tuple[int, int]]) -> None:
        self.readings = iter(readings)

    def nvmlDeviceGetFieldValues(self, handle: int, ids: list[int]) -> list[Any]:
        rx, tx = next(self.readings)
        return [SimpleNamespace(nvmlReturn=0, value=SimpleNamespace(ullVal=rx)),
                SimpleNamespace(nvmlReturn=0, value=SimpleNamespace(ullVal=tx))]


def test_unwrap_handles_32_bit_counter_wraps() -> None:
    # recorded on an H200: the rx counter fell from ~4.2e9 to ~2e9 while 5 GiB was copied
    assert benchpcie.unwrap(4_000_000_000, 4_100_000_000) == 100_000_000
    assert benchpcie.unwrap(4_200_000_000, 2_000_000_000) == 2**32 - 2_200_000_000
    assert benchpcie.unwrap(2**40, 2**40 + 5) == 5   # a 64-bit counter never wraps at 2^32


def test_counter_rates_across_a_wrap_and_hot_reads() -> None:
    gib = 1 << 30
    nvml = Counters([(2**32 - gib, 0), (gib, 512), (gib + 1024, 1024)])
    counter = benchpcie.Counter()
    assert counter.read(nvml, 0) and counter.rate(10.0) == (None, None)
    assert counter.read(nvml, 0)   # 2 GiB moved across the wrap: busy enough to read often
    assert counter.hot
    rx, tx = counter.rate(10.5)
    assert rx == 2 * gib / 1024 / 0.5 and tx == 1.0
    assert counter.read(nvml, 0) and not counter.hot


def test_counter_without_field_values_reports_none() -> None:
    assert benchpcie.read_counters(object(), 0) is None
    assert not benchpcie.Counter().read(object(), 0)


def test_a_gpu_busy_on_pcie_is_read_between_ticks(monkeypatch: pytest.MonkeyPatch) -> None:
    class Busy(FakeNvml):
        reads = 0

        def nvmlDeviceGetFieldValues(self, handle: int, ids: list[int]) -> list[Any]:
            if handle == 0:
                Busy.reads += 1
                self.bytes += 3 << 30     # 3 GiB per read: would wrap twice in one tick
            return super().nvmlDeviceGetFieldValues(handle, ids)

    monkeypatch.setattr(nvml_reader, "load_nvml", lambda: (Busy(), None))
    result = run_bench("sleep 0.5", repeat=1, sample_interval=0.2)
    ticks = result["runs"][0]["sampler"]["ticks"]
    assert Busy.reads > ticks + 3
    rx = result["runs"][0]["gpus"]["00000000:19:00.0"]["pcie_rx_kbs"]
    assert rx["min"] > 0   # never a negative rate from a wrap


def test_recorded_h200_runs_make_a_record() -> None:
    """Real telemetry (tests/data/h200/bench_agent.json): idle while torch loads, then
    5 GiB over PCIe and matmuls at the 700 W power cap."""
    import json

    from envsnap.snapshot.store import dump_yaml

    reported = json.loads((DATA / "h200" /
                           "bench_agent.json").read_text())
    spec = bench.BenchSpec(cmd=reported["cmd"], metric=r"\(token/s\): ([0-9.]+)", repeat=2)
    record = bench.build_record(spec, reported, "h200")
    assert record["values"] == [611.7, 629.1]
    gpu = record["telemetry"]["gpus"]["00000000:00:06.0"]
    assert gpu["name"] == "NVIDIA H200" and gpu["pcie_source"] == "counters"
    assert gpu["sm_mhz"]["min"] == 345 and gpu["sm_mhz"]["max"] == 1980
    assert gpu["power_w"]["max"] > 690
    assert set(gpu["clock_event_reasons"]) == {"gpu_idle", "sw_power_cap"}
    assert gpu["pcie_rx_kbs"]["min"] >= 0 and gpu["pcie_rx_kbs"]["max"] > 1_000_000
    assert all(run["sampler"]["ticks"] == run["gpus"]["00000000:00:06.0"]["samples"]
               for run in record["runs"])
    table = bench.format_record(record)
    assert "sw_power_cap" in table[1] and "GPU telemetry: none" not in "\n".join(table)
    assert "median 620.4" in table[-1]
    assert "pcie_rx_kbs" in dump_yaml({"bench": record})


def test_busy_samples_are_summarised_apart_from_idle_ones() -> None:
    """A benchmark that spends most of its run importing: the idle samples must not hide
    the clocks and the power cap of the part that is measured (seen on the H200)."""
    from envsnap.agent.benchsample import summarise
    from envsnap.bench.run import reasons_text, sm_clock_text

    columns = {"t": [0.0, 0.2, 0.4, 0.6, 0.8], "sm_mhz": [345, 345, 345, 1980, 1965],
               "util_gpu_pct": [0, 0, 0, 100, 99], "reasons_mask": [1, 1, 1, 4, 4],
               "power_w": [70.0, 70.0, 71.0, 690.0, 695.0]}
    summary = summarise(columns, {})
    assert summary["sm_mhz"]["median"] == 345
    assert summary["busy"]["samples"] == 2
    assert summary["busy"]["sm_mhz"]["median"] == 1972.5
    assert sm_clock_text({"bus": summary}) == "1972.5"
    assert reasons_text({"bus": summary}) == "sw_power_cap"
    idle = summarise({"t": [0.0], "sm_mhz": [345], "util_gpu_pct": [0]}, {})
    assert idle["busy"] is None and sm_clock_text({"bus": idle}) == "idle", \
        "idle clocks are not shown as the benchmark's"


def power_buffer(t: list[float], watts: list[float]) -> Any:
    from envsnap.agent.benchsample import PowerBuffer

    power = PowerBuffer(power_limit_w=700.0)   # margin 70 W
    power.t, power.watts = t, watts
    return power


def test_a_phase_shorter_than_the_polling_is_found_in_the_buffered_power() -> None:
    """The H200 case: a 0.2 s burst between two polls at 0.2 s reads 0% utilization both
    times, while the driver's 20 ms power samples show it."""
    from envsnap.agent.benchsample import busy_phases, summarise
    from envsnap.bench.run import sm_clock_text, telemetry_notes

    t = [round(0.02 * i, 2) for i in range(60)]
    watts = [80.0 if not 0.31 <= when <= 0.49 else 520.0 for when in t]
    assert busy_phases(t, watts, 70.0) == [(0.31, 0.49)]
    polled = {"t": [0.0, 0.2, 0.6, 0.8], "sm_mhz": [345, 345, 345, 345],
              "util_gpu_pct": [0, 0, 0, 0]}
    summary = summarise(polled, {}, power_buffer(t, watts))
    assert summary["busy"] is None and summary["power_busy"]["phases"] == 1
    assert sm_clock_text({"bus": summary}) == "short"
    runs = [{"run": 1, "gpus": {"bus": summary}}]
    (note,) = telemetry_notes(runs, 0.2)
    assert "GPU busy for less than the sampling interval (0.2 s)" in note
    # the adaptive ticks put readings inside the phase: they are the busy ones
    polled = {"t": [0.0, 0.2, 0.35, 0.4, 0.45, 0.6], "sm_mhz": [345, 345, 1980, 1980, 1975, 345],
              "util_gpu_pct": [0, 0, 0, 0, 0, 0]}
    summary = summarise(polled, {}, power_buffer(t, watts))
    assert summary["busy"]["samples"] == 3 and sm_clock_text({"bus": summary}) == "1980"


def test_a_context_coming_up_is_not_a_busy_phase() -> None:
    """An H200 holding a fresh CUDA context draws ~40 W over idle: under the 70 W margin."""
    from envsnap.agent.benchsample import summarise

    t = [round(0.02 * i, 2) for i in range(50)]
    watts = [80.0] * 10 + [122.0] * 40
    summary = summarise({"t": [0.0, 0.2], "util_gpu_pct": [0, 0]}, {}, power_buffer(t, watts))
    assert summary["power_busy"]["phases"] == 0 and summary["busy"] is None


def test_a_group_of_zombies_has_ended_though_kill_still_finds_it() -> None:
    """An exited process nobody reaped yet (as an orphaned server is where pid 1 reaps late
    or never): its group answers kill(0), yet nothing of it runs."""
    import os
    import subprocess
    import sys
    import time

    from envsnap.agent import benchserve, reaper

    child = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while not reaper.ended(child.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        os.killpg(child.pid, 0)                       # the zombie keeps its group findable
        assert not benchserve.group_alive(child.pid)
    finally:
        child.wait()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                               start_new_session=True)
    try:
        assert benchserve.group_alive(sleeper.pid)
    finally:
        sleeper.kill()
        sleeper.wait()
