"""The compilers, CMake and libc on this host, as torch's collect_env reports them.

collect_env runs `gcc --version`, `clang --version` and `cmake --version` from PATH and
keeps a part of each first line; the same is read here, the programs started together (one
wait, not three) and only those PATH has, so a host without them runs nothing. A program's
answer is kept in ~/.cache/envsnap/tools.json under its path and the identity of the file
it runs (device, inode, size, modification and change times): cmake alone takes longer to
start than the rest of a capture's host facts, and a later capture of an unchanged host
reads its answer back for the price of a stat (a wrapper such as ccache that hands
`--version` to another compiler is keyed by the wrapper: an upgrade of that compiler alone
is seen once the wrapper or the cache changes). libc comes from confstr, as glibc answers
it, without reading the interpreter's binary as platform.libc_ver does.
"""
from __future__ import annotations

import json
import os
import re

from . import util

TYPE_CHECKING = False   # typing's own, without its import: see runner.py
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional

TOOL_TIMEOUT = 5.0
CACHE_FILE = os.path.join("~", ".cache", "envsnap", "tools.json")
MAX_CACHE_BYTES = 64 * 1024

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

    if not hasattr(os, "posix_spawn"):   # a platform without it: the versions stay unknown
        return {}
    deadline = time.monotonic() + timeout
    started: Dict[int, Any] = {}    # read end of its stdout -> (program, pid)
    for program in programs:
        read, write = os.pipe()
        # stdin and stderr: the null device; stdout: the pipe
        actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                   (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
                   (os.POSIX_SPAWN_DUP2, write, 1)]
        try:
            pid = os.posix_spawn(program, [program, "--version"], dict(os.environ),
                                 file_actions=actions)
        except OSError:
            os.close(read)
            continue
        finally:
            os.close(write)
        started[read] = (program, pid)
    done = util.read_until(list(started), deadline)
    out: Dict[str, Optional[str]] = {}
    for read, (program, pid) in started.items():
        os.close(read)
        status = reaped(pid, deadline if read in done else 0.0)
        finished = read in done and status is not None and util.exit_code(status) == 0
        out[program] = util.escaped(done[read]) if finished else None
    return out


def identity(path: str) -> Optional[List[int]]:
    """What changes when the file a program runs is replaced or rewritten."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return [found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns]


def read_cache(path: str) -> Dict[str, Any]:
    """{program path: [identity, first line]}; {} where the file is absent, not a regular
    file of this user, or not what this module writes."""
    try:
        handle = util.open_regular(path)
    except OSError:
        return {}
    with handle:
        if os.fstat(handle.fileno()).st_uid != os.getuid():
            return {}
        raw = handle.read(MAX_CACHE_BYTES + 1)
    try:
        cache = json.loads(raw.decode("utf-8")) if len(raw) <= MAX_CACHE_BYTES else {}
    except ValueError:
        return {}
    return cache if isinstance(cache, dict) else {}


def write_cache(path: str, cache: Dict[str, Any]) -> None:
    """Written whole to a new file of this user only, then renamed over the old one: a link
    in its place is replaced, never written through. A home that cannot be written costs
    the next capture a run of the programs, nothing else."""
    folder = os.path.dirname(path)
    temporary = "%s.%d" % (path, os.getpid())
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump(cache, handle)
        os.replace(temporary, path)
    except OSError:
        try:
            os.unlink(temporary)
        except OSError:
            pass


def first_lines(programs: List[str], timeout: float) -> Dict[str, Optional[str]]:
    """{program: its `--version` first line}, from the cache where the file is unchanged."""
    path = os.path.expanduser(CACHE_FILE)
    cache = read_cache(path)
    known = {program: identity(os.path.realpath(program)) for program in programs}
    lines: Dict[str, Optional[str]] = {}
    for program in programs:
        entry = cache.get(program)
        if isinstance(entry, list) and len(entry) == 2 and known[program] is not None and \
                entry[0] == known[program]:
            lines[program] = entry[1]
    missing = [program for program in programs if program not in lines]
    if missing:
        for program, text in run_all(missing, timeout).items():
            lines[program] = text.splitlines()[0] if text and text.strip() else None
            if text is not None and known[program] is not None:
                cache[program] = [known[program], lines[program]]
        write_cache(path, {program: cache[program] for program in cache
                           if isinstance(program, str) and os.path.exists(program)})
    return lines


def reaped(pid: int, deadline: float) -> Optional[int]:
    """The child's wait status once it exits by the deadline; None when it had to be killed
    (SIGKILL: our own child, past its time; one that closed its output and lingers too)."""
    import time

    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if time.monotonic() >= deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            return None
        time.sleep(0.001)


def collect_tools(timeout: float) -> Dict[str, Optional[str]]:
    found = {name: util.which(name) for name, _ in TOOLS}
    lines = first_lines([path for path in found.values() if path], timeout)
    return {name: first_match(lines.get(found[name] or "") or "", pattern)
            for name, pattern in TOOLS}


def collect(config: Dict[str, Any]) -> Dict[str, Any]:
    timeout = float((config.get("toolchain") or {}).get("timeout", TOOL_TIMEOUT))
    facts = dict(collect_tools(timeout))
    facts["libc"] = libc_version()
    return facts
