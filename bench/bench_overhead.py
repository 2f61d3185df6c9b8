"""What GPU telemetry sampling costs a benchmark: the same CPU-bound work run through the
agent's bench mode with sampling on (every 0.2 s) and off, in interleaved pairs of runs
(the order flips every pair, so drift and warm-up fall on both sides alike).

Prints (only ratios from one run mean anything on a noisy machine):
  on / off          median of the per-pair ratios of the work's own timing   (target < 1.02)
  sampler CPU       the sampler thread's own CPU time over the runs' time, as each run
                    recorded it: the overhead's upper bound on a busy core
  sampler tick      what one sampling tick costs here (all GPUs)
  verdict           benchstats.compare of the two sets with a 2% threshold

`--same-core` pins the agent, its sampler and the work to one CPU: the worst case, where
the sampler's thread competes with the benchmark for the same core.

Usage: PYTHONPATH=. python3 bench/bench_overhead.py [--pairs 10] [--seconds 2] [--same-core]
No fabric needed: it runs on `local`. On a host without a driver the sampler has no NVML
and costs nothing; run it on a GPU host for the number that matters.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import ledger

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from envsnap.agent import benchsample  # noqa: E402
from envsnap.bench import run as bench
from envsnap.bench import stats as benchstats  # noqa: E402
from envsnap.hosts.inventory import parse_host_spec  # noqa: E402

# Fixed work measured from inside, so interpreter start-up noise stays out of the number.
WORK = """\
import sys, time
n = int(sys.argv[1])
started = time.perf_counter()
total = 0
for i in range(n):
    total += i * i % 7
print("work seconds: %.6f" % (time.perf_counter() - started))
"""
METRIC = r"work seconds: ([0-9.]+)"


def calibrate(script: Path, seconds: float) -> int:
    """Loop count that takes about `seconds` here."""
    probe = 2_000_000
    out = subprocess.run([sys.executable, str(script), str(probe)], capture_output=True,
                         text=True, check=True).stdout
    took = benchstats.parse_metric(out, METRIC) or 1.0
    return max(probe, int(probe * seconds / took))


def measure(cmd: str, interval: float, cwd: str) -> dict:
    """One run through the agent's bench mode: its record."""
    spec = bench.BenchSpec(cmd=cmd, metric=METRIC, repeat=1, lower_is_better=True,
                           cwd=cwd, sample_interval=interval)
    return bench.run_bench(parse_host_spec("local"), spec)


def sampler_share(records: list[dict]) -> str:
    """The sampler's own CPU seconds over the runs' seconds, as the runs recorded them."""
    cpu = sum((r["runs"][0].get("sampler") or {}).get("cpu_seconds", 0.0) for r in records)
    ticks = sum((r["runs"][0].get("sampler") or {}).get("ticks", 0) for r in records)
    seconds = sum(r["runs"][0]["seconds"] for r in records)
    if not ticks:
        return "nothing sampled"
    return (f"{cpu:.4f} s CPU over {seconds:.1f} s of runs = {cpu / seconds:.3%} of one core "
            f"({ticks} ticks, {cpu / ticks * 1000:.2f} ms each)")


def tick_cost(interval: float, ticks: int = 50) -> str:
    sampler = benchsample.Sampler.open(interval, benchsample.DEFAULT_MAX_SAMPLES)
    try:
        if not sampler.gpus:
            return f"no sampling here ({sampler.info.get('reason')})"
        sampler.start()
        sampler.stop()   # columns in place; then tick by hand, timed
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in range(ticks):
            sampler.sample()
        cpu = (time.process_time() - cpu) / ticks
        wall = (time.perf_counter() - wall) / ticks
        return (f"{wall * 1000:.2f} ms wall, {cpu * 1000:.2f} ms CPU per tick for "
                f"{len(sampler.gpus)} GPU(s) = {cpu / interval:.2%} of one core "
                f"at {interval:g} s")
    finally:
        sampler.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=10, help="off/on pairs of runs")
    parser.add_argument("--seconds", type=float, default=2.0, help="work per run")
    parser.add_argument("--interval", type=float, default=bench.DEFAULT_SAMPLE_INTERVAL)
    parser.add_argument("--same-core", action="store_true", help="pin everything to one CPU")
    args = parser.parse_args()
    if args.same_core:
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # children inherit it
    work = Path(tempfile.mkdtemp(prefix="envsnap-overhead-"))
    os.environ["HOME"] = str(work)   # the agent's cache lands here, not in the real home
    script = work / "work.py"
    script.write_text(WORK)
    count = calibrate(script, args.seconds)
    cmd = f"{sys.executable} {script} {count}"
    measure(cmd, 0, str(work))    # ships the agent into the cache once
    off: list[dict] = []
    on: list[dict] = []
    for pair in range(args.pairs):
        for interval in ((0, args.interval) if pair % 2 == 0 else (args.interval, 0)):
            (on if interval else off).append(measure(cmd, interval, str(work)))
    report(off, on, args)


def report(off_records: list[dict], on_records: list[dict], args: argparse.Namespace) -> None:
    off = [r["values"][0] for r in off_records]
    on = [r["values"][0] for r in on_records]
    ratio = statistics.median(b / a for a, b in zip(off, on))
    print(f"work per run, sampling off (median of {len(off)}): {statistics.median(off):.4f} s"
          f"  (spread {benchstats.summarise(off)['spread']:.1%})")
    print(f"work per run, sampling on  (median of {len(on)}): {statistics.median(on):.4f} s"
          f"  (spread {benchstats.summarise(on)['spread']:.1%})")
    print(f"ratio on / off (pairs):  {ratio:.4f}  ({ratio - 1:+.2%} overhead; target < +2%)")
    ledger.record(__file__, "sampling on / off" + (", same core" if args.same_core else ""),
                  ratio, "x", f"sampling off {statistics.median(off):.4f} s", "< 1.02")
    telemetry = on_records[-1]["telemetry"]
    sampled = f"{len(telemetry.get('gpus') or {})} GPU(s) sampled every {args.interval:g} s"
    what = sampled if telemetry.get("available") else f"none ({telemetry.get('reason')})"
    print(f"telemetry:               {what}{', same core' if args.same_core else ''}")
    print(f"sampler CPU:             {sampler_share(on_records)}")
    print(f"sampler tick:            {tick_cost(args.interval)}")
    verdict = benchstats.compare(off, on, lower_is_better=True, threshold=0.02)
    print(f"verdict (2% threshold):  {verdict['verdict']}: {verdict['why']}")


if __name__ == "__main__":
    main()
