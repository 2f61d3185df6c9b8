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
from collections.abc import Mapping, Sequence
from pathlib import Path

import yaml

from envsnap import yamlread
from envsnap.errors import UsageError, YamlError
from envsnap.hosts.inventory_graph import HOST_NAME, InventoryGraph, Vars

ANSIBLE_INVENTORY = "ansible-inventory"
ANSIBLE_INVENTORY_TIMEOUT_S = 300     # a cloud plugin may page through an API for a while
VARS_EXTENSIONS = ("", ".yml", ".yaml", ".json")   # Ansible's, in the order it tries them
META = "_meta"
# `ansible-inventory --list`'s JSON (or a script's), a mapping as printed: json_graph reads it
# into an InventoryGraph, checking each part's shape as it goes.
InventoryJson = Mapping[str, object]


VAULT_KEY, UNSAFE_KEY = "__ansible_vault", "__ansible_unsafe"   # as ansible-inventory prints


class AnsibleYamlLoader(yamlread.Loader):
    """YAML as Ansible writes it: a `!vault` value stays encrypted, as ansible-inventory
    prints it ({"__ansible_vault": ciphertext}; envsnap needs no secret of the inventory),
    and `!unsafe` marks what Ansible must not template: envsnap templates no inventory value."""


def construct_vault(loader: AnsibleYamlLoader, node: yaml.Node) -> dict[str, str]:
    return {VAULT_KEY: loader.construct_scalar(node)}


def construct_unsafe(loader: AnsibleYamlLoader, node: yaml.Node) -> object:
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node, deep=True)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    return loader.construct_scalar(node)


AnsibleYamlLoader.add_constructor("!vault", construct_vault)
AnsibleYamlLoader.add_constructor("!unsafe", construct_unsafe)


def ansible_yaml(text: str) -> object:
    """YamlError when it is not YAML envsnap reads (yamlread.py)."""
    return yamlread.load(text, AnsibleYamlLoader)


def ansible_json(text: str) -> object:
    """JSON as ansible-inventory prints it, an `!unsafe` value as {"__ansible_unsafe": value}
    read back as the value (a `!vault` one stays as printed); ValueError when it is not JSON."""
    return json.loads(text, object_hook=without_unsafe_mark)


def where(exc: YamlError) -> str:
    """`:line` for an error's message, where the YAML error has a line."""
    return f":{exc.line}" if exc.line else ""


def without_unsafe_mark(value: dict[str, object]) -> object:
    """One JSON object as it is decoded (those inside it are decoded first)."""
    return value[UNSAFE_KEY] if set(value) == {UNSAFE_KEY} else value


def is_ansible_json(document: InventoryJson) -> bool:
    """The shape `ansible-inventory --list` and inventory scripts print: `_meta.hostvars`,
    groups whose `hosts` and `children` are lists (or a group that is a list of hosts)."""
    return META in document or any(map(is_group_json, document.values()))


def is_group_json(body: object) -> bool:
    group = yamlread.as_mapping(body)
    return isinstance(body, list) or (group is not None and any(
        isinstance(group.get(key), list) for key in ("hosts", "children")))


def json_graph(document: InventoryJson, source: str) -> InventoryGraph:
    """The groups and vars of `ansible-inventory --list`'s JSON (or a script's)."""
    graph = InventoryGraph()
    for group, value in document.items():
        if group == META:
            continue
        # a list is a script's short form: the group's hosts
        body = {"hosts": value} if isinstance(value, list) else yamlread.as_mapping(value)
        if body is None:
            raise UsageError(f"{source}: group {group!r} must be a mapping (hosts, children, "
                             f"vars) or a list of hosts, not {type(value).__name__}")
        graph.add_group(group)
        for host in names_list(body.get("hosts"), f"{source}: hosts of group {group!r}"):
            if not HOST_NAME.match(host):
                raise UsageError(f"{source}: group {group!r}: {host!r} is not a host name")
            graph.add_host(host, group, {})
        for child in names_list(body.get("children"), f"{source}: children of {group!r}"):
            graph.add_child(group, child)
        graph.group_vars[group].update(mapping(body.get("vars"),
                                               f"{source}: vars of group {group!r}"))
    meta = mapping(document.get(META), f"{source}: {META}")
    for host, host_vars in mapping(meta.get("hostvars"), f"{source}: {META}.hostvars").items():
        if host in graph.host_vars:   # as Ansible: vars of a host no group names are unused
            graph.host_vars[host].update(mapping(host_vars, f"{source}: hostvars of {host!r}"))
    return graph


def names_list(value: object, what: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise UsageError(f"{what} must be a list of names, not {str(value)[:40]!r}")
    return [str(item) for item in value]


def mapping(value: object, what: str) -> Mapping[str, object]:
    found = {} if value is None else yamlread.as_mapping(value)
    if found is None:
        raise UsageError(f"{what} must be a mapping, not {type(value).__name__}")
    return found


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
        document = ansible_yaml(yamlread.read_text(path))
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise UsageError(f"cannot read {path}: not UTF-8 text") from None
    except YamlError as exc:
        raise UsageError(f"{path}{where(exc)}: not valid YAML ({exc.reason})") from None
    found = {} if document is None else yamlread.as_mapping(document)
    if found is None:
        raise UsageError(f"{path}: vars must be a mapping, not {type(document).__name__}")
    return dict(found)


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


def is_plugin_config(document: object) -> bool:
    """An inventory plugin's config (`plugin: amazon.aws.aws_ec2`), not an inventory."""
    config = yamlread.as_mapping(document)
    return config is not None and isinstance(config.get("plugin"), str)


def run_ansible_inventory(source: str, vault_args: Sequence[str] = ()) -> InventoryJson:
    """`ansible-inventory -i SOURCE --list`: its JSON, or one line saying why not.
    `vault_args`: the user's --vault-password-file/--vault-id, passed on as given."""
    program = shutil.which(ANSIBLE_INVENTORY)
    if program is None:
        raise UsageError(f"{source}: this inventory (a script, a plugin config or a folder) "
                         f"is read through {ANSIBLE_INVENTORY}, which is not on PATH "
                         "(pip install ansible-core)")
    # Unparsable sources are only a warning to Ansible (an empty inventory): made an error.
    env = {**os.environ, "ANSIBLE_INVENTORY_UNPARSED_FAILED": "true",
           "ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED": "true", "ANSIBLE_NOCOLOR": "1"}
    try:
        done = subprocess.run([program, "-i", source, "--list", *vault_args], capture_output=True,
                              text=True, env=env, timeout=ANSIBLE_INVENTORY_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise UsageError(f"{source}: {ANSIBLE_INVENTORY} gave no inventory within "
                         f"{ANSIBLE_INVENTORY_TIMEOUT_S} s") from None
    if done.returncode != 0:
        raise UsageError(f"{source}: {ANSIBLE_INVENTORY} failed (exit {done.returncode}): "
                         f"{ansible_error(done.stderr)}")
    try:
        document = yamlread.as_mapping(ansible_json(done.stdout))
    except ValueError:
        raise UsageError(f"{source}: {ANSIBLE_INVENTORY} printed no JSON") from None
    except RecursionError:
        raise UsageError(f"{source}: {ANSIBLE_INVENTORY} printed JSON "
                         f"{yamlread.NESTED_TOO_DEEPLY}") from None
    if document is None:
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
