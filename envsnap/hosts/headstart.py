"""`envsnap capture local`: the agent started before the controller loads the rest.

Capturing this machine, the controller would otherwise spend its first 0.2 s importing what
builds, signs and stores a snapshot (hosts/capture.py, snapshot/, YAML) before the agent
even starts, then wait for the agent with nothing left to do. Started here, as soon as the
command line and the inventory say what it is asked, the agent's own start-up and its
collectors run on other cores meanwhile.

What is started is exactly the command the capture would run (hosts/capture.run_agent: the
same agent, digest, python and config), through the same `sh -c` LocalTransport uses; the
transport takes the running process in place of starting it only when the command it is
given is that one, character for character (an agent not yet cached here answers it as it
would have: "ship it first"). One left unused (a label that exists, an error before the
agent is needed) is stopped when the capture ends, as a local command is on a timeout.
"""
from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from envsnap.hosts.agentconfig import CaptureOptions
    from envsnap.hosts.inventory import Host

_started: dict[str, subprocess.Popen[bytes]] = {}   # command -> its process, not yet taken
_lock = threading.Lock()


def spawn(command: str) -> subprocess.Popen[bytes]:
    """`command` through sh on this machine, stdin at end of file, its output piped."""
    return subprocess.Popen(["sh", "-c", command], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def take(command: str) -> subprocess.Popen[bytes] | None:
    """The process started early for `command`, once; None if there is none."""
    with _lock:
        return _started.pop(command, None)


@contextmanager
def agent_started_early(hosts: list[Host], options: CaptureOptions) -> Iterator[None]:
    """For the block: the agent of a capture of this machine alone already running."""
    command = None
    if len(hosts) == 1 and hosts[0].is_local:
        # here, not at the top: every transport imports this module for take()
        from envsnap.hosts import payload
        from envsnap.hosts.agentconfig import agent_config

        host = hosts[0]
        command = payload.run_command(host.python, payload.agent_digest(),
                                      agent_config(host, options))
        with _lock:
            _started[command] = spawn(command)
    try:
        yield
    finally:
        unused = take(command) if command is not None else None
        if unused is not None:
            unused.kill()
            unused.communicate()
