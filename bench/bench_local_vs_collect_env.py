"""`envsnap capture local` against `python -m torch.utils.collect_env`, paired, in one run.

Meant for a GPU host with torch installed (the lent H200): both gather versions and GPU
facts; collect_env imports torch and runs pip, envsnap does neither. Each pair runs both
commands back to back, in alternating order (so a machine that slows down mid-run slows
both alike); the ratio printed is the median of the pairs' ratios, over --repeat pairs.
It also prints where the capture's time went, from the snapshot's own meta: the agent's
start-up, each collector's seconds and the masking pass, medians over the runs.

Usage: python3 bench/bench_local_vs_collect_env.py [--repeat 10] [--python PATH] [--json F]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import ledger
import yaml

ROOT = Path(__file__).resolve().parent.parent
TARGET = 15.0


def timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    result = subprocess.run(argv, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if result.returncode not in (0, 3):
        raise SystemExit(f"failed: {' '.join(argv)}\n{result.stderr[-800:]}")
    return elapsed


def capture_meta(store: str) -> dict[str, Any]:
    """The agent's own account of the last capture: start-up, collectors, masking."""
    [path] = [p for p in Path(store).rglob("bench.yaml")]
    meta: dict[str, Any] = yaml.safe_load(path.read_text())["meta"]
    return meta


def paired(capture: list[str], collect_env: list[str], env: dict[str, str], store: str,
           pairs: int) -> dict[str, Any]:
    seconds: dict[str, list[float]] = {"capture": [], "collect_env": []}
    parts: dict[str, list[float]] = {}
    for index in range(pairs):
        order = [("capture", capture), ("collect_env", collect_env)]
        for name, argv in order if index % 2 == 0 else reversed(order):
            seconds[name].append(timed(argv, env))
            if name == "capture":
                meta = capture_meta(store)
                agent = meta.get("agent", {})
                for key in ("startup_seconds", "masking_seconds"):
                    parts.setdefault(f"agent.{key}", []).append(float(agent.get(key, 0.0)))
                for collector, facts in (meta.get("collectors") or {}).items():
                    parts.setdefault(f"collector.{collector}", []).append(
                        float(facts.get("seconds", 0.0)))
    ratios = [theirs / ours for ours, theirs in zip(seconds["capture"], seconds["collect_env"])]
    return {"seconds": seconds, "ratios": ratios,
            "median_ratio": statistics.median(ratios),
            "parts_median_seconds": {k: statistics.median(v) for k, v in sorted(parts.items())}}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=10, help="pairs (at least 10 for a figure)")
    parser.add_argument("--python", default=sys.executable, help="the ML environment's python")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    store = tempfile.mkdtemp(prefix="envsnap-bench-")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ENVSNAP_STORE": store}
    env.pop("PYTHONDONTWRITEBYTECODE", None)   # bytecode cached, as an installed envsnap runs
    capture = [sys.executable, "-m", "envsnap", "capture", "local", "--label", "bench",
               "--force", "--python", args.python]
    collect_env = [args.python, "-m", "torch.utils.collect_env"]
    timed(capture, env)      # ships the agent into the cache once, as any first capture does
    timed(collect_env, env)  # and warms torch's files in the page cache, as a second run has
    figures = paired(capture, collect_env, env, store, args.repeat)
    for name, values in figures["seconds"].items():
        print(f"{name:12} median {statistics.median(values):.3f} s "
              f"(min {min(values):.3f}, max {max(values):.3f})")
    for part, value in figures["parts_median_seconds"].items():
        print(f"  {part:34} {value * 1000:7.1f} ms")
    print(f"collect_env / capture, median of {args.repeat} pairs: "
          f"{figures['median_ratio']:.1f}x  (target >= {TARGET:g}x)")
    seconds = {name: statistics.median(values) for name, values in figures["seconds"].items()}
    ledger.record(__file__, "collect_env / capture", figures["median_ratio"], "x",
                  f"collect_env {seconds['collect_env']:.3f} s (capture "
                  f"{seconds['capture']:.3f} s)", f">= {TARGET:g}")
    for name in ("nvidia", "cuda_nccl"):
        if f"collector.{name}" in figures["parts_median_seconds"]:
            ledger.record(__file__, f"collector {name} (median)",
                          figures["parts_median_seconds"][f"collector.{name}"] * 1000, "ms")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
