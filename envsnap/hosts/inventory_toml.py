"""Ansible's TOML inventory, read as Ansible's own `toml` inventory plugin reads it.

    [all.vars]
    site = "eu"
    [gpu]
    children = ["rack1"]              # names of child groups
    vars = { python = "/opt/ml/bin/python3" }
    [gpu.hosts]
    "node[01:04]" = { ansible_user = "ml" }    # a name or range, then its vars
    "login:2222" = {}                          # host:port sets ansible_port

Every top-level table is a group; a group's keys are `vars`, `children` and `hosts`. As in
Ansible, a top-level value that is not a table, and any other key of a group, is skipped (it
warns); a `vars` or `hosts` that is not a table, or `children` that is not a list, is refused.
Ansible reads a file as TOML only when its name ends in `.toml`.
"""
from __future__ import annotations

from collections.abc import Mapping

import tomllib

from envsnap.errors import UsageError
from envsnap.hosts.inventory_graph import InventoryGraph, Vars, expand_range, is_ip_address
from envsnap.hosts.inventory_ini import host_and_port
from envsnap.shape import is_object
from envsnap.yamlread import NESTED_TOO_DEEPLY

SUFFIX = ".toml"


def parse_toml(text: str, source: str) -> InventoryGraph:
    """The groups, hosts and vars of a TOML inventory; a bad part is one error naming it."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{source}: not valid TOML ({exc})") from None
    except RecursionError:   # `x = [[[[...]]]]` some hundreds deep: tomllib recurses
        raise UsageError(f"{source}: not valid TOML ({NESTED_TOO_DEEPLY})") from None
    if not document:
        raise UsageError(f"{source}: an empty TOML file is no inventory")
    if "plugin" in document:
        raise UsageError(f"{source}: a plugin's config in TOML, which Ansible does not read "
                         "(write it as YAML)")
    graph = InventoryGraph()
    for group, body in document.items():
        if is_object(body):
            read_group(graph, group, body, source)
    return graph


def read_group(graph: InventoryGraph, group: str, body: Mapping[str, object],
               source: str) -> None:
    graph.add_group(group)
    where = f"{source}: group {group!r}"
    if "vars" in body:
        graph.group_vars[group].update(table(body["vars"], f"{where}: vars"))
    children = body.get("children", [])
    if not isinstance(children, list) or not all(isinstance(c, str) for c in children):
        raise UsageError(f"{where}: children must be a list of group names, not {children!r}")
    for child in children:
        graph.add_child(group, child)
    for pattern, own in table(body.get("hosts", {}), f"{where}: hosts").items():
        host_vars = dict(table(own, f"{where}: host {pattern!r}"))
        try:
            name, port = host_and_port(pattern)
            names = [name] if is_ip_address(name) else expand_range(name)
        except UsageError as exc:
            raise UsageError(f"{where}: {exc}") from None
        if port is not None:
            host_vars = {"ansible_port": port, **host_vars}
        for host in names:
            graph.add_host(host, group, host_vars)


def table(value: object, what: str) -> Vars:
    if not is_object(value):
        raise UsageError(f"{what} must be a table, not {type(value).__name__} {value!r:.40}")
    return dict(value)
