"""Inventory booleans are real booleans: `"false"` is false, never a truthy string.

Through the real CLI over the test sshd: an unknown host key with `accept_new_host_keys`
written as the string "false" (and its friends) is refused, as with no var at all.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import Cli
from helpers.sshd import Sshd

from envsnap.errors import UsageError
from envsnap.hosts.inventory import Inventory


def inventory_file(tmp_path: Path, sshd: Sshd, flag: object) -> Path:
    path = tmp_path / "hosts.yml"
    host = {"ansible_host": sshd.addresses[0], "ansible_port": sshd.port,
            "accept_new_host_keys": flag}
    path.write_text(yaml.safe_dump({"all": {"hosts": {"gpu": host}}}))
    return path


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("envsnap: error:")]


@pytest.mark.parametrize("flag", ["false", "False", "no", "off", "0"])
def test_a_false_string_does_not_turn_on_trust_on_first_use(ssh_cli: Cli, sshd: Sshd,
                                                            tmp_path: Path,
                                                            flag: object) -> None:
    known = Path(ssh_cli.env["HOME"]) / ".ssh" / "known_hosts"
    known.unlink()
    result = ssh_cli("capture", "gpu", "--inventory", str(inventory_file(tmp_path, sshd, flag)),
                     "--label", "x")
    assert result.returncode == 3, result.stderr
    lines = error_lines(result.stderr)
    assert len(lines) == 1 and "unknown host key" in lines[0], result.stderr
    assert not known.exists()


@pytest.mark.parametrize("flag", ["maybe", "", 2, [True], {"a": 1}, 0.5])
def test_an_unclear_boolean_is_a_usage_error_naming_host_and_var(cli: Cli, tmp_path: Path,
                                                                 flag: object) -> None:
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump({"all": {"hosts": {"gpu-a": {
        "ansible_host": "127.0.0.1", "ansible_port": 1, "accept_new_host_keys": flag}}}}))
    result = cli("capture", "gpu-a", "--inventory", str(path), "--label", "x")
    assert result.returncode == 2, result.stderr
    lines = error_lines(result.stderr)
    assert len(lines) == 1, result.stderr
    assert "gpu-a" in lines[0] and "accept_new_host_keys" in lines[0]
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(("flag", "expected"), [
    ("TRUE", True), ("On", True), ("1", True), (1, True),
    ("FALSE", False), ("No", False), ("off", False), ("0", False), (0, False)])
def test_words_and_numbers_map_to_booleans(flag: object, expected: bool) -> None:
    host = Inventory({"all": {"hosts": {"h": {"accept_new_host_keys": flag}}}}).host("h")
    assert host.vars["accept_new_host_keys"] is expected


def test_a_group_var_is_read_the_same_way() -> None:
    inventory = Inventory({"all": {"vars": {"accept_new_host_keys": "nope"},
                                   "hosts": {"h": {}}}}, source="inv.yml")
    with pytest.raises(UsageError, match=r"inv.yml: host 'h': accept_new_host_keys"):
        inventory.host("h")
