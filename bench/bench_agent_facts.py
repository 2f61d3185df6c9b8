"""The agent's system and cuda_nccl collectors, this checkout against another (--before),
each in a fresh interpreter as a capture runs them: start-up, the collectors' imports and
their reading, paired and alternating, the ratio the median of the pairs'.

What it watches: the facts torch's collect_env states (compilers, libc, lscpu's fields, the
cuDNN libraries of the loader's cache) must not make a capture slower than a tenth.

Usage: python3 bench/bench_agent_facts.py --before /path/to/checkout [--repeat 21]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ledger  # noqa: E402

HERE = Path(__file__).resolve().parents[1]
SNIPPET = ("from envsnap.agent import system, cuda_nccl\n"
           "system.collect({}); cuda_nccl.collect({})\n")


def once(checkout: Path) -> float:
    env = dict(os.environ, PYTHONPATH=str(checkout))
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", SNIPPET], env=env, check=True, cwd=checkout)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", required=True, type=Path)
    parser.add_argument("--repeat", type=int, default=21)
    args = parser.parse_args()
    for checkout in (HERE, args.before):   # warm: bytecode written, files cached
        once(checkout)
    pairs = []
    for number in range(args.repeat):
        first, second = (HERE, args.before) if number % 2 == 0 else (args.before, HERE)
        times = {first: once(first), second: once(second)}
        pairs.append((times[HERE], times[args.before]))
    ratio = statistics.median(after / before for after, before in pairs)
    after = statistics.median(p[0] for p in pairs)
    before = statistics.median(p[1] for p in pairs)
    print(f"system + cuda_nccl collectors, fresh interpreter: {after * 1000:.1f} ms "
          f"against {before * 1000:.1f} ms before: {ratio:.3f}x (median of {args.repeat} pairs)")
    ledger.record(__file__, "agent system+cuda_nccl / before", ratio, "x",
                  f"{args.before.name}: {before * 1000:.1f} ms, this: {after * 1000:.1f} ms, "
                  f"median of {args.repeat} pairs", "<= 1.1")


if __name__ == "__main__":
    main()
