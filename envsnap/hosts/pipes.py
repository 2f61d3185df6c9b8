"""A local process's pipes: a command started with its output piped (spawn), and read to
their end, each chunk handed on as it comes.

One loop for both kinds of local process the controller reads: a command it started
(transport.pump, with its output cap and its stderr followed line by line) and the agent
that `capture local` forked (headstart.ForkedAgent.communicate, which has no Popen to
lean on). Neither imports the other's module, so the loop lives below both.
"""
from __future__ import annotations

import os
import selectors
import subprocess
import time
from collections.abc import Callable, Iterable
from typing import IO, Any

READ_CHUNK = 1 << 16


def spawn(command: str) -> subprocess.Popen[bytes]:
    """`command` through sh on this machine, stdin at end of file, its output piped."""
    return subprocess.Popen(["sh", "-c", command], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def read_to_end(streams: Iterable[IO[bytes] | None], deadline: float | None,
                take: Callable[[IO[bytes], bytes], None], args: Any) -> None:
    """Read every open stream until its end, handing each chunk to take(stream, chunk).
    Raises subprocess.TimeoutExpired(args) once the monotonic `deadline` passes (None:
    no deadline); what take raises ends the reading too."""
    with selectors.DefaultSelector() as selector:
        for stream in streams:
            if stream is not None and not stream.closed:
                selector.register(stream, selectors.EVENT_READ)
        while selector.get_map():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(args, 0)
            for key, _ in selector.select(left):
                chunk = os.read(key.fd, READ_CHUNK)
                if chunk:
                    take(key.fileobj, chunk)  # type: ignore[arg-type]
                else:
                    selector.unregister(key.fileobj)
