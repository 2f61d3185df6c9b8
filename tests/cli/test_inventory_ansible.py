"""Every Ansible inventory form, through the real CLI, checked against the real ansible-core
(the `test` extra installs it): INI with host_vars/ and group_vars/, the JSON of
`ansible-inventory --list`, a dynamic inventory script and an inventory plugin's config."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import Cli, OfflineCli
from helpers.ansibleview import (
    ansible_inventory,
    ansible_view,
    envsnap_view,
    with_ansible_on_path,
    write_tree,
)
from helpers.sshd import Sshd

RICH_INI = """\
# before any section: ungrouped
login ansible_connection=local flag=True
bare:2201

[gpu]
node[01:03] ansible_host=127.0.0.1 ansible_user=ml rank=7 quoted="007" listed="[1, 2]" word=yes
special:2222 ansible_host=10.0.0.9 python=/opt/py/bin/python3   # a comment
rack-[a:c] note='two words'
odd[1:7:3]

[gpu:vars]
python=/root/ml-env/bin/python3
port_str=8080
flag=False
lower=true
spaced = a value with spaces

; a comment too
[cluster:children]
gpu
infra

[infra]
login
[infra:vars]
python=/usr/bin/python3
[cluster:vars]
site=eu
flag=cluster
[all:vars]
site=global
everywhere=1
"""
VARS_FILES = {
    "group_vars/all.yml": "from_all_folder: 1\nsite: folder-global\n",
    "group_vars/gpu/a.yml": "from_gpu_folder: a\neverywhere: gpu-folder\n",
    "group_vars/gpu/b.yaml": "from_gpu_folder: b\n",
    "group_vars/cluster": '{"cluster_json": true, "from_gpu_folder": "cluster"}\n',
    "host_vars/node02.json": '{"rank": 2, "host_folder": "yes"}\n',
    "host_vars/special.yml": "python: /from/host_vars\n",
    # kept encrypted, as ansible-inventory prints it; !unsafe: data, as every inventory value
    "group_vars/infra.yml": ("token: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n"
                             "  3863663333346539336665666231\n"
                             "template_looking: !unsafe '{{ not_rendered }}'\n"),
}


@pytest.fixture
def ansible_cli(cli: Cli) -> Cli:
    return with_ansible_on_path(cli)


def test_an_ini_inventory_with_vars_folders_is_read_as_ansible_reads_it(ansible_cli: Cli) -> None:
    write_tree(ansible_cli.cwd, {"inv.ini": RICH_INI, **VARS_FILES})
    groups, hosts = ansible_view(ansible_inventory(ansible_cli, "inv.ini"))
    names = sorted({name for host_vars in hosts.values() for name in host_vars})
    assert {"gpu", "cluster", "infra", "ungrouped", "all"} <= set(groups)
    assert len(hosts) == 12 and hosts["node02"]["rank"] == 2   # the cross-check has teeth
    assert hosts["login"]["token"] == {"__ansible_vault": "$ANSIBLE_VAULT;1.1;AES256\n"
                                                          "3863663333346539336665666231\n"}
    assert hosts["login"]["template_looking"] == "{{ not_rendered }}"
    assert envsnap_view(ansible_cli, "inv.ini", sorted(groups), names) == (groups, hosts)


RICH_YAML = """\
all:
  vars: {site: global, everywhere: 1}
  hosts:
    login: {ansible_connection: local, flag: true}
  children:
    cluster:
      vars: {site: eu, flag: cluster}
      children:
        gpu:
          vars: {python: /root/ml-env/bin/python3, flag: false, ansible_group_priority: 3}
          hosts:
            node[01:03]: {ansible_host: 127.0.0.1, rank: 7}
            rack-[a:c]:
            special: {python: /opt/py/bin/python3}
        infra:
          vars: {python: /usr/bin/python3, flag: infra}
          hosts:
            login:
