"""`envsnap capture local` against `python -m torch.utils.collect_env`, in the same run.

Meant for a GPU host with torch installed (the lent H200): both gather versions and GPU
facts; collect_env imports torch and runs pip, envsnap does neither. Prints the ratio.

Usage: python3 bench/bench_local_vs_collect_env.py [--repeat 5] [--python PATH]
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

ROOT = Path(__file__).resolve().parent.parent


def timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    result = subprocess.run(argv, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if result.returncode not in (0, 3):
        raise SystemExit(f"failed: {' '.join(argv)}\n{result.stderr[-800:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--python", default=sys.executable, help="the ML environment's python")
    args = parser.parse_args()
    store = tempfile.mkdtemp(prefix="envsnap-bench-")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ENVSNAP_STORE": store}
    capture = [sys.executable, "-m", "envsnap", "capture", "local", "--label", "bench",
               "--force", "--python", args.python]
    collect_env = [args.python, "-m", "torch.utils.collect_env"]
    timed(capture, env)  # ships the agent into the cache once, as any first capture does
    ours = [timed(capture, env) for _ in range(args.repeat)]
    theirs = [timed(collect_env, env) for _ in range(args.repeat)]
    print(f"envsnap capture local: median {statistics.median(ours):.3f} s "
          f"(min {min(ours):.3f}, max {max(ours):.3f})")
    print(f"torch collect_env:     median {statistics.median(theirs):.3f} s "
          f"(min {min(theirs):.3f}, max {max(theirs):.3f})")
    ratio = statistics.median(theirs) / statistics.median(ours)
    print(f"ratio collect_env / capture: {ratio:.1f}x  (target >= 8)")


if __name__ == "__main__":
    main()
