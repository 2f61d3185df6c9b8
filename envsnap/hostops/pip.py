"""Package versions pinned on the host with its own pip: what restore --pip and explain --pip
do to a package, one way.

`--no-deps`: a pin puts back one version, it does not pull a new dependency tree in (the
snapshot recorded every package, each one drifted gets its own pin).
"""
from __future__ import annotations

import shlex

from envsnap.errors import HostError
from envsnap.hostops.shell import Shell

PIP_TIMEOUT = 1800.0   # a wheel built from source takes minutes


def pin_packages(shell: Shell, pins: list[str]) -> None:
    """Install each NAME==VERSION of `pins`; HostError with pip's last line if pip fails."""
    host = shell.host
    command = (f"{shlex.quote(host.python)} -m pip install --no-deps --quiet "
               + " ".join(shlex.quote(pin) for pin in pins))
    result = shell.sh(command, PIP_TIMEOUT)
    if result.exit_code != 0:
        last = (result.stderr.strip().splitlines() or ["?"])[-1]
        packages = f"{len(pins)} package{'' if len(pins) == 1 else 's'}"
        raise HostError(f"{host.name}: pip could not pin {packages}: {last}")
