#!/usr/bin/env bash
# The test command (README): install what the tests need, lint, type-check, then run them.
# The tests start their own sshd (and Slurm); this only makes sure OpenSSH's server (Chromium,
# for the report's browser test, and as root Slurm and munge) is there, and installs
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

# What the tests need from the system is brought in so as to change the machine no more than
# it must: apt installs no recommended extras and upgrades no installed package (it refuses
# instead and says which), no service it brings is started, and none is left enabled at boot.
# OpenSSH's server is unpacked into .tools/ rather than installed: Debian ties it to the
# client's exact version, so installing it upgrades the client whenever the archive has moved on,
# and it would leave sshd enabled at boot; the tests start their own from ENVSNAP_TEST_SSHD.
can_apt() { [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; }
need() { echo "tests/run.sh: missing $*; install it (as root: apt-get install $*)" >&2; return 1; }
apt_updated=
apt_update() { [ -n "$apt_updated" ] || { apt-get update -q && apt_updated=1; }; }

apt_install() {
  can_apt || { need "$@"; return 1; }
  apt_update || return 1
  local plan upgrades made_policy= package unit
  plan=$(apt-get install -s -q --no-install-recommends "$@") || { echo "$plan" >&2; return 1; }
  upgrades=$(sed -n 's/^Inst \([^ ]*\) \[.*/\1/p' <<<"$plan" | tr '\n' ' ')
  if [ -n "$upgrades" ]; then
    echo "tests/run.sh: installing $* would upgrade installed packages ($upgrades); not done" >&2
    return 1
  fi
  if [ ! -e /usr/sbin/policy-rc.d ]; then   # Debian's switch: maintainer scripts start nothing
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d
    made_policy=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@"
  local status=$?
  [ -z "$made_policy" ] || rm -f /usr/sbin/policy-rc.d
  # the services of the packages this install added, enabled by their scripts: left disabled
  for package in $(sed -n 's/^Inst \([^ ]*\) .*/\1/p' <<<"$plan"); do
    for unit in $(dpkg -L "$package" 2>/dev/null | sed -n 's|.*/systemd/system/\([^/]*\.service\)$|\1|p'); do
      if systemctl is-enabled -q "$unit" 2>/dev/null; then systemctl disable -q "$unit"; fi
    done
  done
  return $status
}

# sshd and the libraries of its that are not installed, unpacked (not installed) into .tools/
unpack_sshd() {
  local root="$PWD/.tools/openssh" work package deps
  if [ ! -x "$root/usr/sbin/sshd" ]; then
    can_apt || { need openssh-server; return 1; }
    apt_update || return 1
    deps=$(apt-cache depends --no-recommends --no-suggests openssh-server \
           | sed -n 's/^ *|\{0,1\}\(Pre\)\{0,1\}Depends: \(lib[^ ]*\)$/\2/p' | sort -u)
    work=$(mktemp -d) || return 1
    for package in openssh-server $deps; do
      dpkg-query -W -f '${Status}' "$package" 2>/dev/null | grep -q 'ok installed' \
        && [ "$package" != openssh-server ] && continue
      (cd "$work" && apt-get download -q -o APT::Sandbox::User=root "$package") || { rm -rf "$work"; return 1; }
    done
    rm -rf "$root" && mkdir -p "$root"
    for deb in "$work"/*.deb; do dpkg-deb -x "$deb" "$root" || { rm -rf "$work"; return 1; }; done
    rm -rf "$work"
  fi
  local libs
  libs=$(find "$root" \( -name '*.so' -o -name '*.so.*' \) -printf '%h\n' | sort -u | tr '\n' ':')
  {
    echo '#!/bin/sh'
    [ -z "$libs" ] || echo "export LD_LIBRARY_PATH=${libs%:}\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
    echo "exec $root/usr/sbin/sshd \"\$@\""
  } > "$PWD/.tools/sshd" && chmod 755 "$PWD/.tools/sshd"
  export ENVSNAP_TEST_SSHD="$PWD/.tools/sshd"
  # Started as root, sshd drops to its privilege separation user in an empty /run/sshd and
  # refuses to start without them. Installing openssh-server makes both; unpacking does not,
  # so a machine that never had the package gets the same system user (no home, no shell).
  if [ "$(id -u)" -eq 0 ] && ! getent passwd sshd >/dev/null; then
    useradd --system --no-create-home --home-dir /run/sshd --shell /usr/sbin/nologin sshd \
      || { echo "tests/run.sh: could not add the system user sshd that sshd needs" >&2; return 1; }
  fi
  [ "$(id -u)" -ne 0 ] || install -d -m 755 /run/sshd
}

command -v git >/dev/null || apt_install git || exit 1
command -v ssh >/dev/null || apt_install openssh-client || exit 1
if ! command -v sshd >/dev/null && [ ! -x /usr/sbin/sshd ]; then
  unpack_sshd || exit 1
fi
# tests/e2e/test_report_browser.py renders the html report in headless Chromium (Debian's package)
if ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
  apt_install chromium || exit 1
fi
# tests/e2e/test_slurm.py starts a one-node Slurm (slurmctld, slurmd, munged) as root; a user who
# is not root cannot run it, so there the tests skip and nothing is installed.
if [ "$(id -u)" -eq 0 ]; then
  for program in munged slurmctld slurmd srun sbatch sinfo; do
    if ! PATH="$PATH:/usr/sbin:/sbin" command -v "$program" >/dev/null; then
      apt_install slurmctld slurmd slurm-client munge || exit 1
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
    apt_install python3-venv || exit 1
    "$PYTHON" -m venv "$VENV" || exit 1
  fi
fi
"$VENV/bin/python" -m pip install -q -e '.[test]' || exit 1

"$VENV/bin/python" -m ruff check envsnap tests bench snapshots || exit 1
"$VENV/bin/python" -m mypy --strict envsnap || exit 1

# Parallel workers (pytest-xdist), one more than the cores: a third of the suite's time is
# spent waiting (servers, benchmarks, sshd), which the extra worker fills; the Slurm tests
# share one (conftest.py). WORKERS=N picks another number. The slowest tests are listed at
# the end: the suite must stay one a developer runs often.
WORKERS=${WORKERS:-$(( $(nproc 2>/dev/null || echo 1) + 1 ))}
"$VENV/bin/python" -m pytest -q -n "$WORKERS" --dist loadgroup --durations=15 "$@"
status=$?
if [ "$status" -eq 5 ]; then
  echo "no tests were collected: that is a failure" >&2
  exit 1
fi
exit "$status"
