"""Stand-ins for the tests of `envsnap watch --install`: the real `crontab` edits the table
of the user running the suite (root's, in CI), and the real `systemctl --user` needs a
user's systemd, which a container or CI machine rarely runs. The crontab behaves as crontab
does for a user, keeping the table in the file $CRONTAB_FILE names; the systemctl answers
as a running user instance does and writes each command line it was given to
$SYSTEMCTL_LOG."""
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


FAKE_SYSTEMCTL = """#!/bin/sh
# a user instance that answers: each command line logged, a user's show-environment printed
echo "$*" >> "$SYSTEMCTL_LOG"
[ "$1 $2" != "--user show-environment" ] || echo "HOME=$HOME"
"""


def write_fake_systemctl(folder: Path) -> Path:
    """`folder/systemctl`, executable: put `folder` first on PATH and set SYSTEMCTL_LOG."""
    program = folder / "systemctl"
    program.write_text(FAKE_SYSTEMCTL)
    program.chmod(0o755)
    return program
