"""Build the STORY (docs/STORY.md) example snapshots: story-good.yaml and story-bad.yaml
beside this file.

    python3 snapshots/examples/make_examples.py [FOLDER]
    envsnap diff snapshots/examples/story-good.yaml snapshots/examples/story-bad.yaml

The snapshots are built by envsnap.demo.snapshots (see its docstring for what is the STORY's and
what is made up) and always come out byte for byte the same: tests/e2e/test_examples.py checks
that the committed files are what this script writes.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # this checkout's envsnap

from envsnap.demo.snapshots import write_examples  # noqa: E402


def main(argv: list[str]) -> int:
    folder = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent
    for path in write_examples(folder):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