"""


def test_a_yaml_inventory_with_vars_folders_is_read_as_ansible_reads_it(ansible_cli: Cli) -> None:
    write_tree(ansible_cli.cwd, {"hosts.yml": RICH_YAML, **VARS_FILES})
    groups, hosts = ansible_view(ansible_inventory(ansible_cli, "hosts.yml"))
    names = sorted({name for host_vars in hosts.values() for name in host_vars})
    assert hosts["special"]["python"] == "/from/host_vars"   # host_vars/ wins over the file
    assert hosts["login"]["flag"] is True                    # as do the file's host vars
    assert envsnap_view(ansible_cli, "hosts.yml", sorted(groups), names) == (groups, hosts)


def test_the_json_of_ansible_inventory_reads_as_its_ini(ansible_cli: Cli) -> None:
    write_tree(ansible_cli.cwd, {"inv.ini": RICH_INI, **VARS_FILES})
    listed = ansible_inventory(ansible_cli, "inv.ini")
    (ansible_cli.cwd / "listed.json").write_text(json.dumps(listed))
    groups, hosts = ansible_view(listed)
    names = sorted({name for host_vars in hosts.values() for name in host_vars})
    from_json = envsnap_view(ansible_cli, "listed.json", sorted(groups), names)
    assert from_json == envsnap_view(ansible_cli, "inv.ini", sorted(groups), names)
    assert from_json == (groups, hosts)


def test_a_group_of_an_ini_inventory_is_captured(cli: Cli) -> None:
    (cli.cwd / "hosts").write_text("[gpu]\nbox[1:2] ansible_connection=local\n[other]\nx\n")
    result = cli("capture", "gpu", "--inventory", "hosts", "--label", "run1")
    assert result.returncode == 0, result.stderr
    assert sorted(path.name for path in (cli.cwd / "store" / "run1").iterdir()) == \
        ["box1.yaml", "box2.yaml"]


def test_an_ini_group_is_captured_over_ssh_with_its_vars_folders(ssh_cli: Cli,
                                                                  sshd: Sshd) -> None:
    """`host:port`, `[group:vars]` and group_vars/ reach the connection as Ansible's vars."""
    write_tree(ssh_cli.cwd, {
        "inv.ini": (f"[gpu]\nbox1 ansible_host={sshd.addresses[0]}\n"
                    f"box2:{sshd.port} ansible_host={sshd.addresses[1]}\n"
                    "[gpu:vars]\nansible_port=1\n"),   # wrong: group_vars/ below wins
        "group_vars/gpu.yml": f"ansible_port: {sshd.port}\n"})
    result = ssh_cli("capture", "gpu", "--inventory", "inv.ini", "--label", "ini")
    assert result.returncode == 0, result.stderr
    assert sorted(path.name for path in (ssh_cli.cwd / "store" / "ini").iterdir()) == \
        ["box1.yaml", "box2.yaml"]


def test_an_unknown_name_lists_the_inventorys_groups(offline_cli: OfflineCli) -> None:
    (offline_cli.cwd / "inv.ini").write_text("[gpu]\nbox1 ansible_connection=local\n"
                                             "[infra]\nlogin\n")
    (Path(offline_cli.env["HOME"]) / ".ssh").mkdir()
    (Path(offline_cli.env["HOME"]) / ".ssh" / "config").write_text("")
    result = offline_cli("capture", "gpux.invalid", "--inventory", "inv.ini", "--label", "x")
    assert result.returncode == 2
    assert result.stderr == ("envsnap: error: gpux.invalid: not in inventory inv.ini "
                             "(groups: gpu, infra, all), not a Host in ~/.ssh/config, and "
                             "the name does not resolve\n")


BAD_INI = [
    ("[gpu]\nbox a=1 stray\n", "inv.ini:2: expected key=value after host 'box', got 'stray'"),
    ("[gpu:kids]\nbox\n", "inv.ini:1: section [gpu:kids] has an unknown type 'kids'"),
    ("[gpu]\nbox\n[all:children]\nmissing\n",
     "inv.ini:4: section [all:children] names group 'missing', which has no section"),
    ("[gpu:vars]\npython=/x\n", "inv.ini:1: section [gpu:vars] is for a group that is never"),
    ("[gpu]\nn[1:99999999]\n", "inv.ini:2: 'n[1:99999999]': a range of more than 10000 hosts"),
    ("[gpu]\nbox:99999\n", "inv.ini:2: host 'box:99999': '99999' after ':' is not a port"),
    ("[a b]\n", "inv.ini:1: not a section header: '[a b]'"),
    ("[a:children]\nb\n[b:children]\na\n", "inv.ini: group 'a' is its own ancestor (a -> b -> a)"),
    ("[g0]\nh\n" + "".join(f"[g{n}:children]\ng{n - 1}\n" for n in range(1, 3000)),
     "inv.ini: groups nested too deeply"),
]


