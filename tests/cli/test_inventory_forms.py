"""The inventory forms Ansible reads beyond YAML, INI and JSON, and the inventories it refuses,
through the real CLI, each checked against the real ansible-core (the `test` extra installs
it): TOML, a file encrypted whole with ansible-vault, host and group names Ansible refuses,
and INI told from YAML the way Ansible's plugins tell them apart."""
from __future__ import annotations

import subprocess

import pytest
from conftest import Cli
from helpers.ansibleview import (
    VENV_BIN,
    run_ansible_inventory,
    same_view,
    with_ansible_on_path,
    write_tree,
)


@pytest.fixture
def ansible_cli(cli: Cli) -> Cli:
    return with_ansible_on_path(cli)


RICH_TOML = """\
[all.vars]
site = "global"
everywhere = 1

[cluster]
children = ["gpu", "infra"]
vars = { site = "eu", flag = "cluster" }

[gpu.vars]
python = "/root/ml-env/bin/python3"
ratio = 0.5
listed = [1, 2]

[gpu.hosts]
"node[01:03]" = { ansible_host = "127.0.0.1", rank = 7 }
"login:2222" = { nested = { a = 1 } }
"rack-[a:c]" = {}

[infra.hosts]
login = { flag = true }

[lonely]
"""


def test_a_toml_inventory_is_read_as_ansible_reads_it(ansible_cli: Cli) -> None:
    write_tree(ansible_cli.cwd, {"inv.toml": RICH_TOML,
                                 "group_vars/gpu.yml": "from_folder: yes\n"})
    groups, hosts = same_view(ansible_cli, "inv.toml")
    assert groups["cluster"] == {"node01", "node02", "node03", "login", "rack-a", "rack-b",
                                 "rack-c"}   # the cross-check has teeth
    assert hosts["login"]["ansible_port"] == 2222 and hosts["login"]["flag"] is True
    assert hosts["node02"]["from_folder"] is True


def test_a_toml_group_is_captured(cli: Cli) -> None:
    (cli.cwd / "hosts.toml").write_text(
        '[gpu.hosts]\n"box[1:2]" = { ansible_connection = "local" }\n[other.hosts]\nx = {}\n')
    result = cli("capture", "gpu", "--inventory", "hosts.toml", "--label", "run1")
    assert result.returncode == 0, result.stderr
    assert sorted(path.name for path in (cli.cwd / "store" / "run1").iterdir()) == \
        ["box1.yaml", "box2.yaml"]


@pytest.mark.parametrize(("text", "message"), [
    ("[gpu.hosts\n", "inv.toml: not an inventory Ansible reads (as INI: line 1: '[gpu.hosts' "
                     "is not a host name, nor a range like node[01:32]; as TOML: not valid TOML "
                     "(Expected ']' at the end of a table declaration (at line 1, column 11)))"),
    ('[gpu]\nhosts = ["a", "b"]\n', "hosts must be a table, not list"),
    ('[gpu]\nchildren = "other"\n', "children must be a list of group names"),
    ('plugin = "constructed"\n', "a plugin's config in TOML, which Ansible does not read"),
])
def test_a_toml_inventory_ansible_refuses_is_one_line_and_exit_2(ansible_cli: Cli, text: str,
                                                                 message: str) -> None:
    (ansible_cli.cwd / "inv.toml").write_text(text)
    assert run_ansible_inventory(ansible_cli, "inv.toml").returncode != 0   # Ansible refuses
    result = ansible_cli("capture", "all", "--inventory", "inv.toml", "--label", "x")
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and len(result.stderr.splitlines()) == 1, result.stderr
    assert not (ansible_cli.cwd / "store").exists()


VAULTED = "[gpu]\nsecret[1:2] ansible_connection=local rank=3\n[gpu:vars]\nsite=eu\n"


def vault_encrypt(cli: Cli, name: str, text: str) -> None:
    """A file encrypted whole by the real ansible-vault, its password in `pw`."""
    write_tree(cli.cwd, {name: text, "pw": "correct horse\n"})
    subprocess.run([str(VENV_BIN / "ansible-vault"), "encrypt", "--vault-password-file", "pw",
                    name], cwd=cli.cwd, env=cli.env, check=True, capture_output=True)
    assert (cli.cwd / name).read_text().startswith("$ANSIBLE_VAULT;1.1;AES256\n")


