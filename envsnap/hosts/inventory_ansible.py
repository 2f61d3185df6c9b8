"""What envsnap reads of Ansible beyond one YAML file: the JSON of `ansible-inventory --list`
(and of dynamic inventory scripts), the `host_vars/` and `group_vars/` folders beside an
inventory, and any other source (a script, an inventory plugin's config, a folder) through
`ansible-inventory` itself, as `ansible -i SOURCE` would read it.

A dynamic inventory is a program: running it is what `--inventory` asks for, as with
`ansible -i`; envsnap never runs one that the user did not name.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from envsnap import yamlread
from envsnap.errors import UsageError, YamlError
from envsnap.hosts.inventory_graph import HOST_NAME, InventoryGraph, Vars

ANSIBLE_INVENTORY = "ansible-inventory"
ANSIBLE_INVENTORY_TIMEOUT_S = 300     # a cloud plugin may page through an API for a while
VARS_EXTENSIONS = ("", ".yml", ".yaml", ".json")   # Ansible's, in the order it tries them
META = "_meta"
# `ansible-inventory --list`'s JSON (or a script's) as printed, before json_graph reads it
# into an InventoryGraph, checking each part's shape as it goes.
InventoryJson = dict[str, Any]


VAULT_KEY, UNSAFE_KEY = "__ansible_vault", "__ansible_unsafe"   # as ansible-inventory prints


class AnsibleYamlLoader(yamlread.Loader):
    """YAML as Ansible writes it: a `!vault` value stays encrypted, as ansible-inventory
    prints it ({"__ansible_vault": ciphertext}; envsnap needs no secret of the inventory),
    and `!unsafe` marks what Ansible must not template: envsnap templates no inventory value."""


def construct_vault(loader: AnsibleYamlLoader, node: yaml.Node) -> dict[str, str]:
    return {VAULT_KEY: loader.construct_scalar(node)}


def construct_unsafe(loader: AnsibleYamlLoader, node: yaml.Node) -> Any:
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node, deep=True)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    return loader.construct_scalar(node)


AnsibleYamlLoader.add_constructor("!vault", construct_vault)
AnsibleYamlLoader.add_constructor("!unsafe", construct_unsafe)


def ansible_yaml(text: str) -> Any:
    """YamlError when it is not YAML envsnap reads (yamlread.py)."""
    return yamlread.load(text, AnsibleYamlLoader)


def where(exc: YamlError) -> str:
    """`:line` for an error's message, where the YAML error has a line."""
    return f":{exc.line}" if exc.line else ""


def without_unsafe_marks(value: Any) -> Any:
    """ansible-inventory prints an `!unsafe` value as {"__ansible_unsafe": value}: the value."""
    if isinstance(value, dict):
        if set(value) == {UNSAFE_KEY}:
            return without_unsafe_marks(value[UNSAFE_KEY])
        return {key: without_unsafe_marks(item) for key, item in value.items()}
    if isinstance(value, list):
        return [without_unsafe_marks(item) for item in value]
    return value


def is_ansible_json(document: Any) -> bool:
    """The shape `ansible-inventory --list` and inventory scripts print: `_meta.hostvars`,
    groups whose `hosts` and `children` are lists (or a group that is a list of hosts)."""
    if not isinstance(document, dict):
        return False
    if META in document:
        return True
    return any(isinstance(body, list) or (isinstance(body, dict) and any(
        isinstance(body.get(key), list) for key in ("hosts", "children")))
        for body in document.values())


def json_graph(document: InventoryJson, source: str) -> InventoryGraph:
    """The groups and vars of `ansible-inventory --list`'s JSON (or a script's)."""
    document = without_unsafe_marks(document)
    graph = InventoryGraph()
    for group, body in document.items():
        if group == META:
            continue
        if isinstance(body, list):   # a script's short form: the group's hosts
            body = {"hosts": body}
        if not isinstance(body, dict):
            raise UsageError(f"{source}: group {group!r} must be a mapping (hosts, children, "
                             f"vars) or a list of hosts, not {type(body).__name__}")
        graph.add_group(str(group))
        for host in names_list(body.get("hosts"), f"{source}: hosts of group {group!r}"):
            if not HOST_NAME.match(host):
                raise UsageError(f"{source}: group {group!r}: {host!r} is not a host name")
            graph.add_host(host, str(group), {})
        for child in names_list(body.get("children"), f"{source}: children of {group!r}"):
            graph.add_child(str(group), child)
        graph.group_vars[str(group)].update(mapping(body.get("vars"),
                                                    f"{source}: vars of group {group!r}"))
    meta = mapping(document.get(META), f"{source}: {META}")
    for host, host_vars in mapping(meta.get("hostvars"), f"{source}: {META}.hostvars").items():
        if host in graph.host_vars:   # as Ansible: vars of a host no group names are unused
            graph.host_vars[host].update(mapping(host_vars, f"{source}: hostvars of {host!r}"))
    return graph


