#!/usr/bin/env bash
# The test command (README): install what the tests need, lint, type-check, then run them.
# The tests start their own sshd (and Slurm); this only makes sure OpenSSH (Chromium, for the
# report's browser test, and as root Slurm and munge) is installed, and installs
# the package into .venv/: a system Python may refuse `pip install` (PEP 668,
# "externally-managed-environment", as on stock Debian/Ubuntu), a venv never does.
# Arguments go to pytest (e.g. `bash tests/run.sh -m "not ssh"`; `-n 0` runs them in one process).
set -uo pipefail
cd "$(dirname "$0")/.."
VENV=.venv
# The Python the README's users have: the distribution's own /usr/bin/python3 (on Debian and
# Ubuntu: PEP 668, its sitecustomize.py in /usr/lib/python3.X), not whichever python3 comes
# first on PATH (pyenv, conda). PYTHON=... picks another one on purpose.
PYTHON=${PYTHON:-$( [ -x /usr/bin/python3 ] && echo /usr/bin/python3 || command -v python3 )}

as_root_apt_get() {
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
    echo "tests/run.sh: missing $*; install it (as root: apt-get install $*)" >&2
    return 1
  fi
  apt-get update -q && apt-get install -y -q "$@"
}

if ! command -v sshd >/dev/null && [ ! -x /usr/sbin/sshd ]; then
  as_root_apt_get openssh-server openssh-client git || exit 1
fi
# tests/e2e/test_report_browser.py renders the html report in headless Chromium (Debian's package)
if ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
  as_root_apt_get chromium || exit 1
fi
# tests/e2e/test_slurm.py starts a one-node Slurm (slurmctld, slurmd, munged) as root; a user who
# is not root cannot run it, so there the tests skip and nothing is installed.
if [ "$(id -u)" -eq 0 ]; then
  for program in munged slurmctld slurmd srun sbatch sinfo; do
    if ! PATH="$PATH:/usr/sbin:/sbin" command -v "$program" >/dev/null; then
      as_root_apt_get slurm-wlm munge || exit 1
      break
    fi
  done
fi

# A venv with a working pip: Debian's python3 makes one only with python3-venv (ensurepip)
# installed, and a failed attempt leaves a folder without pip behind.
# A venv left from another Python (an earlier run on PATH's python3) is made anew.
base_of() { "$1" -c 'import sys; print(sys.base_prefix)' 2>/dev/null; }
if ! "$VENV/bin/python" -m pip --version >/dev/null 2>&1 \
    || [ "$(base_of "$VENV/bin/python")" != "$(base_of "$PYTHON")" ]; then
  rm -rf "$VENV"
  if ! "$PYTHON" -m venv "$VENV" >/dev/null 2>&1; then
    rm -rf "$VENV"
    as_root_apt_get python3-venv || exit 1
    "$PYTHON" -m venv "$VENV" || exit 1
  fi
fi
"$VENV/bin/python" -m pip install -q -e '.[test]' || exit 1

"$VENV/bin/python" -m ruff check envsnap tests bench snapshots || exit 1
"$VENV/bin/python" -m mypy --strict envsnap || exit 1

# Parallel workers, one per core (pytest-xdist); the Slurm tests share one (conftest.py)
"$VENV/bin/python" -m pytest -q -n auto --dist loadgroup "$@"
status=$?
if [ "$status" -eq 5 ]; then
  echo "no tests were collected: that is a failure" >&2
  exit 1
fi
exit "$status"
