from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from slurm import Slurm, missing_programs, start_slurm
from sshd import Sshd, home_env, isolated_env, start_sshd

ROOT = Path(__file__).resolve().parent.parent


def uses_sshd(item: pytest.Item) -> bool:
    """A test that logs in through the test sshd: it asks for the fixture (directly or through
    `ssh_cli`), or it is the `over_ssh` case of a test that picks its CLI at run time."""
    if "sshd" in getattr(item, "fixturenames", ()):
        return True
    callspec = getattr(item, "callspec", None)
    return bool(callspec is not None and callspec.params.get("over_ssh"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # One place marks them all, so `-m "not ssh"` runs the suite where no sshd can start.
    for item in items:
        if uses_sshd(item):
            item.add_marker(pytest.mark.ssh)


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory: pytest.TempPathFactory,
                  monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test's own process gets a HOME and XDG dirs of its own too: tasks run in-process
    on `local` (a patch upload, `~` in a command) land there, never in the real home."""
    home = tmp_path_factory.mktemp("process-home")
    for name, value in home_env(home).items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    return home


def unique_marker(kind: str) -> str:
    """A command-line tag for stand-in workers, unique to this run: `--proc` of a suite never
    matches the workers (or envsnap command lines) of another suite on the same machine."""
    return f"envsnap-{kind}-{uuid.uuid4().hex[:12]}"


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


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Slurm]:
    """A one-node Slurm on loopback (tests/slurm.py), started once per session. As root (CI:
    tests/run.sh installs slurm-wlm and munge) a missing program is a failure; a user who
    is not root cannot run the daemons as SlurmUser=root, so there the tests skip."""
    missing = missing_programs()
    if os.geteuid() != 0:
        pytest.skip("the Slurm tests run as root (the daemons run as SlurmUser=root)"
                    + (f"; missing too: {', '.join(missing)}" if missing else ""))
    if missing:
        pytest.fail(f"Slurm is not installed (missing {', '.join(missing)}): bash tests/run.sh "
                    "installs slurm-wlm and munge")
    cluster = start_slurm(tmp_path_factory.mktemp("slurm"))
    yield cluster
    cluster.stop()


@dataclass
class Cli:
    """The real `envsnap` command in a subprocess, with its own HOME, XDG dirs and store."""

    env: dict[str, str]
    cwd: Path

    def __call__(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "envsnap", *args], cwd=self.cwd,
                              env=self.env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    home = tmp_path / "home"
    home.mkdir()
    # HOME and XDG dirs of its own: the `local` host's agent cache and restore lock, crash
    # logs and anything else under ~ stay in this test's folder, never the real home.
    env = isolated_env(home)
    # The checkout under test, whatever an editable install elsewhere points at.
    env.update(ENVSNAP_STORE=str(tmp_path / "store"), PYTHONPATH=str(ROOT))
    return Cli(env=env, cwd=tmp_path)


@pytest.fixture
def ssh_cli(cli: Cli, sshd: Sshd) -> Cli:
    """A CLI whose HOME holds an SSH config, key and known_hosts for the test sshd."""
    sshd.write_home(Path(cli.env["HOME"]))  # cli.env already points HOME and XDG there
    return cli
