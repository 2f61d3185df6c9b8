"""`envsnap timeline` against `envsnap capture` of the same host, measured in the same run.

The host: 20 git checkouts (each a clone that pulled 30 commits, so each reflog move has
commits to list) and a venv holding 500 distributions (.dist-info folders with METADATA,
RECORD and INSTALLER, as pip leaves them), on `local`: both commands run the same agent in
one exec, so what differs is the work each does on the host. Runs alternate, after one
warm-up each (the agent's bytecode cache).

Prints:  timeline / capture   median seconds of each, and their ratio (issue 28 asks <= 1.5);
         and the same of a timeline with nothing named, which finds what to read itself

Usage: python3 bench/bench_timeline.py [--repeat 7] [--repos 20] [--packages 500]
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
import venv
from pathlib import Path

import ledger

GIT_ENV = {"GIT_AUTHOR_NAME": "Bench", "GIT_AUTHOR_EMAIL": "bench@example.com",
           "GIT_COMMITTER_NAME": "Bench", "GIT_COMMITTER_EMAIL": "bench@example.com",
           "GIT_CONFIG_NOSYSTEM": "1"}


def git(cwd: Path, env: dict[str, str], *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


def make_checkouts(root: Path, count: int, env: dict[str, str]) -> list[Path]:
    upstream, dev = root / "upstream.git", root / "dev"
    git(root, env, "init", "-q", "--bare", "-b", "main", str(upstream))
    git(root, env, "clone", "-q", str(upstream), str(dev))
    for number in range(30):
        (dev / f"file{number % 7}.py").write_text(f"VALUE = {number}\n")
        git(dev, env, "add", "-A")
        git(dev, env, "commit", "-q", "-m", f"change {number}")
        if number == 14:
            git(dev, env, "push", "-q", "origin", "main")
    checkouts = []
    for number in range(count):
        checkout = root / f"repo{number}"
        git(root, env, "clone", "-q", str(upstream), str(checkout))
        checkouts.append(checkout)
    git(dev, env, "push", "-q", "origin", "main")
    for checkout in checkouts:
        git(checkout, env, "-c", "pull.rebase=false", "pull", "-q", "origin", "main")
    return checkouts


def make_venv(root: Path, packages: int) -> Path:
    venv.EnvBuilder(with_pip=False, symlinks=True).create(root / "venv")
    site = next((root / "venv" / "lib").glob("python3*/site-packages"))
    for number in range(packages):
        meta = site / f"package_{number}-1.{number}.0.dist-info"
        meta.mkdir()
        (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: package-{number}\n"
                                       f"Version: 1.{number}.0\n\nA package.\n")
        (meta / "INSTALLER").write_text("pip\n")
        (meta / "RECORD").write_text(f"package_{number}/__init__.py,,\n")
    return root / "venv" / "bin" / "python3"


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    started = time.perf_counter()
    result = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"failed: {' '.join(argv)}\n{result.stderr[-800:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--repos", type=int, default=20)
    parser.add_argument("--packages", type=int, default=500)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="envsnap-bench-timeline-"))
    try:
        env = {**os.environ, **GIT_ENV, "HOME": str(work), "ENVSNAP_STORE": str(work / "store")}
        checkouts = make_checkouts(work, args.repos, env)
        python = make_venv(work, args.packages)
        host = ["local", "--python", str(python)]
        for checkout in checkouts:
            host += ["--repo", str(checkout)]
        capture = [sys.executable, "-m", "envsnap", "capture", *host, "--label", "b",
                   "--force"]
        timeline = [sys.executable, "-m", "envsnap", "timeline", *host, "--since", "24h"]
        # nothing named: it finds the checkouts and the interpreter itself (the store's
        # capture recorded them; the host's running Python adds its own), run in a checkout
        unnamed = [sys.executable, "-m", "envsnap", "timeline", "local", "--since", "24h"]
        times: dict[str, list[float]] = {"capture": [], "timeline": [], "unnamed": []}
        for _ in range(args.repeat + 1):   # the first round warms up and is not counted
            for name, argv in (("capture", capture), ("timeline", timeline)):
                times[name].append(timed(argv, env, work))
            times["unnamed"].append(timed(unnamed, env, checkouts[0]))
        capture_s = statistics.median(times["capture"][1:])
        timeline_s = statistics.median(times["timeline"][1:])
        unnamed_s = statistics.median(times["unnamed"][1:])
        print(f"{args.repos} checkouts, {args.packages} packages, {args.repeat} runs each")
        print(f"capture   {capture_s:.3f} s (median)")
        print(f"timeline  {timeline_s:.3f} s (median)")
        print(f"timeline / capture = {timeline_s / capture_s:.2f}")
        print(f"timeline, nothing named  {unnamed_s:.3f} s (median)")
        ledger.record(__file__, "timeline / capture", timeline_s / capture_s, "x",
                      f"envsnap capture {capture_s:.3f} s", "<= 1.5")
        ledger.record(__file__, "timeline with nothing named / capture", unnamed_s / capture_s,
                      "x", f"envsnap capture {capture_s:.3f} s", "<= 1.5")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
