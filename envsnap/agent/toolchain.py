"""The compilers, CMake and libc on this host, as torch's collect_env reports them.

collect_env runs `gcc --version`, `clang --version` and `cmake --version` from PATH and
keeps a part of each first line; the same is read here, the programs started together (one
wait, not three) and only those PATH has, so a host without them runs nothing. libc comes
from confstr, as glibc answers it, without reading the interpreter's binary as
platform.libc_ver does.
"""
from __future__ import annotations

import os
import re

from . import util

TYPE_CHECKING = False   # typing's own, without its import: see runner.py
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional

TOOL_TIMEOUT = 5.0
# stdin and stderr of each program: the null device (its stdout is a pipe of ours)
STDIO_ACTIONS = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                 (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0)]
# program -> the pattern collect_env's run_and_parse_first_match applies to its output
TOOLS = (("gcc", re.compile(r"gcc (.*)")), ("clang", re.compile(r"clang version (.*)")),
         ("cmake", re.compile(r"cmake (.*)")))


def first_match(text: str, pattern: Any) -> Optional[str]:
    match = pattern.search(text)
    return match.group(1).strip() if match else None


def libc_version() -> Optional[str]:
    """glibc's "glibc 2.39" as platform.libc_ver's pair joined by a dash ("glibc-2.39");
    None on another libc (musl has no such confstr name)."""
    try:
        answer = os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError, AttributeError):
        return None
    return answer.replace(" ", "-", 1) if answer else None


def run_all(programs: List[str], timeout: float) -> Dict[str, Optional[str]]:
    """{program: stdout} of `program --version`, all started before any is waited for;
    None where it failed or outlived the timeout. posix_spawn, not subprocess: its import is
    a large part of the agent's start-up on a host that runs nothing else."""
    import time

    deadline = time.monotonic() + timeout
    started: Dict[int, Any] = {}    # read end of its stdout -> (program, pid)
    for program in programs:
        read, write = os.pipe()
        try:
            pid = os.posix_spawn(program, [program, "--version"], dict(os.environ),
                                 file_actions=STDIO_ACTIONS + [(os.POSIX_SPAWN_DUP2, write, 1)])
        except OSError:
            os.close(read)
            continue
        finally:
            os.close(write)
        started[read] = (program, pid)
    done = util.read_until(list(started), deadline)
    out: Dict[str, Optional[str]] = {}
    for read, (program, pid) in started.items():
        if read not in done:
            os.kill(pid, 9)    # SIGKILL: our own child, past its time
        os.close(read)
        _, status = os.waitpid(pid, 0)
        finished = read in done and util.exit_code(status) == 0
        out[program] = util.escaped(done[read]) if finished else None
    return out


def collect_tools(timeout: float) -> Dict[str, Optional[str]]:
    found = {name: util.which(name) for name, _ in TOOLS}
    texts = run_all([path for path in found.values() if path], timeout)
    return {name: first_match(texts.get(found[name] or "") or "", pattern)
            for name, pattern in TOOLS}


def collect(config: Dict[str, Any]) -> Dict[str, Any]:
    timeout = float((config.get("toolchain") or {}).get("timeout", TOOL_TIMEOUT))
    facts = dict(collect_tools(timeout))
    facts["libc"] = libc_version()
    return facts
