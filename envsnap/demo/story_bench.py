"""The STORY's benchmark for snapshots.py: EAGLE-3 2-step decoding, 94 tok/s good, 60 bad.

Built as `envsnap bench` builds it: per-run GPU columns summarised by the agent's own
benchsample.summarise, the agent's report turned into the record by bench.build_record.
The telemetry says what docs/STORY.md found by hand: P0 clocks near 2320 of 2430 MHz under
load, 36-38 C, no throttle reason, in both snapshots; only the code differs.
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from envsnap.agent import benchsample
from envsnap.bench import run as bench
from envsnap.text import timestamp

if TYPE_CHECKING:
    from envsnap.snapshot.records import Bench

COMMAND = "python3 /root/bench/spec_decode_tps.py --port 30000 --requests 16 --max-tokens 512"
METRIC = r"EAGLE-3 2-step: ([0-9.]+) tok/s"
VALUES = {True: [93.1, 94.2, 95.0, 92.8, 94.6], False: [59.8, 61.0, 60.2, 59.4, 60.7]}
VERIFY_MS = {True: [19.0, 18.8, 18.6, 19.1, 18.7], False: [29.4, 28.8, 29.1, 29.6, 28.9]}
INTERVAL = 30.0
TOKENS = 16 * 512
# The benchmark's first line says what its numbers mean, for a reader of the snapshot who has
# not seen the STORY (EAGLE-3, "2-step", "verify").
LEGEND = ("EAGLE-3 speculative decoding: a draft model proposes 2 tokens per cycle (2-step), "
          "the target model checks them in one verify pass\n")


def iso(at: float) -> str:
    return timestamp(datetime.fromtimestamp(int(at), timezone.utc))


def columns(index: int, run: int, seconds: float, good: bool) -> dict[str, list[Any]]:
    """One GPU's samples during one run: the same clocks in both snapshots, busy GPUs."""
    count = int(seconds // INTERVAL) + 1
    wobble = [(index * 7 + run * 3 + n * 5) % 11 for n in range(count)]
    return {
        "t": [n * INTERVAL for n in range(count)],
        "sm_mhz": [2310 + w for w in wobble], "mem_mhz": [14001] * count,
        "power_w": [round((318.0 if good else 271.0) + w * 1.7, 1) for w in wobble],
        "temp_c": [36 + (index + n) % 3 for n in range(count)],
        "util_gpu_pct": [96 + w % 4 for w in wobble], "util_mem_pct": [31 + w for w in wobble],
        "pcie_rx_kbs": [None] + [round(412000.0 + 900 * w, 1) for w in wobble[1:]],
        "pcie_tx_kbs": [None] + [round(409000.0 + 850 * w, 1) for w in wobble[1:]],
        "reasons_mask": [0] * count,
    }


def agent_run(run: int, value: float, started: float, buses: list[str],
              good: bool) -> dict[str, Any]:
    seconds = round(TOKENS / value + 1.7, 4)
    tail = (LEGEND + f"requests: 16, output tokens: {TOKENS}, accept length 2.41\n"
            f"EAGLE-3 2-step: {value} tok/s (verify {VERIFY_MS[good][run - 1]} ms/cycle)\n")
    per_gpu = {bus: columns(index, run, seconds, good) for index, bus in enumerate(buses)}
    return {"exit_code": 0, "output_bytes": len(tail), "output_tail": tail, "run": run,
            "gpus": {bus: benchsample.summarise(cols, {}) for bus, cols in per_gpu.items()},
            "samples": per_gpu, "sampler": {"cpu_seconds": round(0.0021 * seconds, 6),
                                            "ticks": len(per_gpu[buses[0]]["t"])},
            "seconds": seconds, "started_at": round(started, 3), "timed_out": False}


def bench_record(good: bool, host: str, buses: list[str], gpu_name: str,
                 captured_at: int) -> Bench:
    spec = bench.BenchSpec(cmd=COMMAND, metric=METRIC, repeat=5, cwd="/root",
                           sample_interval=INTERVAL)
    started = captured_at + 4.0
    runs = []
    for run, value in enumerate(VALUES[good], start=1):
        runs.append(agent_run(run, value, started, buses, good))
        started += runs[-1]["seconds"] + 0.2
    telemetry = {"available": True, "reason": None, "sample_interval": INTERVAL,
                 "gpus": {bus: {"index": index, "name": gpu_name, "pcie_source": "counters"}
                          for index, bus in enumerate(buses)}}
    reported = {"cmd": COMMAND, "cwd": "/root", "error": None, "runs": runs, "stopped": None,
                "telemetry": telemetry}
    record = bench.build_record(spec, reported, host)
    record["started_at"] = iso(captured_at + 3)
    record["finished_at"] = iso(started + 1)
    return record
