"""`envsnap capture local`: the agent started before the controller loads the rest.

Capturing this machine, the controller would otherwise spend its first 0.2 s importing what
builds, signs and stores a snapshot (hosts/capture.py, snapshot/, YAML) before the agent
even starts, then wait for the agent with nothing left to do. Started here, as soon as the
command line and the inventory say what it is asked, the agent's own start-up and its
collectors run on other cores meanwhile.

Where the python asked for is the very interpreter running envsnap (`runs_here`: the same
file, in the same folder, so the same venv, and this process started with no interpreter
option a fresh one would lack), the agent is a fork of this process: an interpreter already
started, its site and .pth files already run (on a GPU host's venv, ~60 ms that a second
interpreter pays again). The fork runs the agent's code from this installation, with its
output piped as a process's; the python_env collector then keeps every sys.path entry, none
having been added for the agent. Anywhere else (another python, threads running, no fork),
the agent is the command the capture would run (hosts/capture.run_agent: the same agent,
digest, python and config), through the same `sh -c` LocalTransport uses.

Either way the running agent, with the config it runs with, is handed to the capture
(EarlyAgent: hosts/capture.capture's `early`), which reads it in place of its first exec:
nothing is looked up, no command matched. A spawned agent not yet cached here answers as it
would have, "ship it first", and the capture ships it through its transport; a forked one
runs this installation's agent, so it always answers with a document. One left unread (a
label that exists, an error before the agent is read) is stopped when the block ends, as a
local command is on a timeout.
"""
from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, TYPE_CHECKING, Any, NoReturn, Union

from envsnap.hosts.pipes import read_to_end, spawn

if TYPE_CHECKING:
    from envsnap.hosts.agentconfig import CaptureOptions
    from envsnap.hosts.inventory import Host
    from envsnap.hosts.payload import CollectConfig

Started = Union[subprocess.Popen[bytes], "ForkedAgent"]


class EarlyAgent:
    """The agent of a capture of this machine, already running, and the config it was
    started with: handed to that capture, which reads it once (take)."""

    def __init__(self, config: CollectConfig, process: Started) -> None:
        self.config = config
        self._process: Started | None = process

    def take(self) -> Started:
        """The running agent, for the capture to read to its end; once."""
        process, self._process = self._process, None
        assert process is not None, "an agent started early is read once"
        return process

    def stop_unread(self) -> None:
        if self._process is not None:
            process, self._process = self._process, None
            stop(process)


@contextmanager
def agent_started_early(hosts: list[Host],
                        options: CaptureOptions) -> Iterator[EarlyAgent | None]:
    """For the block: the agent of a capture of this machine alone already running, for the
    block to hand to that capture (None for any other capture); stopped at the end of the
    block if the capture never read it."""
    if len(hosts) != 1 or not hosts[0].is_local:
        yield None
        return
    from envsnap.hosts.agentconfig import agent_config

    host = hosts[0]
    config = agent_config(host, options)
    early = EarlyAgent(config, fork_agent(config) if runs_here(host.python)
                       else spawn_agent(host, config))
    try:
        yield early
    finally:
        early.stop_unread()


def spawn_agent(host: Host, config: CollectConfig) -> subprocess.Popen[bytes]:
    """The agent as the capture would run it (hosts/capture.run_agent: the same agent,
    digest, python and config)."""
    from envsnap.hosts import payload  # on use: a forked agent starts before it loads

    return spawn(payload.run_command(host.python, payload.agent_digest(), config))


def stop(agent: Started) -> None:
    """An agent started for nothing: killed, its pipes read to their end, reaped."""
    agent.kill()
    agent.communicate()


def runs_here(python: str) -> bool:
    """Whether `python`, as this machine's sh would find it, is the interpreter running this
    process, started as a fresh `python FOLDER` would be, and alone (a fork of a process
    with other threads may deadlock)."""
    import shutil

    found = shutil.which(python)
    if not found or not sys.executable or not hasattr(os, "fork") \
            or threading.active_count() != 1:
        return False
    # A venv is told by the folder its python is run from: the same file in another folder
    # (the base interpreter a venv links to) is another environment.
    if os.path.dirname(os.path.abspath(found)) != os.path.dirname(os.path.abspath(sys.executable)):
        return False
    try:
        return os.path.samefile(found, sys.executable) and started_plainly()
    except OSError:
        return False


def started_plainly() -> bool:
    """No interpreter option before the program on this process's command line (-I, -S, -O,
    -X ...; `-m envsnap`, `-c CODE` and a script are plain): the flags a fresh agent would
    run with, and so record."""
    argv: list[str] = getattr(sys, "orig_argv", [])   # Python 3.10+
    return len(argv) > 1 and (argv[1] in ("-m", "-c") or not argv[1].startswith("-"))


def fork_agent(config: CollectConfig) -> ForkedAgent:
    """The agent, run by a fork of this process, its output piped back."""
    sys.stdout.flush()   # what this process has written is not the child's to write again
    sys.stderr.flush()
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os.close(out_read)
        os.close(err_read)
        run_forked_agent({**config, "in_process": True}, started, out_write, err_write)
    os.close(out_write)
    os.close(err_write)
    return ForkedAgent(pid, out_read, err_read)


def run_forked_agent(config: CollectConfig, started: float, out: int, err: int) -> NoReturn:
    """The child: stdin at end of file, stdout and stderr the pipes; the agent's document
    written, then exit without this process's cleanup (atexit, finally blocks and buffers
    are the controller's)."""
    gc.freeze()   # the controller's objects: never this child's to walk or free
    code = 1
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        for fd in (null, out, err):
            os.close(fd)
        from envsnap.agent.runner import agent_output

        data = agent_output(dict(config), (started, 0.0)).encode()
        while data:
            data = data[os.write(1, data):]
        code = 0
    except BaseException as exc:   # said as the agent's last line, as a python run would
        os.write(2, f"{type(exc).__name__}: {exc}\n".encode("utf-8", "replace"))
    finally:
        os._exit(code)


class ForkedAgent:
    """A forked agent as collect_process reads a process (subprocess.Popen's members it
    uses: its two pipes, returncode, poll, wait, kill, communicate)."""

    def __init__(self, pid: int, stdout: int, stderr: int) -> None:
        self.pid = pid
        self.args = ["envsnap agent (forked)"]
        self.stdout: IO[bytes] | None = os.fdopen(stdout, "rb", buffering=0)
        self.stderr: IO[bytes] | None = os.fdopen(stderr, "rb", buffering=0)
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if timeout is None and self.returncode is None:
            self.returncode = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 0.0005
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            time.sleep(pause)
            pause = min(2 * pause, 0.01)
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def communicate(self, input: Any = None, timeout: float | None = None) -> tuple[bytes, bytes]:
        """What is left on both pipes (read to their end, then closed, as Popen's), then the
        exit."""
        deadline = None if timeout is None else time.monotonic() + timeout
        read: dict[Any, bytearray] = {self.stdout: bytearray(), self.stderr: bytearray()}
        read_to_end(read, deadline, lambda stream, chunk: read[stream].extend(chunk), self.args)
        for stream in (self.stdout, self.stderr):
            if stream is not None:
                stream.close()
        self.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return bytes(read[self.stdout]), bytes(read[self.stderr])
