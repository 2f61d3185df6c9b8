"""A bastion's host key is checked like the target's: ProxyJump through a second real sshd.

The client's ~/.ssh/config says `behind` is reached through `jumpbox` (the bastion daemon,
forwarding to the test sshd with direct-tcpip, as a real jump host does); an inventory can
say the same with Ansible's `ansible_ssh_common_args`. fabric would open the bastion with
paramiko's AutoAddPolicy and trust whatever key it shows.
"""
from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from conftest import Cli
from helpers.sshd import Sshd, forwards_through, keygen, start_bastion

from envsnap.errors import UsageError
from envsnap.hosts.jump import Jump, ssh_args_jump

# one worker runs them all (tests/run.sh runs parallel workers):
# the session's bastion sshd starts once
pytestmark = pytest.mark.xdist_group("ssh_bastion")


@pytest.fixture(scope="session")
def bastion(sshd: Sshd, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    # Two addresses: `jumpbox` and, for a chain of two hops, `jumpbox2` (the same daemon).
    daemon = start_bastion(tmp_path_factory.mktemp("bastion"), sshd)
    yield daemon
    daemon.stop()


def jump_home(cli: Cli, sshd: Sshd, bastion: Sshd, bastion_known: str | None) -> Path:
    """The client's ~/.ssh/config gains `jumpbox` and `behind` (before its `Host *`, whose
    Port would win otherwise); known_hosts keeps the targets and gets `bastion_known`."""
    ssh = Path(cli.env["HOME"]) / ".ssh"
    config = ssh / "config"
    config.write_text(
        f"Host jumpbox\n  HostName {bastion.addresses[0]}\n  Port {bastion.port}\n"
        f"Host jumpbox2\n  HostName {bastion.addresses[1]}\n  Port {bastion.port}\n"
        f"Host behind\n  HostName {sshd.addresses[1]}\n  ProxyJump jumpbox\n"
        f"Host behind-two\n  HostName {sshd.addresses[1]}\n  ProxyJump jumpbox,jumpbox2\n"
        + config.read_text())
    known = ssh / "known_hosts"
    if bastion_known is not None:
        with known.open("a") as handle:
            handle.write(bastion_known + "\n")
    return known


def error_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def stored(cli: Cli) -> list[str]:
    root = Path(cli.env["ENVSNAP_STORE"])
    return sorted(p.name for p in root.rglob("*.yaml")) if root.exists() else []


def test_unknown_bastion_key_is_refused(ssh_cli: Cli, sshd: Sshd, bastion: Sshd) -> None:
    known = jump_home(ssh_cli, sshd, bastion, bastion_known=None)
    before, forwards = known.read_text(), forwards_through(bastion)
    result = ssh_cli("capture", "behind", "--label", "x")
    assert result.returncode == 3, result.stderr
    line = error_line(result)
    assert "bastion jumpbox" in line and "unknown host key" in line
    assert known.read_text() == before and stored(ssh_cli) == []
    assert forwards_through(bastion) == forwards   # refused before any forward was asked


def test_changed_bastion_key_is_refused_even_with_accept_new(ssh_cli: Cli, sshd: Sshd,
                                                             bastion: Sshd,
                                                             tmp_path: Path) -> None:
    other = keygen(tmp_path / "other").split()
    forged = f"[{bastion.addresses[0]}]:{bastion.port} {other[0]} {other[1]}"
    known = jump_home(ssh_cli, sshd, bastion, bastion_known=forged)
    before = known.read_text()
    result = ssh_cli("capture", "behind", "--label", "x", "--accept-new-host-keys")
    assert result.returncode == 3, result.stderr
    line = error_line(result)
    assert "bastion jumpbox" in line and "host key CHANGED" in line
    assert known.read_text() == before and stored(ssh_cli) == []


def test_new_bastion_key_is_recorded_with_accept_new_then_trusted(ssh_cli: Cli, sshd: Sshd,
                                                                  bastion: Sshd) -> None:
    known = jump_home(ssh_cli, sshd, bastion, bastion_known=None)
    forwards = forwards_through(bastion)
    accepted = ssh_cli("capture", "behind", "--label", "first", "--accept-new-host-keys")
    assert accepted.returncode == 0, accepted.stderr
    assert bastion.known_hosts_line(bastion.addresses[0]) in known.read_text().splitlines()
    # The recorded bastion is now known: the same jump works without the flag.
    again = ssh_cli("capture", "behind", "--label", "second")
    assert again.returncode == 0, again.stderr
    assert stored(ssh_cli) == ["first.yaml", "second.yaml"]
    assert forwards_through(bastion) >= forwards + 2   # both went through the bastion


def test_second_hop_of_a_chain_is_checked_too(ssh_cli: Cli, sshd: Sshd, bastion: Sshd) -> None:
    # jumpbox is known, jumpbox2 (reached through it) is not
    known = jump_home(ssh_cli, sshd, bastion, bastion.known_hosts_line(bastion.addresses[0]))
    result = ssh_cli("capture", "behind-two", "--label", "x")
    assert result.returncode == 3, result.stderr
    line = error_line(result)
    assert "bastion jumpbox2" in line and "unknown host key" in line

    accepted = ssh_cli("capture", "behind-two", "--label", "x", "--accept-new-host-keys")
    assert accepted.returncode == 0, accepted.stderr
    assert bastion.known_hosts_line(bastion.addresses[1]) in known.read_text().splitlines()


def test_capture_through_a_known_bastion_of_the_inventory(ssh_cli: Cli, sshd: Sshd,
                                                          bastion: Sshd,
                                                          tmp_path: Path) -> None:
    jump_home(ssh_cli, sshd, bastion, bastion.known_hosts_line(bastion.addresses[0]))
    known_jump = f"root@{bastion.addresses[0]}:{bastion.port}"
    unknown_jump = f"root@{bastion.addresses[1]}:{bastion.port}"
    inventory = {"all": {"hosts": {
        "inv-behind": {"ansible_host": sshd.addresses[2],
                       "ansible_ssh_common_args": f"-o StrictHostKeyChecking=yes -J {known_jump}"},
        "inv-unknown-bastion": {"ansible_host": sshd.addresses[2],
                                "ansible_ssh_common_args": f"-o 'ProxyJump={unknown_jump}' -q"}}}}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    forwards = forwards_through(bastion)
    result = ssh_cli("capture", "inv-behind", "--inventory", str(tmp_path / "hosts.yml"),
                     "--label", "through")
    assert result.returncode == 0, result.stderr
    assert stored(ssh_cli) == ["through.yaml"]
    assert forwards_through(bastion) > forwards   # it went through the bastion, not around

    refused = ssh_cli("capture", "inv-unknown-bastion", "--inventory",
                      str(tmp_path / "hosts.yml"), "--label", "no")
    assert refused.returncode == 3, refused.stderr
    assert "unknown host key" in error_line(refused)


def test_unreadable_ssh_args_in_the_inventory_are_a_usage_error(cli: Cli,
                                                                tmp_path: Path) -> None:
    inventory = {"all": {"hosts": {"box": {"ansible_host": "127.0.0.1", "ansible_port": 1,
                                           "ansible_ssh_common_args": "-o 'ProxyJump=b"}}}}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    result = cli("capture", "box", "--inventory", str(tmp_path / "hosts.yml"), "--label", "x")
    assert result.returncode == 2, result.stderr
    assert "ansible_ssh_common_args" in error_line(result)


@pytest.mark.parametrize(("args", "jump"), [
    ("-J b", Jump(hops=("b",))),
    ("-Jroot@b:2222,c", Jump(hops=("root@b:2222", "c"))),
    ("-o ProxyJump=ssh://b:22", Jump(hops=("b:22",))),
    ("-o'ProxyJump b'", Jump(hops=("b",))),
    ("-o 'ProxyJump = none' -J b", Jump()),              # ssh: the first one given wins
    ("-o ProxyCommand='ssh -W %h:%p b'", Jump(command="ssh -W %h:%p b")),
    ("-o StrictHostKeyChecking=no -C", None),
])
def test_proxy_options_of_ssh_args(args: str, jump: Jump | None) -> None:
    assert ssh_args_jump(args, "x") == jump


def test_dangling_option_of_ssh_args() -> None:
    with pytest.raises(UsageError, match="-J without a value"):
        ssh_args_jump("-C -J", "x")


def test_proxycommand_of_the_inventory_is_ssh_checking_the_bastion(ssh_cli: Cli, sshd: Sshd,
                                                                   bastion: Sshd,
                                                                   tmp_path: Path) -> None:
    # A ProxyCommand is ssh's own process: it checks the bastion with ssh's own settings
    # (here BatchMode: an unknown key is refused, never asked about).
    known = jump_home(ssh_cli, sshd, bastion, bastion_known=None)
    config = Path(ssh_cli.env["HOME"]) / ".ssh" / "config"
    command = f"ssh -F {config} -o BatchMode=yes -W %h:%p jumpbox"
    inventory = {"all": {"hosts": {"inv-proxied": {
        "ansible_host": sshd.addresses[3],
        "ansible_ssh_common_args": f"-o 'ProxyCommand={command}'"}}}}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    capture = ("capture", "inv-proxied", "--inventory", str(tmp_path / "hosts.yml"))
    refused = ssh_cli(*capture, "--label", "no")
    assert refused.returncode == 3, refused.stderr
    assert "ProxyCommand ended before SSH began" in error_line(refused)

    with known.open("a") as handle:
        handle.write(bastion.known_hosts_line(bastion.addresses[0]) + "\n")
    forwards = forwards_through(bastion)
    result = ssh_cli(*capture, "--label", "through")
    assert result.returncode == 0, result.stderr
    assert forwards_through(bastion) > forwards


def test_proxyjump_for_every_host_reaches_the_bastion_itself_directly(ssh_cli: Cli, sshd: Sshd,
                                                                      bastion: Sshd) -> None:
    # `Host *` + ProxyJump matches the bastion too: ssh users mean "everything else".
    jump_home(ssh_cli, sshd, bastion, bastion.known_hosts_line(bastion.addresses[0]))
    config = Path(ssh_cli.env["HOME"]) / ".ssh" / "config"
    config.write_text(config.read_text().replace("Host *\n", "Host *\n  ProxyJump jumpbox\n", 1))
    forwards = forwards_through(bastion)
    result = ssh_cli("capture", sshd.addresses[3], "--label", "x")
    assert result.returncode == 0, result.stderr
    assert forwards_through(bastion) > forwards


def test_bastions_that_jump_through_each_other_are_one_line(ssh_cli: Cli, sshd: Sshd,
                                                            bastion: Sshd) -> None:
    jump_home(ssh_cli, sshd, bastion, bastion.known_hosts_line(bastion.addresses[0]))
    config = Path(ssh_cli.env["HOME"]) / ".ssh" / "config"
    config.write_text("Host loop-a\n  ProxyJump loop-b\nHost loop-b\n  ProxyJump loop-a\n"
                      "Host looped\n  ProxyJump loop-a\n" + config.read_text())
    result = ssh_cli("capture", "looped", "--label", "x")
    assert result.returncode == 3, result.stderr
    assert "ProxyJump" in error_line(result)