def names_list(value: Any, what: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise UsageError(f"{what} must be a list of names, not {str(value)[:40]!r}")
    return value


def mapping(value: Any, what: str) -> Vars:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UsageError(f"{what} must be a mapping, not {type(value).__name__}")
    return value


# ---- host_vars/ and group_vars/ ----------------------------------------------------------

def vars_files(folder: Path, name: str) -> list[Path]:
    """Ansible's files for one group or host: `NAME`, `NAME.yml`, `NAME.yaml`, `NAME.json`
    (the first that exists), or every such file under a folder `NAME/`, sorted."""
    if name in (".", "..") or "/" in name or "\\" in name:   # never a path out of the folder
        return []
    for extension in VARS_EXTENSIONS:
        path = folder / (name + extension)
        if path.is_dir():
            return folder_files(path)
        if path.is_file():
            return [path]
    return []


def folder_files(folder: Path) -> list[Path]:
    found: list[Path] = []
    for path in sorted(folder.iterdir(), key=lambda each: each.name):
        if path.name.startswith(".") or path.name.endswith("~"):   # hidden files, backups
            continue
        if path.is_dir() and not path.suffix:
            found += folder_files(path)
        elif path.is_file() and path.suffix in VARS_EXTENSIONS:
            found.append(path)
    return found


def read_vars_file(path: Path) -> Vars:
    try:
        document = ansible_yaml(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise UsageError(f"cannot read {path}: not UTF-8 text") from None
    except YamlError as exc:
        raise UsageError(f"{path}{where(exc)}: not valid YAML ({exc.reason})") from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise UsageError(f"{path}: vars must be a mapping, not {type(document).__name__}")
    return document


def folder_vars(base: Path | None, names: list[str], kind: str) -> dict[str, Vars]:
    """`kind` is host_vars or group_vars: each name's vars there, its files in order."""
    folder = base / kind if base is not None else None
    if folder is None or not folder.is_dir():
        return {}
    found: dict[str, Vars] = {}
    for name in names:
        for path in vars_files(folder, name):
            found.setdefault(name, {}).update(read_vars_file(path))
    return found


# ---- sources that only Ansible reads -------------------------------------------------------

def needs_ansible(path: Path, head: bytes) -> bool:
    """A source only Ansible can read: a folder of sources, or a program (a `#!` script, or
    an executable that is not text)."""
    if path.is_dir() or head.startswith(b"#!"):
        return True
    if not os.access(path, os.X_OK):
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def is_plugin_config(document: Any) -> bool:
    """An inventory plugin's config (`plugin: amazon.aws.aws_ec2`), not an inventory."""
    return isinstance(document, dict) and isinstance(document.get("plugin"), str)


def run_ansible_inventory(source: str) -> InventoryJson:
    """`ansible-inventory -i SOURCE --list`: its JSON, or one line saying why not."""
    program = shutil.which(ANSIBLE_INVENTORY)
    if program is None:
        raise UsageError(f"{source}: this inventory (a script, a plugin config or a folder) "
                         f"is read through {ANSIBLE_INVENTORY}, which is not on PATH "
                         "(pip install ansible-core)")
    # Unparsable sources are only a warning to Ansible (an empty inventory): made an error.
    env = {**os.environ, "ANSIBLE_INVENTORY_UNPARSED_FAILED": "true",
           "ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED": "true", "ANSIBLE_NOCOLOR": "1"}
    try:
        done = subprocess.run([program, "-i", source, "--list"], capture_output=True,
                              text=True, env=env, timeout=ANSIBLE_INVENTORY_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise UsageError(f"{source}: {ANSIBLE_INVENTORY} gave no inventory within "
                         f"{ANSIBLE_INVENTORY_TIMEOUT_S} s") from None
    if done.returncode != 0:
        raise UsageError(f"{source}: {ANSIBLE_INVENTORY} failed (exit {done.returncode}): "
                         f"{ansible_error(done.stderr)}")
    try:
        document = json.loads(done.stdout)
    except ValueError:
        raise UsageError(f"{source}: {ANSIBLE_INVENTORY} printed no JSON") from None
    if not isinstance(document, dict):
        raise UsageError(f"{source}: {ANSIBLE_INVENTORY} printed no inventory")
    return document


def ansible_error(stderr: str) -> str:
    """What went wrong, on one line: Ansible's error and, as it tries every plugin in turn,
    the first plugin's reason (for a script: the script's own exit status)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith(("[ERROR]", "ERROR!"))]
    reasons = [line.removeprefix("[WARNING]: ") for line in lines
               if line.startswith("[WARNING]: Failed to parse inventory with")]
    said = errors[0] if errors else (lines[-1] if lines else "no message")
    return f"{said} ({reasons[0]})" if reasons else said
