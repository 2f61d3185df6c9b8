"""Package versions pinned, and packages removed, on the host with its own pip: what restore
--pip and explain --pip do to a package, one way.

`--no-deps`: a pin puts back one version, it does not pull a new dependency tree in (the
snapshot recorded every package, each one drifted gets its own pin).
"""
from __future__ import annotations

import shlex

from envsnap.errors import HostError
from envsnap.hostops.shell import Shell

PIP_TIMEOUT = 1800.0   # a wheel built from source takes minutes

# How pip says it left a package where it was (outside the environment, or no record of its
# files): it exits 0 all the same.
LEFT_IN_PLACE = ("Not uninstalling", "Can't uninstall")


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


def remove_packages(shell: Shell, names: list[str]) -> dict[str, str]:
    """Uninstall each of `names` with the host's pip, one at a time (one that pip cannot
    remove does not keep the others); {name: pip's last line} of each it refused or left, for
    the report. Whether a package is really gone is the verify capture's to say: pip leaves a
    copy outside the python's own environment in place and still exits 0."""
    host = shell.host
    said = {}
    for name in names:
        result = shell.sh(f"{shlex.quote(host.python)} -m pip uninstall --yes "
                          f"{shlex.quote(name)}", PIP_TIMEOUT)
        lines = [line.strip() for line in (result.stderr + "\n" + result.stdout).splitlines()
                 if line.strip()]
        left = [line for line in lines if line.startswith(LEFT_IN_PLACE)]
        if result.exit_code != 0 or left:
            said[name] = (left or lines or [f"pip exited {result.exit_code}"])[
                0 if left else -1]
    return said
