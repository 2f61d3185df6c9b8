"""A worker's startup options that change which customize file runs, read as python reads
its command line (snapshot/document.py: python_startup_flags)."""
from __future__ import annotations

import pytest

from envsnap.snapshot.document import python_startup_flags
from envsnap.snapshot.records import Process


@pytest.mark.parametrize(("cmdline", "env", "flags"), [
    (["/venv/bin/python3", "-sS", "serve.py"], {}, ["-S", "-s"]),
    (["python3.11", "-W", "ignore", "-I", "-m", "sglang", "-s"], {}, ["-I"]),
    (["python", "-Xdev", "-P", "x.py"], {"PYTHONNOUSERSITE": "1"}, ["-P", "PYTHONNOUSERSITE=1"]),
    (["python", "-E", "x.py"], {"PYTHONNOUSERSITE": "1"}, []),       # -E: PYTHON* ignored
    (["python", "-c", "-s"], {"PYTHONSAFEPATH": "1"}, ["PYTHONSAFEPATH=1"]),   # -c's code
    (["python", "x.py", "-s"], {}, []),                              # the script's own option
    (["torchrun", "-s"], {"PYTHONNOUSERSITE": "1"}, []),             # not python
])
def test_startup_flags_are_read_up_to_the_script(cmdline: list[str], env: dict[str, str | None],
                                                 flags: list[str]) -> None:
    process: Process = {"cmdline": cmdline, "env": env}
    assert python_startup_flags(process) == flags
