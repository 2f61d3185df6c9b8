"""Reading a pasted output against diffing two full snapshots, measured in the same run.

The paste: a 2,000-line torch collect_env (the real H200 recording's head, then [pip3] lines
for the packages of bench_diff.py's large synthetic snapshot, 2,000 packages, 8 GPUs, 8
workers, a 1 MB patch). Both are timed as a user runs them, through the CLI:

  paste / full   `envsnap diff paste.txt a.yaml` (the paste read, imported in memory and
                 diffed against a full snapshot) vs `envsnap diff a.yaml b.yaml`   target <= 1.5

and in process (imports.build + diff() vs diff() of the two documents), for the record.

Usage: python3 bench/bench_import.py [--repeat 5]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import ledger

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
from bench_diff import best, cli_env, run_quiet, the_pair  # noqa: E402

from envsnap.diff.compare import diff  # noqa: E402
from envsnap.imports.build import Source, imported_snapshot  # noqa: E402
from envsnap.snapshot.store import dump_yaml  # noqa: E402

LINES = 2000
RECORDING = ROOT / "tests" / "data" / "h200" / "collect_env.txt"


def paste_of(packages: dict[str, str | None]) -> str:
    head = RECORDING.read_text().split("Versions of relevant libraries:\n")[0]
    room = LINES - len(head.splitlines()) - 2
    lines = [f"[pip3] {name}=={version}" for name, version in sorted(packages.items())
             if version][:room]
    return head + "Versions of relevant libraries:\n" + "\n".join(lines) + \
        "\n[conda] Could not collect\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    a, b = the_pair()
    text = paste_of(a["facts"]["python_env"]["packages"])
    print(f"paste: {len(text.splitlines())} lines, {len(text) / 1e3:.0f} kB")

    def import_and_diff() -> object:
        pasted = imported_snapshot([Source("paste.txt", text)], label="paste", host="imported",
                                   captured_at="2026-12-01T14:03:07+00:00")
        return diff(pasted, a)
    ours_s = best(args.repeat, import_and_diff)
    full_s = best(args.repeat, lambda: diff(a, b))
    print(f"import + diff (in process) {ours_s * 1000:9.1f} ms")
    print(f"diff of two full           {full_s * 1000:9.1f} ms")

    with tempfile.TemporaryDirectory() as folder:
        paths = [str(Path(folder) / name) for name in ("a.yaml", "b.yaml", "paste.txt")]
        Path(paths[0]).write_text(dump_yaml(a), encoding="utf-8")
        Path(paths[1]).write_text(dump_yaml(b), encoding="utf-8")
        Path(paths[2]).write_text(text, encoding="utf-8")
        env = cli_env(folder)
        pasted = [sys.executable, "-m", "envsnap", "diff", paths[2], paths[0]]
        full = [sys.executable, "-m", "envsnap", "diff", paths[0], paths[1]]
        run_quiet(pasted, env, (0, 1))
        run_quiet(full, env, (1,))
        pasted_s = best(args.repeat, lambda: run_quiet(pasted, env, (0, 1)))
        full_cli_s = best(args.repeat, lambda: run_quiet(full, env, (1,)))
    ratio = pasted_s / full_cli_s
    print(f"envsnap diff paste.txt a   {pasted_s * 1000:9.1f} ms")
    print(f"envsnap diff a b           {full_cli_s * 1000:9.1f} ms")
    print(f"paste / full               {ratio:9.2f} x   (target <= 1.5)")
    ledger.record(__file__, "paste / full", ratio, "x",
                  f"envsnap diff a b {full_cli_s * 1000:.0f} ms", "<= 1.5")
    return 0 if ratio <= 1.5 else 1


if __name__ == "__main__":
    sys.exit(main())
