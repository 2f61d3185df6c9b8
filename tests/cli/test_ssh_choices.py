"""The user's own SSH choices, over a test sshd that logs each connection (DEBUG1): the key
exchange is the SSH config's or OpenSSH's (post-quantum on OpenSSH 9), never one envsnap puts
first; an inventory's ssh args may choose one; the paramiko transport takes the same choice or
says in one line that it cannot; and a later run reuses the master an earlier one kept, so it
pays no handshake, while a folder or socket that is not the user's own is never used."""
from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Cli
from helpers.sshd import Sshd, start_sshd

from envsnap.hosts.inventory import parse_host_spec
from envsnap.hosts.openssh import OpenSSHTransport, control_folder, stop_master
from envsnap.hosts.sshconfig import ssh_client

pytestmark = pytest.mark.ssh

KEX_LINE = re.compile(r"kex: algorithm: (\S+)")


@pytest.fixture(scope="module")
def logged_sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    daemon = start_sshd(tmp_path_factory.mktemp("logged-sshd"), aliases=2, log_level="DEBUG1")
    yield daemon
    daemon.stop()


class Log:
    """What the daemon logged from now on."""

    def __init__(self, daemon: Sshd) -> None:
        self.path, self.start = daemon.log, daemon.log.stat().st_size

    def text(self) -> str:
        with self.path.open("rb") as log:
            log.seek(self.start)
            return str(log.read().decode(errors="replace"))

    def logins(self) -> int:
        return self.text().count("Accepted publickey")

    def exchanges(self) -> list[str]:
        return KEX_LINE.findall(self.text())


@pytest.fixture
def home_cli(cli: Cli, logged_sshd: Sshd) -> Cli:
    logged_sshd.write_home(Path(cli.env["HOME"]))
    return cli


def transport_of(address: str) -> OpenSSHTransport:
    client = ssh_client()
    assert client is not None
    return OpenSSHTransport(parse_host_spec(address), client)


def openssh_default(daemon: Sshd, config: Path) -> str:
    """The exchange plain `ssh` negotiates with the daemon, with the same config."""
    log = Log(daemon)
    subprocess.run(["ssh", "-F", str(config), daemon.addresses[0], "true"], check=True,
                   capture_output=True, timeout=30)
    (exchange,) = log.exchanges()
    return exchange


def test_the_key_exchange_is_openssh_s_own_by_default(home_cli: Cli, logged_sshd: Sshd) -> None:
    config = Path(home_cli.env["HOME"]) / ".ssh" / "config"
    log = Log(logged_sshd)
    result = home_cli("capture", logged_sshd.addresses[0], "--label", "one")
    assert result.returncode == 0, result.stderr
    assert log.exchanges() == [openssh_default(logged_sshd, config)]
    assert not log.exchanges()[0].startswith("curve25519")


def test_the_ssh_config_s_key_exchange_is_the_one_used(home_cli: Cli, logged_sshd: Sshd) -> None:
    config = Path(home_cli.env["HOME"]) / ".ssh" / "config"
    config.write_text(config.read_text() + "  KexAlgorithms ecdh-sha2-nistp256\n")
    log = Log(logged_sshd)
    result = home_cli("capture", logged_sshd.addresses[0], "--label", "one")
    assert result.returncode == 0, result.stderr
    assert log.exchanges() == ["ecdh-sha2-nistp256"]


@pytest.mark.parametrize("connection", ["ssh", "paramiko"])
def test_an_inventory_s_ssh_args_choose_the_key_exchange(
        home_cli: Cli, logged_sshd: Sshd, connection: str) -> None:
    (home_cli.cwd / "inv.yml").write_text(
        "all:\n  hosts:\n    box:\n"
        f"      ansible_host: {logged_sshd.addresses[1]}\n"
        f"      ansible_connection: {connection}\n"
        "      ansible_ssh_extra_args: -C -o KexAlgorithms=diffie-hellman-group14-sha256\n")
    log = Log(logged_sshd)
    result = home_cli("capture", "box", "--inventory", "inv.yml", "--label", "one")
    assert result.returncode == 0, result.stderr
    assert log.exchanges() == ["diffie-hellman-group14-sha256"]


