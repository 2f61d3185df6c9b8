"""The OpenSSH transport, against the test sshd: the default connection where `ssh` is on
PATH (no Python SSH loaded), `ansible_connection: paramiko` forcing paramiko, one master
connection serving every command (uploads, a followed command, the output cap), and nothing
of it left once the block ends."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Cli
from helpers.sshd import Sshd

from envsnap.errors import HostError
from envsnap.hosts.connect import connecting_early, open_transport
from envsnap.hosts.inventory import parse_host_spec
from envsnap.hosts.openssh import OpenSSHTransport, private_folder

# The CLI in a process of its own, saying which Python SSH modules it loaded.
LOADED = ("import sys\nfrom envsnap.cli.main import main\ntry:\n    code = main(sys.argv[1:])\n"
          "except SystemExit as end:\n    code = end.code\n"
          "print(sorted(m for m in ('paramiko', 'fabric') if m in sys.modules))\n"
          "sys.exit(code)\n")


def masters(folder: Path) -> list[str]:
    """The OpenSSH masters whose sockets are in `folder` (a master's title names it)."""
    found = subprocess.run(["ps", "-eww", "-o", "args"], capture_output=True, text=True).stdout
    return [line for line in found.splitlines() if str(folder) in line]


@pytest.mark.parametrize(("connection", "loaded"), [
    ("", "[]"), ("ssh", "[]"), ("paramiko", "['fabric', 'paramiko']")])
def test_capture_goes_through_openssh_unless_paramiko_is_asked(
        ssh_cli: Cli, sshd: Sshd, connection: str, loaded: str) -> None:
    how = f"ansible_connection={connection}" if connection else ""
    (ssh_cli.cwd / "inv.ini").write_text(f"box ansible_host={sshd.addresses[0]} {how}\n")
    result = subprocess.run([sys.executable, "-c", LOADED, "capture", "box", "--inventory",
                             "inv.ini", "--label", "x"], cwd=ssh_cli.cwd, env=ssh_cli.env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == loaded
    assert (Path(ssh_cli.env["ENVSNAP_STORE"]) / "x.yaml").exists()


# The CLI in a process of its own, saying which of the capture's heavier modules were loaded
# when the first handshake began.
AT_HANDSHAKE = ("import sys\nfrom envsnap.hosts.openssh import OpenSSHTransport\n"
                "start = OpenSSHTransport.start\n"
                "def noted(self):\n"
                "    print('at handshake:', sorted(m for m in " + repr(HEAVY := (
                    "envsnap.hosts.capture", "envsnap.hosts.payload", "envsnap.snapshot.store",
                    "yaml", "logging", "dataclasses", "inspect", "ast", "json", "datetime",
                    "socket"))
                + " if m in sys.modules))\n"
                "    start(self)\n"
                "OpenSSHTransport.start = noted\n"
                "from envsnap.cli.main import main\nsys.exit(main(sys.argv[1:]))\n")


def test_the_handshake_begins_before_the_capture_loads_what_only_the_capture_needs(
        ssh_cli: Cli, sshd: Sshd) -> None:
    """Everything loaded before the handshake begins delays the whole capture; building,
    signing and storing the snapshot (YAML, the store, the payload, JSON, times), paramiko's
    logger and dataclasses (with inspect and ast: the records on the way are plain classes and
    NamedTuples) can all load while it runs; a host given by its address is not looked up
    (no socket)."""
    result = subprocess.run([sys.executable, "-c", AT_HANDSHAKE, "capture", sshd.addresses[0],
                             "--label", "early"], cwd=ssh_cli.cwd, env=ssh_cli.env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "at handshake: []", result.stdout


@pytest.fixture
def own_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A temporary folder of this test's own for the masters' folders (short: a socket's
    path is at most 108 bytes), so what is left in it is this test's."""
    folder = Path(tempfile.mkdtemp(prefix="t-", dir="/tmp"))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_one_master_serves_every_command_and_ends_with_the_block(
        sshd: Sshd, tmp_path: Path, own_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With keeping off (ENVSNAP_SSH_CONTROL_PERSIST=0), as every master was before."""
    monkeypatch.setenv("ENVSNAP_SSH_CONTROL_PERSIST", "0")
    monkeypatch.setenv("HOME", str(tmp_path))
    sshd.write_home(tmp_path)
    monkeypatch.setenv("ENVSNAP_MAX_AGENT_OUTPUT_MB", "1")
    with open_transport(parse_host_spec(sshd.addresses[1])) as transport:
        assert isinstance(transport, OpenSSHTransport)
        # SSH_CONNECTION names the client's port: one connection, however many commands
        seen = {transport.run("echo $SSH_CONNECTION", timeout=30).stdout for _ in range(3)}
        assert len(seen) == 1
        assert transport.run('mkdir -p "$HOME"/up', timeout=30).exit_code == 0
        transport.put(b"uploaded\n", "up/file.txt")
        assert transport.run('cat "$HOME"/up/file.txt', timeout=30).stdout == "uploaded\n"
        lines: list[str] = []
        # stdin is the lifeline: open while this process waits (cat reads on), unlike an
        # unfollowed command's (at end of file at once)
        lifeline = "echo one >&2; timeout 0.3 cat; echo cat=$? >&2"
        followed = transport.run(lifeline, timeout=30, follow=lines.append)
        assert followed.exit_code == 0 and lines == ["one", "cat=124"]
        assert transport.run(lifeline, timeout=30).stderr == "one\ncat=0\n"
        assert transport.run("exit 255", timeout=30).exit_code == 255   # the command's own
        with pytest.raises(HostError, match="printed more than 1 MiB, refused unread"):
            transport.run("head -c 3000000 /dev/zero", timeout=30)
        assert masters(own_tmp)
    assert masters(own_tmp) == [] and list(own_tmp.iterdir()) == []


def test_a_connection_started_early_is_the_one_used_and_one_not_used_is_closed(
        sshd: Sshd, tmp_path: Path, own_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVSNAP_SSH_CONTROL_PERSIST", "0")
    monkeypatch.setenv("HOME", str(tmp_path))
    sshd.write_home(tmp_path)
    used, unused = parse_host_spec(sshd.addresses[2]), parse_host_spec(sshd.addresses[3])
    with connecting_early([used, unused]):
        assert len(list(own_tmp.iterdir())) == 2   # both handshakes begun
        with open_transport(used) as transport:
            assert isinstance(transport, OpenSSHTransport) and transport.master is not None
            assert transport.run("echo hi", timeout=30).stdout == "hi\n"
    assert masters(own_tmp) == [] and list(own_tmp.iterdir()) == []


def test_ansible_connection_ssh_without_an_ssh_client_fails_that_host_alone(
        cli: Cli, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"   # what the local agent needs, and no ssh
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    for program in ("sh", "mkdir", "uname"):
        found = shutil.which(program)
        assert found is not None
        (bin_dir / program).symlink_to(found)
    cli.env["PATH"] = str(bin_dir)
    (cli.cwd / "inv.ini").write_text(   # port 1: nothing there, should it be dialled
        "here ansible_connection=local\n"
        "box ansible_host=127.0.0.1 ansible_port=1 ansible_connection=ssh\n")
    result = cli("capture", "all", "--inventory", "inv.ini", "--label", "run")
    assert result.returncode == 3, result.stderr
    assert ("envsnap: error: box: ansible_connection is ssh, but no ssh client is on PATH "
            "(install openssh-client, or set ansible_connection: paramiko)") in result.stderr
    assert (Path(cli.env["ENVSNAP_STORE"]) / "run" / "here.yaml").exists(), result.stderr


def test_folders_that_killed_controllers_left_are_removed_by_the_next(own_tmp: Path) -> None:
    old, listening, fresh = (own_tmp / f"envsnap-ssh-{name}" for name in ("old", "up", "new"))
    for folder in (old, listening, fresh):
        folder.mkdir()
        (folder / "log").write_text("")
    (listening / "socket").write_text("")   # a master still listens there
    for folder in (old, listening):
        os.utime(folder, (0, 0))
    made = Path(private_folder())
    assert sorted(own_tmp.iterdir()) == sorted([made, listening, fresh])
