"""Every bad input to capture: a clear one-line error, a documented exit code, nothing lost."""
from __future__ import annotations

import glob
import os
import socket
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from conftest import Cli, OfflineCli
from helpers.sshd import Sshd, keygen

PYTHON38 = "/root/.pyenv/versions/3.8.18/bin/python3"


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in result.stderr.splitlines() if line.startswith("envsnap: error:")
             or line.startswith("error:")]
    assert len(lines) == 1, result.stderr
    return lines[0]


def stored(cli: Cli) -> list[str]:
    root = Path(cli.env["ENVSNAP_STORE"])
    return sorted(p.name for p in root.rglob("*.yaml")) if root.exists() else []


def test_unreachable_host(ssh_cli: Cli) -> None:
    result = ssh_cli("capture", "127.0.0.1:1", "--label", "x", "--connect-timeout", "3")
    assert result.returncode == 3
    assert "unreachable" in one_error_line(result)
    assert stored(ssh_cli) == []


def test_host_that_accepts_but_never_answers(ssh_cli: Cli) -> None:
    with socket.socket() as silent:          # a hung machine: TCP up, sshd wedged
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        started = time.monotonic()
        result = ssh_cli("capture", f"127.0.0.1:{port}", "--label", "x",
                         "--connect-timeout", "2")
    assert result.returncode == 3
    assert "never spoke SSH" in one_error_line(result)
    assert time.monotonic() - started < 30 and stored(ssh_cli) == []


def test_refused_auth(ssh_cli: Cli, sshd: Sshd) -> None:
    home = Path(ssh_cli.env["HOME"])
    (home / ".ssh" / "id_ed25519").unlink()
    (home / ".ssh" / "id_ed25519.pub").unlink(missing_ok=True)
    keygen(home / ".ssh" / "id_ed25519")   # a key the server does not know
    result = ssh_cli("capture", sshd.addresses[0], "--label", "x")
    assert result.returncode == 3
    assert "authentication refused" in one_error_line(result)


def test_unknown_host_key_is_refused_unless_accepted(ssh_cli: Cli, sshd: Sshd) -> None:
    known = Path(ssh_cli.env["HOME"]) / ".ssh" / "known_hosts"
    known.unlink()
    result = ssh_cli("capture", sshd.addresses[0], "--label", "x")
    assert result.returncode == 3
    assert "unknown host key" in one_error_line(result)
    assert not known.exists() and stored(ssh_cli) == []

    accepted = ssh_cli("capture", sshd.addresses[0], "--label", "x", "--accept-new-host-keys")
    assert accepted.returncode == 0, accepted.stderr
    assert sshd.known_hosts_line(sshd.addresses[0]) in known.read_text()


def test_changed_host_key_is_refused_even_with_accept_new(ssh_cli: Cli, sshd: Sshd,
                                                          tmp_path: Path) -> None:
    other = keygen(tmp_path / "other").split()
    known = Path(ssh_cli.env["HOME"]) / ".ssh" / "known_hosts"
    known.write_text(f"[{sshd.addresses[0]}]:{sshd.port} {other[0]} {other[1]}\n")
    result = ssh_cli("capture", sshd.addresses[0], "--label", "x", "--accept-new-host-keys")
    assert result.returncode == 3
    assert "host key CHANGED" in one_error_line(result)


def test_host_without_python(ssh_cli: Cli, sshd: Sshd) -> None:
    result = ssh_cli("capture", sshd.addresses[0], "--label", "x",
                     "--python", "/nonexistent/bin/python3")
    assert result.returncode == 3
    assert "python not found" in one_error_line(result)
    assert stored(ssh_cli) == []


OLD_PYTHONS = sorted(glob.glob("/root/.pyenv/versions/[23].[0-7].*/bin/python"))