def test_paramiko_says_it_cannot_do_the_exchange_the_config_chose(
        home_cli: Cli, logged_sshd: Sshd) -> None:
    config = Path(home_cli.env["HOME"]) / ".ssh" / "config"
    config.write_text(config.read_text() + "  KexAlgorithms sntrup761x25519-sha512@openssh.com\n")
    (home_cli.cwd / "inv.ini").write_text(
        f"box ansible_host={logged_sshd.addresses[0]} ansible_connection=paramiko\n")
    log = Log(logged_sshd)
    result = home_cli("capture", "box", "--inventory", "inv.ini", "--label", "one")
    assert result.returncode == 3, result.stderr
    assert ("envsnap: error: box: KexAlgorithms sntrup761x25519-sha512@openssh.com leaves "
            "paramiko no key exchange") in result.stderr
    assert log.logins() == 0


def test_a_second_capture_reuses_the_master_the_first_kept(
        home_cli: Cli, logged_sshd: Sshd, monkeypatch: pytest.MonkeyPatch) -> None:
    log = Log(logged_sshd)
    for label in ("one", "two", "three"):
        result = home_cli("capture", logged_sshd.addresses[0], "--label", label)
        assert result.returncode == 0, result.stderr
    assert log.logins() == 1
    monkeypatch.setenv("HOME", home_cli.env["HOME"])
    folder = control_folder()
    assert folder is not None and Path(folder) == Path(os.environ["XDG_RUNTIME_DIR"]) / "envsnap"
    assert os.stat(folder).st_mode & 0o777 == 0o700
    kept = transport_of(logged_sshd.addresses[0]).kept_socket(folder)
    assert Path(kept).is_socket()
    stop_master(kept)   # a capture after it ends makes a handshake anew
    result = home_cli("capture", logged_sshd.addresses[0], "--label", "four")
    assert result.returncode == 0, result.stderr
    assert log.logins() == 2


def test_a_control_folder_others_may_write_to_is_never_used(
        home_cli: Cli, logged_sshd: Sshd) -> None:
    runtime = Path(tempfile.mkdtemp(prefix="rt-", dir="/tmp"))   # short, as a socket needs
    (runtime / "envsnap").mkdir()
    (runtime / "envsnap").chmod(0o777)
    home_cli.env["XDG_RUNTIME_DIR"] = str(runtime)
    log = Log(logged_sshd)
    for label in ("one", "two"):
        result = home_cli("capture", logged_sshd.addresses[0], "--label", label)
        assert result.returncode == 0, result.stderr
    try:
        assert log.logins() == 2 and list((runtime / "envsnap").iterdir()) == []
    finally:
        shutil.rmtree(runtime)


@pytest.mark.skipif(os.geteuid() != 0, reason="a socket of another uid is made by root")
def test_a_socket_of_another_user_is_never_spoken_to(
        home_cli: Cli, logged_sshd: Sshd, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", home_cli.env["HOME"])
    folder = control_folder()
    assert folder is not None
    path = transport_of(logged_sshd.addresses[1]).kept_socket(folder)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as planted:
        planted.bind(path)
        planted.listen(4)
        os.chown(path, 65534, 65534)
        planted.setblocking(False)
        log = Log(logged_sshd)
        result = home_cli("capture", logged_sshd.addresses[1], "--label", "one")
        assert result.returncode == 0, result.stderr
        with pytest.raises(BlockingIOError):
            planted.accept()
    assert log.logins() == 1
    os.unlink(path)


def test_a_persist_setting_that_is_no_number_of_seconds_is_one_line(
        home_cli: Cli, logged_sshd: Sshd) -> None:
    home_cli.env["ENVSNAP_SSH_CONTROL_PERSIST"] = "5m"
    result = home_cli("capture", logged_sshd.addresses[0], "--label", "one")
    assert result.returncode == 2, result.stderr
    assert result.stderr == ("envsnap: error: ENVSNAP_SSH_CONTROL_PERSIST='5m': expected whole "
                             "seconds from 0 (masters not kept) to 604800 (default 300)\n")
