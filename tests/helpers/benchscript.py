"""The benchmark script of the bench tests (tests/cli/test_bench_cli.py,
tests/cli/test_charts.py)."""
from __future__ import annotations

import sys
from pathlib import Path

# A benchmark that prints its metric between log lines; each run bumps a counter, so the
# values differ from run to run; `base` holds the level; it fails on the run FAIL_AT asks.
# Its stdout is line-buffered, as a terminal's is: into a pipe Python would hold the log lines
# until exit, after the error written to stderr, and the tests read the order they were written.
SCRIPT = """\
import pathlib, sys
sys.stdout.reconfigure(line_buffering=True)
here = pathlib.Path(sys.argv[0]).parent
counter = here / "counter"
n = int(counter.read_text()) if counter.exists() else 0
counter.write_text(str(n + 1))
base = float((here / "base").read_text()) if (here / "base").exists() else 91.0
print("loading model shards ...")
if (here / "fail_at").exists() and int((here / "fail_at").read_text()) == n + 1:
    print("RuntimeError: CUDA error: an illegal memory access", file=sys.stderr)
    sys.exit(2)
print("gen throughput (token/s): %.1f" % (base + (n % 5) * 0.7))
print("shutting down")
"""


def write_bench(folder: Path) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "bench_one.py").write_text(SCRIPT)
    return f"{sys.executable} {folder / 'bench_one.py'}"