def simulated_old_python(tmp_path: Path) -> str:
    """A python that reports 3.6 (its sitecustomize sets version_info, all the guard reads):
    used only where no real old interpreter is installed."""
    fake = tmp_path / "old"
    fake.mkdir()
    (fake / "sitecustomize.py").write_text(
        "import sys\nsys.version_info = (3, 6, 15, 'final', 0)\nsys.version = '3.6.15 x'\n")
    python = tmp_path / "python3.6"
    python.write_text(f"#!/bin/sh\nPYTHONPATH={fake} exec /usr/bin/python3 \"$@\"\n")
    python.chmod(0o755)
    return str(python)


@pytest.mark.parametrize("python", OLD_PYTHONS or ["simulated"])
def test_python_older_than_38(ssh_cli: Cli, sshd: Sshd, tmp_path: Path, python: str) -> None:
    if python == "simulated":
        python = simulated_old_python(tmp_path)
    result = ssh_cli("capture", sshd.addresses[0], "--label", "x", "--python", python)
    assert result.returncode == 3
    assert "needs Python >= 3.8, found" in one_error_line(result)
    assert stored(ssh_cli) == []


def test_a_failing_agent_is_told_in_one_line_with_its_secrets_masked(cli: Cli,
                                                                     tmp_path: Path) -> None:
    token = "hf_" + "Q7x2" * 9
    python = tmp_path / "python3"   # a wrapper that fails before the agent runs, saying why
    python.write_text(f"#!/bin/sh\necho 'activate: HF_TOKEN={token} was refused' >&2\nexit 1\n")
    python.chmod(0o755)
    result = cli("capture", "local", "--label", "x", "--python", str(python))
    assert result.returncode == 3
    line = one_error_line(result)
    assert "agent failed (exit 1): activate: HF_TOKEN=<secret> was refused" in line, line
    assert token not in result.stderr + result.stdout
    assert stored(cli) == []


@pytest.mark.skipif(not os.path.exists(PYTHON38), reason="no Python 3.8 installed")
def test_the_agent_runs_on_python_38(cli: Cli) -> None:
    result = cli("capture", "local", "--label", "py38", "--python", PYTHON38)
    assert result.returncode == 0, result.stderr
    document = yaml.safe_load((Path(cli.env["ENVSNAP_STORE"]) / "py38.yaml").read_text())
    assert document["meta"]["agent"]["python_version"].startswith("3.8.")


