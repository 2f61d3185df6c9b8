"""What a big pull costs the git collector and the diff (issue 13's "Done means").

A synthetic upstream with a base of --base commits (a few files each), a clone at that base,
then --pull more commits upstream (3 files each), pulled. Measured: the git collector on the
clone before the pull and on the same clone after it (median of --runs; target: after/before
at most 1.5), explaining the move between the two (target: under 0.5 s), and how much the
repository's facts grow per 100 commits pulled (all of them are recorded now).

Usage: PYTHONPATH=. python3 bench/bench_git_pull.py [--base 300] [--pull 500] [--runs 5]
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from envsnap.agent import git as git_collector  # noqa: E402
from envsnap.diff.gitexplain import explain  # noqa: E402
from envsnap.diff.hotpaths import hot_patterns  # noqa: E402


def run_git(cwd: Path, *args: str, stdin: bytes | None = None) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@x", GIT_COMMITTER_NAME="b",
               GIT_COMMITTER_EMAIL="b@x", GIT_CONFIG_NOSYSTEM="1", HOME=str(cwd))
    proc = subprocess.run(["git", *args], cwd=cwd, env=env, input=stdin, capture_output=True,
                          check=True)
    return proc.stdout.decode().strip()


def fast_import(repo: Path, first: int, count: int, parent: str | None) -> None:
    """`count` commits on main through git fast-import: thousands in a second."""
    out = []
    mark = 0
    for number in range(first, first + count):
        mark += 1
        when = 1_760_000_000 + number
        message = f"change {number}".encode()
        out.append(b"commit refs/heads/main\nmark :%d\n" % mark)
        out.append(b"author b <b@x> %d +0000\ncommitter b <b@x> %d +0000\n" % (when, when))
        out.append(b"data %d\n%s\n" % (len(message), message))
        if mark == 1 and parent:
            out.append(b"from %s\n" % parent.encode())
        for file in range(3):
            body = b"value = %d\n" % number
            path = b"src/module_%d/file_%d.py" % (number % 40, file)
            out.append(b"M 100644 inline %s\ndata %d\n%s\n" % (path, len(body), body))
    run_git(repo, "fast-import", "--quiet", stdin=b"".join(out))


def median_seconds(repo: Path, runs: int) -> tuple[float, dict[str, Any]]:
    times, facts = [], {}
    for _ in range(runs):
        started = time.perf_counter()
        facts = git_collector.collect({"repos": [str(repo)]})["facts"]["repos"][str(repo)]
        times.append(time.perf_counter() - started)
    return statistics.median(times), facts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", type=int, default=300)
    parser.add_argument("--pull", type=int, default=500)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        upstream, clone = Path(tmp) / "up", Path(tmp) / "clone"
        upstream.mkdir()
        run_git(upstream, "init", "-q", "-b", "main")
        fast_import(upstream, 0, args.base, None)
        run_git(Path(tmp), "clone", "-q", f"file://{upstream}", str(clone))
        before_s, before = median_seconds(clone, args.runs)
        fast_import(upstream, args.base, args.pull, run_git(upstream, "rev-parse", "main"))
        run_git(clone, "pull", "-q", "--ff-only", "origin", "main")
        after_s, after = median_seconds(clone, args.runs)
        started = time.perf_counter()
        explained = explain(before, after, hot_patterns())
        diff_s = time.perf_counter() - started
        size = {name: len(json.dumps(repo)) for name, repo in (("before", before),
                                                                ("after", after))}
        pulled = int(run_git(clone, "rev-list", "--count", "HEAD@{1}..HEAD"))
    print(f"git collector, median of {args.runs}: {before_s * 1000:.1f} ms before the pull, "
          f"{after_s * 1000:.1f} ms after {pulled} commits pulled "
          f"(ratio {after_s / before_s:.2f}, target <= 1.5)")
    print(f"explained: {len(explained['added'])} commits added of {pulled} "
          f"(complete: {explained['complete']}), in {diff_s * 1000:.1f} ms (target < 500 ms)")
    ledger.record(__file__, "git collector, after / before the pull", after_s / before_s, "x",
                  f"before the pull {before_s * 1000:.1f} ms", "<= 1.5")
    ledger.record(__file__, f"explaining {pulled} commits pulled", diff_s * 1000, "ms", "-",
                  "< 500")
    growth = (size["after"] - size["before"]) / max(1, pulled) * 100
    print(f"repo facts: {size['before']} bytes before, {size['after']} after: "
          f"{growth / 1024:.1f} KiB per 100 commits pulled")
    return 0


if __name__ == "__main__":
    sys.exit(main())
