#!/usr/bin/env bash
# The test command (README): install what the tests need, then run them.
# The tests start their own sshd; this only makes sure OpenSSH and the package are installed.
set -uo pipefail
cd "$(dirname "$0")/.."

if ! command -v sshd >/dev/null && [ ! -x /usr/sbin/sshd ]; then
  apt-get update -q && apt-get install -y -q openssh-server openssh-client git || exit 1
fi
python3 -m pip install -q -e '.[test]' || exit 1

python3 -m pytest -q "$@"
status=$?
if [ "$status" -eq 5 ]; then
  echo "no tests were collected: that is a failure" >&2
  exit 1
fi
exit "$status"