def test_repo_that_does_not_exist_or_is_not_git(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    result = cli("capture", "local", "--label", "r", "--repo", str(tmp_path / "missing"),
                 "--repo", str(tmp_path / "plain"))
    assert result.returncode == 3
    assert "missing" in result.stderr and "not a git repository" in result.stderr
    assert stored(cli) == ["r.yaml"]   # the snapshot is kept: nothing else is lost


def test_label_with_path_tricks(cli: Cli, tmp_path: Path) -> None:
    result = cli("capture", "local", "--label", "../../etc/x")
    assert result.returncode == 2
    assert "invalid label" in one_error_line(result)
    assert not (tmp_path / "etc").exists() and stored(cli) == []


def test_store_that_is_not_writable(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("not a folder")
    result = cli("capture", "local", "--label", "x", "--store", str(tmp_path / "afile" / "s"))
    assert result.returncode == 2
    assert "not writable" in one_error_line(result)


def test_existing_label_is_refused_unless_forced(cli: Cli) -> None:
    assert cli("capture", "local", "--label", "same").returncode == 0
    path = Path(cli.env["ENVSNAP_STORE"]) / "same.yaml"
    before = path.read_text()
    result = cli("capture", "local", "--label", "same")
    assert result.returncode == 2
    assert "already exists" in one_error_line(result)
    assert path.read_text() == before
    assert cli("capture", "local", "--label", "same", "--force").returncode == 0


def test_a_hanging_collector_times_out_and_the_rest_is_kept(cli: Cli, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    hang = bin_dir / "nvidia-smi"
    hang.write_text("#!/bin/sh\nexec sleep 60\n")
    hang.chmod(0o755)
    cli.env["PATH"] = f"{bin_dir}:{os.environ['PATH']}"
    result = cli("capture", "local", "--label", "h", "--collector-timeout", "2")
    assert result.returncode == 3
    assert "nvidia" in result.stderr and "timed out" in result.stderr
    document = yaml.safe_load((Path(cli.env["ENVSNAP_STORE"]) / "h.yaml").read_text())
    assert document["facts"]["system"]["hostname"]
    assert document["facts"]["python_env"]


def test_a_name_in_no_inventory_and_no_dns_is_called_unknown(offline_cli: OfflineCli) -> None:
    """A typo is named as one, before any connection: not a DNS error from deep inside.
    Offline (helpers/offline.py): the names are looked up in /etc/hosts alone."""
    (Path(offline_cli.env["HOME"]) / ".ssh").mkdir()
    (Path(offline_cli.env["HOME"]) / ".ssh" / "config").write_text("")
    (offline_cli.cwd / "hosts.yml").write_text("all:\n  children:\n    gpu:\n      hosts:\n"
                                               "        gpu-box.invalid: {ansible_host: "
                                               "127.0.0.1}\n")
    typo = offline_cli("capture", "gpu-bx.invalid", "--inventory", "hosts.yml", "--label", "x")
    assert typo.returncode == 2, typo.stderr
    assert typo.stderr == ("envsnap: error: gpu-bx.invalid: not in inventory hosts.yml "
                           "(groups: gpu, all), not a Host in ~/.ssh/config, and the name "
                           "does not resolve (did you mean 'gpu-box.invalid'?)\n")
    bare = offline_cli("bench", "root@no-such-host.invalid:2222", "--cmd", "true", "--metric",
                       "x")
    assert bare.returncode == 2
    assert bare.stderr == ("envsnap: error: root@no-such-host.invalid:2222: not in the "
                           "inventory (none given; see --inventory), not a Host in "
                           "~/.ssh/config, and the name does not resolve\n")
    assert stored(offline_cli) == []


def test_an_ssh_config_alias_is_a_known_host(ssh_cli: Cli, sshd: Sshd) -> None:
    config = Path(ssh_cli.env["HOME"]) / ".ssh" / "config"
    config.write_text(f"Host gpu-alias.invalid\n  HostName {sshd.addresses[0]}\n\n"
                      + config.read_text())
    result = ssh_cli("capture", "gpu-alias.invalid", "--label", "x")
    assert result.returncode == 0, result.stderr
    assert stored(ssh_cli) == ["x.yaml"]


def test_inventory_with_a_yaml_error(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "bad.yml").write_text("all:\n  hosts:\n    a: [\n")
    result = cli("capture", "a", "--inventory", str(tmp_path / "bad.yml"))
    assert result.returncode == 2
    assert "bad.yml:" in one_error_line(result)


def test_unknown_label_and_corrupt_snapshot_for_show(cli: Cli, tmp_path: Path) -> None:
    missing = cli("show", "nope")
    assert missing.returncode == 2 and "no snapshot labelled 'nope'" in one_error_line(missing)
    (tmp_path / "broken.yaml").write_text("schema: 1\nfacts: {a: [\n")
    corrupt = cli("show", str(tmp_path / "broken.yaml"))
    assert corrupt.returncode == 4 and "corrupt snapshot" in one_error_line(corrupt)
    (tmp_path / "future.yaml").write_text("schema: 99\nmeta: {}\nfacts: {}\n")
    future = cli("show", str(tmp_path / "future.yaml"))
    assert future.returncode == 4 and "newer than this envsnap" in one_error_line(future)


def test_ssh_connections_send_keepalives(sshd: Sshd, tmp_path: Path, monkeypatch) -> None:
    from envsnap.hosts.inventory import parse_host_spec
    from envsnap.hosts.transport import KEEPALIVE_S, SSHTransport

    monkeypatch.setenv("HOME", str(tmp_path))
    sshd.write_home(tmp_path)
    transport = SSHTransport(parse_host_spec(sshd.addresses[0]))
    try:
        assert transport.run("echo hi", timeout=30).stdout.strip() == "hi"
        assert transport.connection.transport.packetizer._Packetizer__keepalive_interval \
            == KEEPALIVE_S
    finally:
        transport.close()
