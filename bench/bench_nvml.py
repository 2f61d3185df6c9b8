"""Where the nvidia collector's time goes on a GPU host, one part at a time.

On an H200 host NVML's collector sets the pace of `envsnap capture local` (80-87 ms, the
longest collector, run beside the others). This splits one reading of the host the way
nvml_reader.read_raw makes it: loading libnvidia-ml and pynvml, nvmlInit, every query
(summed over the GPUs, each query's median over --repeat readings) and nvmlShutdown, so the
next cut is chosen from a measurement. The whole reading is also timed unsplit, in the same
run, as the baseline the parts add up to. The load and nvmlInit are timed one after the
other here; the collector itself runs its first nvmlInit beside pynvml's import
(nvml_reader.EarlyStart), so there the two overlap.

Usage: python3 bench/bench_nvml.py [--repeat 5] [--top 15]   (on a host with an NVIDIA driver)
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import ledger

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from envsnap.agent import nvml_reader  # noqa: E402


def one_reading(nvml: Any, spent: dict[str, float]) -> float:
    """read_raw with each part's seconds added to `spent`; returns the whole's seconds."""
    real_call, real_init, real_shutdown = nvml_reader.call, nvml.nvmlInit, nvml.nvmlShutdown

    def timed(name: str, function: Any) -> Any:
        def run(*args: Any) -> Any:
            started = time.perf_counter()
            try:
                return function(*args)
            finally:
                spent[name] = spent.get(name, 0.0) + time.perf_counter() - started
        return run

    nvml_reader.call = lambda module, names, *args: timed(names, real_call)(module, names, *args)
    nvml.nvmlInit, nvml.nvmlShutdown = timed("(nvmlInit)", real_init), \
        timed("(nvmlShutdown)", real_shutdown)
    try:
        started = time.perf_counter()
        raw = nvml_reader.read_raw(nvml)
        whole = time.perf_counter() - started
    finally:
        nvml_reader.call, nvml.nvmlInit, nvml.nvmlShutdown = real_call, real_init, \
            real_shutdown
    if "init_error" in raw:
        raise SystemExit(f"NVML would not start: {raw['init_error']}")
    return whole


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    started = time.perf_counter()
    nvml, why = nvml_reader.load_nvml()
    loaded = time.perf_counter() - started
    if nvml is None:
        raise SystemExit(f"no NVML on this host: {why}")
    parts: dict[str, list[float]] = {}
    wholes = []
    for _ in range(max(1, args.repeat)):
        spent: dict[str, float] = {}
        wholes.append(one_reading(nvml, spent))
        for name, seconds in spent.items():
            parts.setdefault(name, []).append(seconds)
    medians = {name: statistics.median(values) for name, values in parts.items()}
    whole = statistics.median(wholes)
    print(f"load libnvidia-ml + pynvml (once):   {loaded * 1000:7.1f} ms")
    print(f"one reading, unsplit (median of {len(wholes)}): {whole * 1000:7.1f} ms")
    print(f"  parts add up to                      {sum(medians.values()) * 1000:7.1f} ms")
    ledger.record(__file__, "one NVML reading, unsplit", whole * 1000, "ms",
                  f"its parts add up to {sum(medians.values()) * 1000:.1f} ms")
    for name, seconds in sorted(medians.items(), key=lambda item: -item[1])[:args.top]:
        print(f"  {name[:52]:52} {seconds * 1000:7.2f} ms  ({seconds / whole:5.1%})")


if __name__ == "__main__":
    main()
