from __future__ import annotations

import pytest
import yaml
from conftest import Cli

from envsnap.errors import UsageError
from envsnap.hosts.inventory import (
    Inventory,
    expand_range,
    inventory_of,
    parse_host_spec,
    resolve_hosts,
)

INVENTORY = """
all:
  vars: {python: /usr/bin/python3, procs: [sglang]}
  hosts:
    login: {ansible_connection: local}
  children:
    gpu:
      vars: {repos: [/root/sglang], python: /root/ml-env/bin/python3}
      hosts:
        node[01:03]: {ansible_host: 10.0.0.1, ansible_port: 2222, ansible_user: ml}
        special:
          ansible_host: 10.0.0.9
          ansible_ssh_private_key_file: ~/.ssh/gpu
          ansible_python_interpreter: /opt/py/bin/python3
          hot_paths: [pynccl.py]
"""


@pytest.fixture
def inventory() -> Inventory:
    return Inventory(yaml.safe_load(INVENTORY))


def test_host_specs() -> None:
    assert parse_host_spec("local").is_local
    host = parse_host_spec("ml@gpu-box:2222")
    assert (host.user, host.address, host.port) == ("ml", "gpu-box", 2222)
    v6 = parse_host_spec("root@[::1]:22")
    assert (v6.address, v6.port) == ("::1", 22)
    assert parse_host_spec("gpu-box").port is None


@pytest.mark.parametrize("spec", ["a b", "host:99999", "user@", "x:y", "/etc/passwd"])
def test_bad_host_specs(spec: str) -> None:
    with pytest.raises(UsageError):
        parse_host_spec(spec)


def test_ranges_keep_leading_zeros() -> None:
    assert expand_range("node[01:03]") == ["node01", "node02", "node03"]
    assert expand_range("n[8:10]") == ["n8", "n9", "n10"]


def test_groups_expand_and_vars_merge_deeper_wins(inventory: Inventory) -> None:
    assert inventory.names("gpu") == ["node01", "node02", "node03", "special"]
    node = inventory.host("node02")
    assert (node.address, node.port, node.user) == ("10.0.0.1", 2222, "ml")
    assert node.python == "/root/ml-env/bin/python3"
    assert node.list_var("procs") == ["sglang"] and node.list_var("repos") == ["/root/sglang"]
    assert inventory.host("login").is_local


def test_ansible_vars_are_understood(inventory: Inventory) -> None:
    special = inventory.host("special")
    assert special.key_file == "~/.ssh/gpu"
    # python: set by the group wins over ansible_python_interpreter, as envsnap's own var
    assert special.python == "/root/ml-env/bin/python3"
    bare = Inventory({"all": {"hosts": {"h": {"ansible_python_interpreter": "/opt/p"}}}})
    assert bare.host("h").python == "/opt/p"


def test_command_line_overrides_win(inventory: Inventory) -> None:
    hosts = resolve_hosts(["node01", "local"], inventory, {"python": "/x/python", "repos": []})
    assert [h.name for h in hosts] == ["node01", "local"]
    assert hosts[0].python == "/x/python"
    assert hosts[0].list_var("repos") == ["/root/sglang"]   # an empty override changes nothing


def test_all_and_unknown_names(inventory: Inventory) -> None:
    assert len(resolve_hosts(["all"], inventory)) == 5
    assert resolve_hosts(["localhost:2200"], inventory)[0].port == 2200


def test_where_a_name_was_looked_for_in_the_inventory(inventory: Inventory) -> None:
    """The first place named when a name is not found (tests/cli/test_unknown_host.py:
    the whole line, offline)."""
    named = Inventory(yaml.safe_load(INVENTORY), source="hosts.yml")
    assert named.not_found_text() == "not in inventory hosts.yml (groups: gpu, all)"
    assert Inventory({"all": {}}, source="empty.yml").not_found_text() == \
        "not in inventory empty.yml (it has no hosts)"
    assert Inventory(None).not_found_text() == \
        "not in the inventory (none given; see --inventory)"


def test_inventory_must_be_a_mapping() -> None:
    with pytest.raises(UsageError, match="mapping of groups"):
        Inventory(["a", "b"])


BAD_INVENTORIES = [
    ("all:\n  hosts: 5\n", "hosts of group 'all' must be a mapping, not int '5'"),
    ("all:\n  vars: [a]\n", "vars of group 'all' must be a mapping"),
    ("all:\n  children:\n    gpu: 7\n", "group 'gpu' must be a mapping"),
    ("all:\n  hosts:\n    a: [1]\n", "host 'a' must be a mapping"),
    ("all:\n  hosts:\n    'node[01:x]': {}\n",
     "group 'all': 'node[01:x]' is not a host name, nor a range like node[01:32]"),
    ("all:\n  hosts:\n    'n[1:99999999]': {}\n", "a range of more than 10000 hosts"),
    ("all:\n  hosts:\n    a: {ansible_port: abc}\n",
     "host 'a': ansible_port 'abc' is not a port number (1-65535)"),
    ("all:\n  hosts:\n    a: {ansible_port: 70000}\n", "ansible_port 70000 is not a port"),
    ("all:\n  hosts:\n    a: {ansible_host: 'x:y@z'}\n", "ansible_host 'x:y@z' is not a host"),
    ("all:\n  hosts:\n    a: {repos: 5}\n",
     "host 'a': repos must be a string or a list of strings, not 5"),
    ("all:\n  hosts:\n    a: {procs: [[x]]}\n", "host 'a': procs must be a string or a list"),
    ("all: " + "[" * 3000 + "]" * 3000 + "\n", "not valid YAML (nested too deeply)"),
]


@pytest.mark.parametrize(("text", "message"), BAD_INVENTORIES)
def test_a_malformed_inventory_is_one_line_and_exit_2(cli: Cli, text: str, message: str) -> None:
    (cli.cwd / "hosts.yml").write_text(text)
    result = cli("capture", "all", "--inventory", "hosts.yml", "--label", "x")
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("envsnap: error: hosts.yml: ") and message in result.stderr
    assert len(result.stderr.splitlines()) == 1 and not (cli.cwd / "store").exists()


def test_an_inventory_that_is_not_utf8_is_one_line_and_exit_2(cli: Cli) -> None:
    (cli.cwd / "hosts.yml").write_bytes(b"all:\n  hosts: {\xff: {}}\n")
    result = cli("capture", "all", "--inventory", "hosts.yml", "--label", "x")
    assert result.returncode == 2
    assert result.stderr == "envsnap: error: cannot read inventory hosts.yml: not UTF-8 text\n"


def test_an_ipv6_ansible_host_is_an_address() -> None:
    inventory = Inventory({"all": {"hosts": {"v6": {"ansible_host": "::1", "ansible_port": 22}}}})
    host = inventory.host("v6")
    assert (host.address, host.port) == ("::1", 22)


@pytest.mark.parametrize("spec", ["root@gpu-box", "root@gpu-box:2222", "ml@[::1]:2222",
                                  "gpu-box", "local"])
def test_the_inventory_of_a_target_holds_it_as_given(spec: str) -> None:
    """What the playbook engine is handed for a host as capture took it: the same name and
    the same way in, a `user@` name included (an inventory file's names could not hold it)."""
    host = parse_host_spec(spec)
    held = inventory_of(host)
    assert list(held.hosts) == [spec] and held.names("all") == [spec]
    assert held.host(spec) == host
