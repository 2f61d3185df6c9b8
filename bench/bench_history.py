"""What the history store adds to the disk per record (issue 42's "Done means").

Real captures of this host (`envsnap capture local`, a git checkout and one worker process
matched by --proc), each recorded into the history of a fresh store:
- an unchanged capture: the same host captured again, nothing moved;
- a changed worker env: the worker restarted with one variable gone, captured again.
And a GPU host's: the recorded H200 snapshot of tests/data/h200x2-story recorded, then again
with only what moves on its own changed (its capture time, and the other snapshot's volatile
readings of the same GPUs): an unchanged capture of that host.
Each growth is the bytes the history's folder grew by, printed against the size of that
capture's own YAML snapshot, measured in the same run, the issue's target beside it.
Median of --runs.

Usage: PYTHONPATH=. python3 bench/bench_history.py [--runs 5]
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
from envsnap.history.store import History  # noqa: E402
from envsnap.snapshot.store import Store  # noqa: E402

WORKER = "import time; time.sleep(600)  # envsnap-bench-history-worker"


def folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def start_worker(env: dict[str, str]) -> subprocess.Popen[bytes]:
    worker = subprocess.Popen([sys.executable, "-c", WORKER], env=env)
    time.sleep(0.3)
    return worker


def capture(env: dict[str, str], checkout: Path, label: str) -> None:
    subprocess.run([sys.executable, "-m", "envsnap", "capture", "local", "--repo",
                    str(checkout), "--proc", "envsnap-bench-history-worker", "--label", label],
                   env=env, check=True, capture_output=True)


def one_run(tmp: Path, number: int) -> tuple[int, int, int]:
    """(growth of an unchanged capture, growth of a changed worker env, YAML size)."""
    env = dict(os.environ, ENVSNAP_STORE=str(tmp / f"store{number}"),
               XDG_CONFIG_HOME=str(tmp / "config"),
               PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    checkout = tmp / "checkout"
    store = Store(env["ENVSNAP_STORE"])
    history = History.of_store(store)
    worker = start_worker({**env, "NCCL_PROTO": "LL"})
    try:
        capture(env, checkout, "first")
        history.record(store.load("first"), reason="bench")
        before = folder_bytes(history.root)
        capture(env, checkout, "unchanged")
        history.record(store.load("unchanged"), reason="bench")
        unchanged = folder_bytes(history.root) - before
    finally:
        worker.kill()
        worker.wait()
    worker = start_worker(env)   # restarted without NCCL_PROTO
    try:
        capture(env, checkout, "restarted")
        before = folder_bytes(history.root)
        history.record(store.load("restarted"), reason="bench")
        changed = folder_bytes(history.root) - before
    finally:
        worker.kill()
        worker.wait()
    return unchanged, changed, store.path_for("unchanged").stat().st_size


def h200_unchanged(tmp: Path) -> tuple[int, int]:
    """(growth of an unchanged capture of the H200 host, its YAML size)."""
    story = Store(Path(__file__).resolve().parent.parent / "tests" / "data" / "h200x2-story"
                  / "snapshots")
    history = History(tmp / "h200-history")
    good = story.load("good")
    history.record(good, reason="bench")
    before = folder_bytes(history.root)
    again = story.load("good")
    again["volatile"] = story.load("bad")["volatile"]
    again["meta"]["captured_at"] = story.load("bad")["meta"]["captured_at"]
    del again["meta"]["signature"]
    history.record(again, reason="bench")
    return folder_bytes(history.root) - before, story.path_for("good").stat().st_size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        subprocess.run(["git", "init", "-q", str(tmp / "checkout")], check=True)
        (tmp / "checkout" / "train.py").write_text("print('train')\n")
        runs = [one_run(tmp, number) for number in range(args.runs)]
        gpu_growth, gpu_yaml = h200_unchanged(tmp)
    unchanged = statistics.median(run[0] for run in runs)
    changed = statistics.median(run[1] for run in runs)
    yaml_size = statistics.median(run[2] for run in runs)
    print(f"YAML snapshot of this host: {yaml_size / 1024:.1f} KiB")
    print(f"an unchanged capture adds {unchanged / 1024:.1f} KiB "
          f"({unchanged / yaml_size:.3f} of its YAML; target <= 20 KB), median of {args.runs}")
    print(f"a changed worker env adds {changed / 1024:.1f} KiB "
          f"({changed / yaml_size:.3f} of its YAML; target <= 5 KB)")
    print(f"the H200 host's snapshot: {gpu_yaml / 1024:.1f} KiB of YAML; an unchanged capture "
          f"adds {gpu_growth / 1024:.1f} KiB ({gpu_growth / gpu_yaml:.3f} of its YAML)")
    ledger.record(__file__, "history growth / YAML, unchanged H200 capture",
                  gpu_growth / gpu_yaml, "x", f"YAML snapshot {gpu_yaml / 1024:.1f} KiB; growth "
                  f"{gpu_growth / 1024:.1f} KiB", "<= 20 KB")
    ledger.record(__file__, "history growth / YAML, unchanged capture", unchanged / yaml_size,
                  "x", f"YAML snapshot {yaml_size / 1024:.1f} KiB; growth "
                  f"{unchanged / 1024:.1f} KiB", "<= 20 KB")
    ledger.record(__file__, "history growth / YAML, changed worker env", changed / yaml_size,
                  "x", f"YAML snapshot {yaml_size / 1024:.1f} KiB; growth "
                  f"{changed / 1024:.1f} KiB", "<= 5 KB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
