"""stdout into a pipe keeps its order with stderr: a log of `envsnap capture gpu ... 2>&1`
shows each host's line before the summary that counts them, as a terminal does. Without
PYTHONUNBUFFERED, which this suite's own environment may set: a user's shell has none."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import CliProcess


def test_a_fleets_lines_come_before_its_summary_in_one_pipe(cli_process: CliProcess,
                                                            tmp_path: Path) -> None:
    # two hosts that work (this machine) and one that refuses at once
    (tmp_path / "inv.ini").write_text("[gpu]\nn1 ansible_connection=local\n"
                                      "n2 ansible_connection=local\n"
                                      "dead ansible_host=127.0.0.1 ansible_port=1\n")
    env = {name: value for name, value in cli_process.env.items()
           if name != "PYTHONUNBUFFERED"}
    done = subprocess.run([sys.executable, "-m", "envsnap", "capture", "gpu", "--inventory",
                           "inv.ini", "--label", "run1"], cwd=tmp_path, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=120)
    assert done.returncode == 3, done.stdout
    lines = done.stdout.splitlines()
    saved = [i for i, line in enumerate(lines) if line.startswith(("n1: saved", "n2: saved"))]
    summary = [i for i, line in enumerate(lines) if line.startswith("1 of 3 hosts failed")]
    assert len(saved) == 2 and len(summary) == 1, lines
    assert max(saved) < summary[0], lines
