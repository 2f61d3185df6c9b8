"""`envsnap restore --check` of a host with no drift against one `envsnap capture` of it.

Both on `local` with the same checkout (the restore plan captures the host, runs
restore.yml in check mode and diffs). Prints the ratio of medians (target <= 1.5).

Usage: python3 bench/bench_restore.py [--repeat 7]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import ledger

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from helpers.gitrepos import Story  # noqa: E402


def timed(argv: list[str], env: dict[str, str], cwd: Path, ok: tuple[int, ...] = (0,)) -> float:
    started = time.perf_counter()
    result = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if result.returncode not in ok:
        raise SystemExit(f"failed: {' '.join(argv)}\n{result.stdout[-1500:]}{result.stderr}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    repeat = parser.parse_args().repeat
    work = Path(tempfile.mkdtemp(prefix="envsnap-bench-restore-"))
    try:
        story = Story(work / "story")
        env = {**os.environ, "ENVSNAP_STORE": str(work / "store"), "PYTHONPATH": str(ROOT)}
        envsnap = [sys.executable, "-m", "envsnap"]
        repo = str(story.checkout.path)
        timed([*envsnap, "capture", "local", "--label", "good", "--repo", repo], env, work)
        capture = [timed([*envsnap, "capture", "local", "--label", "again", "--force",
                          "--repo", repo], env, work) for _ in range(repeat)]
        check = [timed([*envsnap, "restore", "good", "--check"], env, work)
                 for _ in range(repeat)]
        one, plan = statistics.median(capture), statistics.median(check)
        print(f"envsnap capture local (1 repo):       median {one:.3f} s")
        print(f"envsnap restore --check, no drift:    median {plan:.3f} s")
        print(f"ratio restore-check / capture:        {plan / one:.2f}x  (target <= 1.5)")
        ledger.record(__file__, "restore-check / capture", plan / one, "x",
                      f"envsnap capture local {one:.3f} s", "<= 1.5")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
