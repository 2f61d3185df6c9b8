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
    None where it failed or outlived the timeout."""
    import subprocess

    started = {}
    for program in programs:
        try:
            started[program] = subprocess.Popen(
                [program, "--version"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL)
        except OSError:
            continue
    out: Dict[str, Optional[str]] = {}
    for program, proc in started.items():
        try:
            text, _ = proc.communicate(timeout=timeout)
            out[program] = util.escaped(text) if proc.returncode == 0 else None
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            out[program] = None
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
