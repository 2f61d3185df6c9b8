"""One inventory as Ansible sees it and as envsnap sees it, to compare the two.

`ansible_view` reads the real `ansible-inventory --list`; `envsnap_view` runs `envsnap play`
with a play per group whose hosts print the named vars: both give each non-empty group's
hosts (children's included) and each host's vars.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import Cli

VENV_BIN = Path(sys.executable).parent   # where pip put ansible-inventory
# Ansible says an unparsable source only in a warning (an empty inventory): made a failure.
STRICT = {"ANSIBLE_INVENTORY_UNPARSED_FAILED": "true", "ANSIBLE_NOCOLOR": "1"}


def with_ansible_on_path(cli: Cli) -> Cli:
    """The CLI with ansible-core's commands on PATH (they are in the test venv)."""
    assert (VENV_BIN / "ansible-inventory").exists(), \
        "ansible-core is missing: install the test extra (bash tests/run.sh does)"
    cli.env["PATH"] = f"{VENV_BIN}{os.pathsep}{cli.env.get('PATH', '')}"
    return cli


def write_tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def run_ansible_inventory(cli: Cli, source: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(VENV_BIN / "ansible-inventory"), "-i", source, "--list", *extra],
                          cwd=cli.cwd, env={**cli.env, **STRICT}, capture_output=True,
                          text=True)


def ansible_inventory(cli: Cli, source: str, *extra: str) -> dict[str, Any]:
    done = run_ansible_inventory(cli, source, *extra)
    assert done.returncode == 0, done.stderr
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def ansible_view(document: dict[str, Any]) -> tuple[dict[str, set[str]], dict[str, Any]]:
    """Each non-empty group's hosts (children's included) and each host's vars."""
    def members(group: str) -> set[str]:
        body = document.get(group, {})
        return set(body.get("hosts", [])).union(*map(members, body.get("children", [])))

    hostvars = json.loads(json.dumps(document["_meta"]["hostvars"]).replace(
        '{"__ansible_unsafe": "{{ not_rendered }}"}', '"{{ not_rendered }}"'))
    groups = {group: members(group) for group in document if group != "_meta"}
    hosts = set().union(*groups.values())
    return ({group: found for group, found in groups.items() if found},
            {host: hostvars.get(host, {}) for host in hosts})


def envsnap_view(cli: Cli, inventory: str, groups: list[str], names: list[str],
                 *extra: str) -> tuple[dict[str, set[str]], dict[str, Any]]:
    """What `envsnap play` sees: a play per group, each host printing the named vars."""
    shown = ", ".join(f"'{name}': {name} | default('<undefined>')" for name in names)
    plays = [{"hosts": group, "tasks": [{"debug": {"msg": "{{ {" + shown + "} | tojson }}"}}]}
             for group in groups]
    (cli.cwd / "show.yml").write_text(json.dumps(plays))
    result = cli("play", "show.yml", "--inventory", inventory, *extra)
    assert result.returncode == 0, result.stdout + result.stderr
    members: dict[str, set[str]] = {}
    hosts: dict[str, Any] = {}
    for chunk in result.stdout.split("PLAY [")[1:]:
        group = chunk.split("]", 1)[0]
        for host, dumped in re.findall(r"^ok: \[([^\]]+)\]: (\{.*\})$", chunk, re.M):
            members.setdefault(group, set()).add(host)
            hosts[host] = {k: v for k, v in json.loads(dumped).items() if v != "<undefined>"}
    return members, hosts


def same_view(cli: Cli, source: str, *extra: str) -> tuple[dict[str, set[str]], dict[str, Any]]:
    """Ansible's view of `source`, asserted equal to envsnap's; returned for more checks."""
    expected = ansible_view(ansible_inventory(cli, source, *extra))
    names = sorted({name for host_vars in expected[1].values() for name in host_vars})
    assert envsnap_view(cli, source, sorted(expected[0]), names, *extra) == expected
    return expected
