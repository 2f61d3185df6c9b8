"""A command whose stderr is a terminal (a pty), as a person running it sees it: where a
status line is drawn in place, and only there."""
from __future__ import annotations

import os
import pty
import select
import subprocess
from collections.abc import Mapping


def stderr_at_a_terminal(argv: list[str], cwd: str | os.PathLike[str], env: Mapping[str, str],
                         timeout: float = 120) -> tuple[int, str, str]:
    """(exit status, stdout, all the terminal was sent) of `argv` with stderr on a pty."""
    leader, follower = pty.openpty()
    running = subprocess.Popen(argv, cwd=cwd, env=dict(env), stdout=subprocess.PIPE,
                               stderr=follower)
    os.close(follower)
    screen = b""
    while select.select([leader], [], [], timeout)[0]:
        try:
            chunk = os.read(leader, 4096)
        except OSError:         # the other end closed: the command is done
            break
        if not chunk:
            break
        screen += chunk
    out = running.communicate(timeout=timeout)[0].decode()
    os.close(leader)
    return running.returncode, out, screen.decode(errors="replace")
