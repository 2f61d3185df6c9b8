"""envsnap run where looking a name up cannot leave this machine.

A name that does not resolve is only known as such once the resolver was asked, and asking
DNS sends the name off the machine. So the command runs in a network namespace of its own
(`unshare --net`: loopback only, brought up when `ip` is there) and a mount namespace where
/etc/nsswitch.conf says `hosts: files`: a name is looked up in /etc/hosts alone, and one that
is not there is "no such name" (EAI_NONAME) at once, as DNS would answer for a name that
does not exist. The machine's own mounts are untouched (unshare makes the new namespace's
mounts private). It needs root (or a kernel that lets users unshare both); where it cannot,
`offline_available` says why and the tests skip.
"""
from __future__ import annotations

import functools
import subprocess
import sys
import tempfile
from pathlib import Path

NSSWITCH = "hosts: files\n"
# $1: the nsswitch.conf to mount; the rest: the command. The mount fails when the machine has
# no /etc/nsswitch.conf: then glibc would ask DNS, so nothing runs.
INSIDE = ('mount --bind "$1" /etc/nsswitch.conf || exit 99; shift; '
          'ip link set lo up 2>/dev/null; exec "$@"')


def offline_argv(command: list[str], nsswitch: Path) -> list[str]:
    return ["unshare", "--net", "--mount", "sh", "-c", INSIDE, "sh", str(nsswitch), *command]


@functools.lru_cache(maxsize=1)
def offline_available() -> str | None:
    """None when commands can run offline here, else why not."""
    with tempfile.TemporaryDirectory() as folder:
        nsswitch = Path(folder) / "nsswitch.conf"
        nsswitch.write_text(NSSWITCH)
        try:
            probe = subprocess.run(offline_argv(["true"], nsswitch), capture_output=True,
                                   text=True, timeout=30)
        except OSError as exc:
            return f"unshare cannot run: {exc.strerror}"
    if probe.returncode != 0:
        return f"cannot make a network and mount namespace: {probe.stderr.strip()}"
    return None


def run_offline(args: list[str], env: dict[str, str], cwd: Path,
                timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`envsnap ARGS` as a subprocess in its own network and mount namespaces (above)."""
    nsswitch = cwd / "offline-nsswitch.conf"
    nsswitch.write_text(NSSWITCH)
    return subprocess.run(offline_argv([sys.executable, "-m", "envsnap", *args], nsswitch),
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