def test_a_vault_encrypted_inventory_needs_the_vault_secret(ansible_cli: Cli) -> None:
    vault_encrypt(ansible_cli, "inv.ini", VAULTED)
    result = ansible_cli("capture", "gpu", "--inventory", "inv.ini", "--label", "x")
    assert result.returncode == 2
    assert result.stderr == (
        "envsnap: error: inv.ini: the inventory is encrypted with ansible-vault; give "
        "--vault-password-file FILE or --vault-id ID as to ansible (or set "
        "ANSIBLE_VAULT_PASSWORD_FILE)\n")
    assert not (ansible_cli.cwd / "store").exists()


def test_a_vault_encrypted_inventory_is_decrypted_by_ansible_with_the_users_secret(
        ansible_cli: Cli) -> None:
    vault_encrypt(ansible_cli, "inv.ini", VAULTED)
    groups, hosts = same_view(ansible_cli, "inv.ini", "--vault-password-file", "pw")
    assert groups["gpu"] == {"secret1", "secret2"} and hosts["secret2"]["site"] == "eu"
    _, by_id = same_view(ansible_cli, "inv.ini", "--vault-id", "pw")
    assert by_id == hosts
    result = ansible_cli("capture", "gpu", "--inventory", "inv.ini", "--label", "v",
                         "--vault-password-file", "pw")
    assert result.returncode == 0, result.stderr
    assert sorted(path.name for path in (ansible_cli.cwd / "store" / "v").iterdir()) == \
        ["secret1.yaml", "secret2.yaml"]


def test_a_wrong_vault_secret_is_ansibles_one_line(ansible_cli: Cli) -> None:
    vault_encrypt(ansible_cli, "inv.ini", VAULTED)
    (ansible_cli.cwd / "wrong").write_text("not it\n")
    result = ansible_cli("capture", "gpu", "--inventory", "inv.ini", "--label", "x",
                         "--vault-password-file", "wrong")
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith("envsnap: error: inv.ini: ansible-inventory failed")


@pytest.mark.parametrize(("text", "message"), [
    ("all:\n  hosts:\n    1234:\n    web1:\n", "group 'all': host 1234 must be a string"),
    ("all:\n  hosts:\n    1.5:\n", "host 1.5 must be a string"),
    ("all:\n  hosts:\n    true:\n", "host True must be a string"),
    ("all:\n  children:\n    123:\n      hosts:\n        a:\n", "group name 123 must be a string"),
    ("7:\n  hosts:\n    a:\n", "group name 7 must be a string"),
])
def test_names_ansible_refuses_are_refused_with_its_reason(ansible_cli: Cli, text: str,
                                                            message: str) -> None:
    # local: were a name taken, nothing would leave this machine
    (ansible_cli.cwd / "hosts.yml").write_text(text + "  vars: {ansible_connection: local}\n")
    assert run_ansible_inventory(ansible_cli, "hosts.yml").returncode != 0   # Ansible refuses
    result = ansible_cli("capture", "all", "--inventory", "hosts.yml", "--label", "x")
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and len(result.stderr.splitlines()) == 1, result.stderr


@pytest.mark.parametrize("text", [
    "web1 # the web box\n[gpu]\nnode1 ansible_host=10.0.0.1 rank=1\n",
    "web1\nweb2 ansible_port=2222\n",
    "; a comment first\nweb1 x=1\n[db]\ndb1\n",
])
def test_an_ini_file_that_starts_with_a_host_line_is_ini(ansible_cli: Cli, text: str) -> None:
    (ansible_cli.cwd / "hosts").write_text(text)   # no suffix: Ansible tries yaml, then ini
    groups, _ = same_view(ansible_cli, "hosts")
    assert "web1" in groups["ungrouped"]


def test_a_file_no_plugin_reads_names_each_plugins_reason(ansible_cli: Cli) -> None:
    (ansible_cli.cwd / "hosts").write_text("all:\n  hosts: [a, b\n")
    assert run_ansible_inventory(ansible_cli, "hosts").returncode != 0
    result = ansible_cli("capture", "all", "--inventory", "hosts", "--label", "x")
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith("envsnap: error: hosts: not an inventory Ansible reads "
                                    "(as YAML: line 3: not valid YAML"), result.stderr
    assert "; as INI: line 1: " in result.stderr


def test_the_help_names_every_form(cli: Cli) -> None:
    result = cli("capture", "-h")
    assert result.returncode == 0
    said = " ".join(result.stdout.split())
    assert "an Ansible inventory: YAML, INI, TOML, the JSON of ansible-inventory --list" in said
    assert "--vault-password-file FILE" in said and "--vault-id ID" in said
    assert "YAML inventory (default" not in said
