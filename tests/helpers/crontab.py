"""A stand-in `crontab` for the tests of `envsnap watch --install`: the real one edits the
table of the user running the suite (root's, in CI). It behaves as crontab does for a user,
keeping the table in the file $CRONTAB_FILE names."""
from __future__ import annotations

from pathlib import Path

FAKE_CRONTAB = """#!/bin/sh
# -l prints the table (none: a message, exit 1), - reads one
case "$1" in
  -l) if [ -f "$CRONTAB_FILE" ]; then cat "$CRONTAB_FILE"; else
        echo "no crontab for $(id -un)" >&2; exit 1; fi ;;
  -) cat > "$CRONTAB_FILE" ;;
  *) echo "usage" >&2; exit 1 ;;
esac
"""


def write_fake_crontab(folder: Path) -> Path:
    """`folder/crontab`, executable: put `folder` first on PATH and set CRONTAB_FILE."""
    program = folder / "crontab"
    program.write_text(FAKE_CRONTAB)
    program.chmod(0o755)
    return program
