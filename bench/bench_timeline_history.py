"""`envsnap timeline` over a watched history of many records, against the same timeline with
no history, measured in the same run.

The host is bench_timeline.py's: 20 git checkouts and a venv of 500 distributions, on
`local`, with one real worker process. Its history: one real capture of it (`--python` the
venv, every `--repo`, `--proc` the worker) recorded every PERIOD over DAYS (30 days at 10
minutes: 4320 records), each a copy of the capture at its own time, every 50th with the
worker restarted under another env and a package moved, so the store holds changes to
read, as `envsnap watch` would have kept them. The timeline reads every manifest's header
and loads only records of its window (the last day: 144 of them) and the one before it, of
each run with the same facts its first and last.

Prints:  timeline with history / without   median seconds of each and their ratio; the
         seconds with history (issue 42 asks <= 1 s); the same over the whole history
         (--since 30d: every manifest read; of each run of records with the same facts only
         its first and last are loaded)

Usage: python3 bench/bench_timeline_history.py [--repeat 5] [--days 30] [--period 600]
"""
from __future__ import annotations

import argparse
import copy
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import ledger
from bench_timeline import GIT_ENV, make_checkouts, make_venv, timed

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from envsnap.history.store import History  # noqa: E402
from envsnap.snapshot.store import Store  # noqa: E402

CHANGE_EVERY = 50     # records between two restarts of the worker (and package moves)


def make_history(store: Path, label: str, days: float, period: float) -> int:
    """The capture `label` recorded every `period` seconds over `days`, up to now; returns
    how many records."""
    base = Store(store).load(label)
    history = History.of_store(Store(store))
    now = time.time()
    count = int(days * 86400 / period)
    pid = next(iter(base["facts"]["env"]["processes"]))
    for number in range(count):
        document = copy.deepcopy(base)
        at = now - (count - number) * period
        document["meta"]["captured_at"] = datetime.fromtimestamp(
            at, timezone.utc).isoformat(timespec="seconds")
        turn = number // CHANGE_EVERY
        process = document["facts"]["env"]["processes"].pop(pid)
        process["start_epoch"] = now - (count - turn * CHANGE_EVERY) * period - 1
        process["env"] = {**process.get("env", {}), "NCCL_PROTO": ("LL", "Simple")[turn % 2]}
        document["facts"]["env"]["processes"][str(400_000 + turn)] = process
        packages = document["facts"]["python_env"]["packages"]
        packages["package-7"] = f"1.{7 + turn % 3}.0"
        history.record(document, reason="every 10m")
    return count


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--days", type=float, default=30)
    parser.add_argument("--period", type=float, default=600)
    parser.add_argument("--repos", type=int, default=20)
    parser.add_argument("--packages", type=int, default=500)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="envsnap-bench-timeline-history-"))
    worker = None
    try:
        env = {**os.environ, **GIT_ENV, "HOME": str(work), "PYTHONPATH": str(ROOT)}
        checkouts = make_checkouts(work, args.repos, env)
        python = make_venv(work, args.packages)
        marker = f"envsnap-bench-worker-{os.getpid()}"
        worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)",
                                   marker], env={"PATH": "/usr/bin:/bin", "NCCL_PROTO": "LL"})
        host = ["local", "--python", str(python), "--proc", marker]
        for checkout in checkouts:
            host += ["--repo", str(checkout)]
        watched, bare = work / "watched", work / "bare"
        base = [sys.executable, "-m", "envsnap", "capture", *host, "--label", "base"]
        timed([*base, "--store", str(watched)], env, work)
        started = time.perf_counter()
        count = make_history(watched, "base", args.days, args.period)
        made = time.perf_counter() - started
        (watched / "base.yaml").unlink()   # the history alone, as the watch keeps it
        bare.mkdir()
        timeline = [sys.executable, "-m", "envsnap", "timeline", *host]
        runs = {"without": [*timeline, "--store", str(bare)],
                "with": [*timeline, "--store", str(watched)],
                "whole": [*timeline, "--store", str(watched), "--since", f"{args.days:g}d"]}
        times: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(args.repeat + 1):   # the first round warms up and is not counted
            for name, argv in runs.items():
                times[name].append(timed(argv, env, work))
        without_s, with_s, whole_s = (statistics.median(times[name][1:]) for name in runs)
        print(f"{args.repos} checkouts, {args.packages} packages, {count} records over "
              f"{args.days:g} days (recorded in {made:.1f} s), {args.repeat} runs each")
        print(f"timeline, no history      {without_s:.3f} s (median)")
        print(f"timeline, with history    {with_s:.3f} s (median)")
        print(f"with / without = {with_s / without_s:.2f}")
        print(f"timeline --since {args.days:g}d (every manifest read)  {whole_s:.3f} s")
        ledger.record(__file__, "timeline with history / without", with_s / without_s, "x",
                      f"timeline with no history {without_s:.3f} s", "-")
        ledger.record(__file__, f"timeline with {count} records (last day read)", with_s, "s",
                      "-", "<= 1")
        ledger.record(__file__, f"timeline --since {args.days:g}d, {count} records read",
                      whole_s, "s", f"timeline with no history {without_s:.3f} s", "-")
    finally:
        if worker is not None:
            worker.kill()
            worker.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
