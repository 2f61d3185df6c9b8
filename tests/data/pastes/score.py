"""Scores `envsnap import` on the corpus of real pastes (threads/README.md): every paste in each
copy style imported through the real CLI, in this process, into a store of its own, and its
snapshot compared with the labelled facts. Prints the counts per tool and copy style, then
every miss with its reason. Run from the repository: `python tests/data/pastes/score.py`."""
from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
from pathlib import Path

TESTS = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(TESTS.parent), str(TESTS)]

from helpers.pastecorpus import misses, score, table  # noqa: E402

from envsnap.cli.main import main  # noqa: E402


def in_process(argv: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, err.getvalue()


def run() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        # a HOME of its own: a signing key made on the first save stays in the scratch folder
        os.environ.update(HOME=scratch, XDG_CONFIG_HOME=scratch, XDG_CACHE_HOME=scratch,
                          XDG_DATA_HOME=scratch, XDG_STATE_HOME=scratch)
        outcomes = score(in_process, Path(scratch) / "store")
    print(table(outcomes))
    print()
    print(misses(outcomes))


if __name__ == "__main__":
    run()
