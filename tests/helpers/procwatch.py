"""Processes of the machine, watched from /proc: what a test finds still running, and a wait
for a condition (tests/cli/test_bench_cli.py, tests/cli/test_serve.py)."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable


def processes_with(marker: str, besides: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and int(entry.name) != besides and \
                    marker.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue  # it ended while we looked
    return found


def soon(condition: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()