@pytest.mark.parametrize(("text", "message"), BAD_INI)
def test_a_malformed_ini_inventory_is_one_line_and_exit_2(cli: Cli, text: str,
                                                          message: str) -> None:
    (cli.cwd / "inv.ini").write_text(text)
    result = cli("capture", "all", "--inventory", "inv.ini", "--label", "x")
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"envsnap: error: {message}"), result.stderr
    assert len(result.stderr.splitlines()) == 1


DYNAMIC_SCRIPT = """#!/usr/bin/env python3
import json
print(json.dumps({"gpu": {"hosts": ["dyn1", "dyn2"], "vars": {"ansible_connection": "local"}},
                  "_meta": {"hostvars": {"dyn2": {"rank": 2}}}}))
"""


def test_a_dynamic_inventory_script_runs_through_ansible_inventory(ansible_cli: Cli) -> None:
    script = ansible_cli.cwd / "dynamic.py"
    script.write_text(DYNAMIC_SCRIPT)
    script.chmod(0o755)
    result = ansible_cli("capture", "gpu", "--inventory", "dynamic.py", "--label", "dyn")
    assert result.returncode == 0, result.stderr
    assert sorted(path.name for path in (ansible_cli.cwd / "store" / "dyn").iterdir()) == \
        ["dyn1.yaml", "dyn2.yaml"]
    assert envsnap_view(ansible_cli, "dynamic.py", ["gpu"], ["rank"]) == (
        {"gpu": {"dyn1", "dyn2"}}, {"dyn1": {}, "dyn2": {"rank": 2}})


def test_an_inventory_plugin_config_runs_through_ansible_inventory(ansible_cli: Cli) -> None:
    (ansible_cli.cwd / "gen.yml").write_text(
        "plugin: ansible.builtin.generator\n"
        "hosts: {name: 'gpu-{{ rack }}', parents: [{name: racks}]}\n"
        "layers: {rack: [a, b]}\n")
    expected = ansible_view(ansible_inventory(ansible_cli, "gen.yml"))
    assert expected[0]["racks"] == {"gpu-a", "gpu-b"}
    assert envsnap_view(ansible_cli, "gen.yml", sorted(expected[0]), []) == (
        expected[0], {host: {} for host in expected[1]})


def test_without_ansible_inventory_a_script_is_one_line_naming_it(cli: Cli) -> None:
    script = cli.cwd / "dynamic.py"
    script.write_text(DYNAMIC_SCRIPT)
    script.chmod(0o755)
    cli.env["PATH"] = os.pathsep.join(
        folder for folder in cli.env.get("PATH", "").split(os.pathsep)
        if folder and not shutil.which("ansible-inventory", path=folder))
    result = cli("capture", "gpu", "--inventory", "dynamic.py", "--label", "x")
    assert result.returncode == 2
    assert result.stderr == (
        "envsnap: error: dynamic.py: this inventory (a script, a plugin config or a folder) "
        "is read through ansible-inventory, which is not on PATH (pip install ansible-core)\n")
    assert not (cli.cwd / "store").exists()


def test_a_failing_inventory_script_is_one_line_with_its_reason(ansible_cli: Cli) -> None:
    script = ansible_cli.cwd / "broken.sh"
    script.write_text("#!/bin/sh\necho 'no API token' >&2\nexit 3\n")
    script.chmod(0o755)
    result = ansible_cli("capture", "gpu", "--inventory", "broken.sh", "--label", "x")
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith("envsnap: error: broken.sh: ansible-inventory failed")
    assert "Inventory script returned non-zero exit code 3" in result.stderr
