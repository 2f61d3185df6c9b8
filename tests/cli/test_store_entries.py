"""Store entries are never written through, through the real CLI: what stands at a path
envsnap writes into its store (a link to the user's ~/.bashrc, a FIFO) is replaced itself or
refused in one line, never written into, and never waited on. The retry file of a fleet
(STORE/LABEL.retry) is the case in point: written at the end of a capture with failed hosts."""
from __future__ import annotations

import os
import stat
from pathlib import Path

from conftest import Cli

FLEET = "[gpu]\nn1\nn2 python=/nonexistent/python3\n[gpu:vars]\nansible_connection=local\n"


def capture_with_a_failed_host(cli: Cli) -> tuple[int, str]:
    """A fleet of two, n2 failing: the retry file STORE/run1.retry is written (exit 3)."""
    (cli.cwd / "fleet.ini").write_text(FLEET)
    result = cli("capture", "gpu", "--inventory", "fleet.ini", "--label", "run1", timeout=30)
    return result.returncode, result.stderr


def test_a_retry_file_linked_to_the_users_file_replaces_the_link(cli: Cli) -> None:
    """STORE/run1.retry a link to the user's ~/.bashrc: the link itself is replaced by the
    retry file; ~/.bashrc is byte for byte as it was."""
    store = Path(cli.env["ENVSNAP_STORE"])
    store.mkdir(parents=True)
    bashrc = Path(cli.env["HOME"]) / ".bashrc"
    bashrc.write_text("export PATH=$HOME/bin:$PATH\n")
    (store / "run1.retry").symlink_to(bashrc)
    code, stderr = capture_with_a_failed_host(cli)
    assert code == 3, stderr
    retry = store / "run1.retry"
    assert f"1 of 2 hosts failed or partly failed; their names are in {retry}" in stderr
    assert bashrc.read_text() == "export PATH=$HOME/bin:$PATH\n"
    assert not retry.is_symlink() and retry.read_text() == "n2\n"


def test_a_retry_file_that_is_a_fifo_is_refused_in_one_line_never_waited_on(cli: Cli) -> None:
    """STORE/run1.retry a FIFO nobody reads, where a plain open for writing waits for ever:
    the capture ends at once (past the in-process timeout the test fails), its snapshots
    saved, the summary line saying why there is no retry file; the FIFO is left as it was."""
    store = Path(cli.env["ENVSNAP_STORE"])
    store.mkdir(parents=True)
    fifo = store / "run1.retry"
    os.mkfifo(fifo)
    code, stderr = capture_with_a_failed_host(cli)
    assert code == 3, stderr
    assert (f"1 of 2 hosts failed or partly failed; no retry file: {fifo}: the store entry is "
            "not a regular file (a FIFO), refused: move it away\n") in stderr, stderr
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert (store / "run1" / "n1.yaml").is_file()
