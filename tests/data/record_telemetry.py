"""Short GPU phases and the driver's buffered samples, on a lent GPU (issue 14).

Run on the GPU host with torch, from the repository root:
    python3 tests/data/record_telemetry.py OUT_DIR
It writes OUT_DIR/telemetry.tar.gz holding telemetry/ (copy it to tests/data/):
- nvml_samples.json: what nvmlDeviceGetSamples buffers on this driver, per sample type: how
  many samples, their spacing, and how their timestamps relate to time.time() (epoch us?);
- snapshots/burst.yaml: `envsnap bench local` of a benchmark whose only GPU work is one
  bf16 matmul burst of BURST_S seconds between idle seconds, polled every 0.2 s;
- bench_burst.txt: what `envsnap bench` printed (the SM MHz column must show busy clocks);
- overhead.txt, overhead_same_core.txt: bench/bench_overhead.py, sampling on vs off.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from typing import Any

ROOT = os.getcwd()
BURST = '''import sys, time
import torch
seconds = float(sys.argv[1])
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
torch.cuda.synchronize()
time.sleep(1.0)
started, count = time.perf_counter(), 0
while time.perf_counter() - started < seconds:
    for _ in range(10):
        a @ b
    torch.cuda.synchronize()
    count += 10
elapsed = time.perf_counter() - started
time.sleep(1.0)
print(f"burst {elapsed:.3f} s: {2 * 8192 ** 3 * count / elapsed / 1e12:.1f} TFLOP/s")
'''
SAMPLE_TYPES = ["NVML_TOTAL_POWER_SAMPLES", "NVML_GPU_UTILIZATION_SAMPLES",
                "NVML_MEMORY_UTILIZATION_SAMPLES", "NVML_PROCESSOR_CLK_SAMPLES",
                "NVML_MEMORY_CLK_SAMPLES"]


def probe_samples(burst_file: str) -> dict[str, Any]:
    """Drain each buffer, run a 0.2 s burst, read what the driver kept meanwhile."""
    import pynvml
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    before = {}
    for name in SAMPLE_TYPES:
        try:
            _, samples = pynvml.nvmlDeviceGetSamples(handle, getattr(pynvml, name), 0)
            before[name] = max(int(s.timeStamp) for s in samples) if samples else 0
        except Exception as exc:
            before[name] = repr(exc)
    wall, started = time.time(), time.perf_counter()
    subprocess.run([sys.executable, burst_file, "0.2"], check=True, capture_output=True)
    out: dict[str, Any] = {"probe_wall_start": wall, "probe_seconds":
                           round(time.perf_counter() - started, 3)}
    for name in SAMPLE_TYPES:
        if isinstance(before[name], str):
            out[name] = {"error": before[name]}
            continue
        try:
            kind, samples = pynvml.nvmlDeviceGetSamples(handle, getattr(pynvml, name),
                                                        before[name])
        except Exception as exc:
            out[name] = {"error": repr(exc)}
            continue
        stamps = [int(s.timeStamp) for s in samples]
        member = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal",
                  6: "usVal"}.get(kind, "uiVal")
        values = [getattr(s.sampleValue, member) for s in samples]
        gaps = [b - a for a, b in zip(stamps, stamps[1:])]
        out[name] = {"value_type": kind, "count": len(samples),
                     "median_spacing_ms": statistics.median(gaps) / 1000 if gaps else None,
                     "first_minus_wall_s": stamps[0] / 1e6 - wall if stamps else None,
                     "max": max(values) if values else None,
                     "min": min(values) if values else None}
    pynvml.nvmlShutdown()
    return out


def run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=400)
    print(f"$ {' '.join(argv[1:4])}... exit {proc.returncode}\n{proc.stdout[-3000:]}"
          f"{proc.stderr[-2000:]}", flush=True)
    return proc


def main(out: str) -> None:
    folder = os.path.join(tempfile.mkdtemp(), "telemetry")
    store = os.path.join(folder, "snapshots")
    os.makedirs(store)
    burst_file = os.path.join(folder, "burst.py")
    with open(burst_file, "w") as handle:
        handle.write(BURST)
    env = {**os.environ, "PYTHONPATH": ROOT, "ENVSNAP_STORE": store}
    with open(os.path.join(folder, "nvml_samples.json"), "w") as handle:
        json.dump(probe_samples(burst_file), handle, indent=1, sort_keys=True)
    bench = run([sys.executable, "-m", "envsnap", "bench", "local", "--cmd",
                 f"{sys.executable} {burst_file} 0.2", "--metric", r"([0-9.]+) TFLOP/s",
                 "--repeat", "3", "--label", "burst", "--python", sys.executable], env)
    with open(os.path.join(folder, "bench_burst.txt"), "w") as handle:
        handle.write(bench.stdout + bench.stderr)
    for name, extra in (("overhead.txt", []), ("overhead_same_core.txt", ["--same-core"])):
        proc = run([sys.executable, "bench/bench_overhead.py", "--pairs", "6", *extra], env)
        with open(os.path.join(folder, name), "w") as handle:
            handle.write(proc.stdout + proc.stderr)
    with tarfile.open(os.path.join(out, "telemetry.tar.gz"), "w:gz") as tar:
        tar.add(folder, arcname="telemetry")


if __name__ == "__main__":
    main(sys.argv[1])
