"""The exit codes (envsnap/errors.py ExitCode): envsnap's contract, and the agent's codes in
the same table, though the agent keeps its own (it ships alone, agent/exits.py)."""
from __future__ import annotations

import subprocess
import sys
import zipfile
from io import BytesIO
from pathlib import Path

from envsnap.agent import exits as agent_exits
from envsnap.errors import ExitCode
from envsnap.hosts import payload

CONTRACT = {"OK": 0, "DRIFT": 1, "USAGE": 2, "HOST": 3, "INVALID": 4, "DECLINED": 5,
            "PUT_BACK": 6, "INTERNAL": 70,
            "INTERRUPTED": 130}


def test_envsnap_s_codes_are_the_contract_and_the_host_s_never_collide_with_them() -> None:
    assert {code.name: int(code) for code in ExitCode if code.name in CONTRACT} == CONTRACT
    on_host = {int(code) for code in ExitCode if code.name not in CONTRACT}
    assert on_host and not on_host & set(CONTRACT.values())
    assert ExitCode.AGENT_PYTHON_TOO_OLD == agent_exits.PYTHON_TOO_OLD
    assert ExitCode.OK == agent_exits.OK
    assert f"else exit {int(ExitCode.AGENT_NOT_CACHED)}; fi" in payload.run_command(
        "python3", "0" * 64, {})


def test_the_shipped_agent_exits_with_its_own_code_on_an_old_python(tmp_path: Path) -> None:
    # The zip holds envsnap/agent/ alone: __main__.py must find its code there. An "old"
    # interpreter is faked by a sys.version_info the check reads as 3.7.
    zipped, _ = payload.build_payload()
    zipfile.ZipFile(BytesIO(zipped)).extractall(tmp_path)
    assert not (tmp_path / "envsnap" / "errors.py").exists()
    fake = ("import runpy, sys; sys.version_info = (3, 7, 0); "
            f"sys.path.insert(0, {str(tmp_path)!r}); "
            f"runpy.run_path({str(tmp_path / '__main__.py')!r}, run_name='__main__')")
    result = subprocess.run([sys.executable, "-c", fake], capture_output=True, text=True,
                            timeout=60, cwd=tmp_path)
    assert result.returncode == ExitCode.AGENT_PYTHON_TOO_OLD, result.stderr
    assert "envsnap agent needs Python >= 3.8" in result.stderr

