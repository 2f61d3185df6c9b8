"""A host name envsnap cannot find is said so in one line, with each place it was looked for:
the inventory (or that none was given), the SSH config, the resolver. Run offline
(helpers/offline.py): every name here is looked up in /etc/hosts alone, nothing leaves."""
from __future__ import annotations

from pathlib import Path

from conftest import OfflineCli


def ssh_config(cli: OfflineCli, text: str = "") -> None:
    """A ~/.ssh/config of the test's HOME: the one file SSH then reads (sshconfig.py)."""
    folder = Path(cli.env["HOME"]) / ".ssh"
    folder.mkdir(exist_ok=True)
    (folder / "config").write_text(text)


def stored(cli: OfflineCli) -> list[Path]:
    return sorted(Path(cli.env["ENVSNAP_STORE"]).rglob("*.yaml"))


def test_a_name_that_does_not_resolve_says_where_it_was_looked_for(
        offline_cli: OfflineCli) -> None:
    ssh_config(offline_cli, "Host other\n  HostName 127.0.0.1\n")
    result = offline_cli("capture", "nosuchhost.invalid", "--label", "x")
    assert result.returncode == 2, result.stderr
    assert result.stderr == ("envsnap: error: nosuchhost.invalid: not in the inventory (none "
                             "given; see --inventory), not a Host in ~/.ssh/config, and the "
                             "name does not resolve\n")
    assert stored(offline_cli) == []


def test_with_an_inventory_it_is_named_with_its_groups(offline_cli: OfflineCli) -> None:
    ssh_config(offline_cli)
    (offline_cli.cwd / "hosts.yml").write_text(
        "all:\n  children:\n    gpu:\n      hosts:\n"
        "        gpu-box.invalid: {ansible_host: 127.0.0.1}\n")
    typo = offline_cli("capture", "gpu-bx.invalid", "--inventory", "hosts.yml", "--label", "x")
    assert typo.returncode == 2, typo.stderr
    assert typo.stderr == ("envsnap: error: gpu-bx.invalid: not in inventory hosts.yml "
                           "(groups: gpu, all), not a Host in ~/.ssh/config, and the name "
                           "does not resolve (did you mean 'gpu-box.invalid'?)\n")


def test_an_ssh_alias_whose_hostname_does_not_resolve(offline_cli: OfflineCli) -> None:
    ssh_config(offline_cli, "Host gpu-alias\n  HostName gpu-real.invalid\n")
    result = offline_cli("capture", "gpu-alias", "--label", "x")
    assert result.returncode == 2, result.stderr
    assert result.stderr == ("envsnap: error: gpu-alias: not in the inventory (none given; "
                             "see --inventory), a Host in ~/.ssh/config whose HostName "
                             "gpu-real.invalid does not resolve\n")


def test_a_name_that_resolves_is_tried_not_refused(offline_cli: OfflineCli) -> None:
    """localhost is in /etc/hosts: not an inventory host, yet a host SSH can find, so it is
    connected to (port 1: nobody listens) and the failure is the connection's."""
    ssh_config(offline_cli)
    (offline_cli.cwd / "hosts.yml").write_text("all:\n  hosts:\n    box: {}\n")
    result = offline_cli("capture", "localhost:1", "--inventory", "hosts.yml", "--label", "x",
                         "--connect-timeout", "5")
    assert result.returncode == 3, result.stderr
    assert "localhost:1: unreachable" in result.stderr
    assert "does not resolve" not in result.stderr and "inventory" not in result.stderr
    assert stored(offline_cli) == []
