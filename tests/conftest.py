from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from sshd import Sshd, start_sshd

ROOT = Path(__file__).resolve().parent.parent


@contextmanager
def sleeping_worker(marker: str, env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """A stand-in inference worker: a process whose cmdline carries `marker`, with `env`."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", marker],
                            env={"PATH": "/usr/bin:/bin", **env})
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    daemon = start_sshd(tmp_path_factory.mktemp("sshd"))
    yield daemon
    daemon.stop()


@dataclass
class Cli:
    """The real `envsnap` command in a subprocess, with its own HOME and store."""

    env: dict[str, str]
    cwd: Path

    def __call__(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "envsnap", *args], cwd=self.cwd,
                              env=self.env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    home = tmp_path / "home"
    home.mkdir()
    env = {key: value for key, value in os.environ.items() if key != "SSH_AUTH_SOCK"}
    # The checkout under test, whatever an editable install elsewhere points at.
    env.update(HOME=str(home), ENVSNAP_STORE=str(tmp_path / "store"), PYTHONPATH=str(ROOT))
    return Cli(env=env, cwd=tmp_path)


@pytest.fixture
def ssh_cli(cli: Cli, sshd: Sshd) -> Cli:
    """A CLI whose HOME holds an SSH config, key and known_hosts for the test sshd."""
    cli.env.update(sshd.write_home(Path(cli.env["HOME"])))
    cli.env["ENVSNAP_STORE"] = str(cli.cwd / "store")
    return cli
