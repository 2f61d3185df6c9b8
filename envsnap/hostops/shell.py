"""The one handle every host operation takes: a host, its connection, a shell command.

`Shell` is what an operation needs of its caller, nothing more: the host (its name for
messages, its python for the write policy) and a way to run a command and put a file.
A playbook task's Context is one (it adds check mode, diff mode, a store); restore, bisect
and explain, which run git and write files without a playbook, hand over a `HostShell`.
Also here: what every operation's shell text needs (a path quoted for the host, a
command's last line, a private temp file uploaded).
"""
from __future__ import annotations

import shlex
import uuid
from dataclasses import dataclass, field
from typing import Protocol

from envsnap.hosts.inventory import Host
from envsnap.hosts.transport import Result, Transport

DEFAULT_COMMAND_TIMEOUT = 600.0
TMP_DIR = ".cache/envsnap/tmp"       # relative to the login home, like the agent's cache


class OthersCheckouts:
    """--as-root-in-others-checkouts was given: the checkouts of other users that envsnap may
    move, each (by its top folder) with the `-c` flags that switch off the drivers its config
    names (hostops/git.py fills it when it finds the checkout; agent/gitsafe.py says why)."""

    def __init__(self) -> None:
        self.switches: dict[str, list[str]] = {}


class Shell(Protocol):
    """A host and a way to run commands on it."""

    @property
    def host(self) -> Host: ...

    @property
    def transport(self) -> Transport: ...

    @property
    def others(self) -> OthersCheckouts | None: ...   # None: other users' checkouts refused

    def sh(self, command: str, timeout: float | None = None) -> Result: ...


@dataclass(frozen=True)
class HostShell:
    """A Shell over an open transport, for the commands that run no playbook."""

    host: Host
    transport: Transport
    command_timeout: float = DEFAULT_COMMAND_TIMEOUT
    others: OthersCheckouts | None = field(default=None, compare=False)

    def sh(self, command: str, timeout: float | None = None) -> Result:
        return self.transport.run(command, timeout or self.command_timeout)


def quote_path(path: str) -> str:
    """For the host's shell: ~ becomes $HOME, the rest is quoted."""
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        return '"$HOME"/' + shlex.quote(path[2:])
    return shlex.quote(path)


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def upload(shell: Shell, data: bytes, kind: str, suffix: str = "") -> str:
    """Data into a private temp file on the host; returns its path as `~/...`."""
    shell.sh(f'mkdir -p "$HOME"/{TMP_DIR}')
    name = f"{TMP_DIR}/{kind}-{uuid.uuid4().hex[:12]}{suffix}"
    shell.transport.put(data, name)
    return f"~/{name}"
