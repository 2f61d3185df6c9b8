"""Hosts: `local`, `[user@]host[:port]`, or names and groups from an Ansible-style inventory.

The inventory is Ansible's YAML format as it is (`all: hosts: / children: / vars:`), with
Ansible's own connection vars understood, so an existing inventory works unchanged. envsnap's
own vars (`python`, `repos`, `procs`, `hot_paths`, `accept_new_host_keys`) sit beside them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from envsnap.errors import UsageError

LOCAL = "local"
HOST_SPEC = re.compile(r"^(?:(?P<user>[^@\s]+)@)?"
                       r"(?:\[(?P<v6>[0-9a-fA-F:.]+)\]|(?P<host>[^:@\s/\[\]]+))"
                       r"(?::(?P<port>\d{1,5}))?$")
HOST_RANGE = re.compile(r"\[(\d+):(\d+)\]")
HOST_NAME = re.compile(r"^[^:@\s/\[\]]+$")   # what HOST_SPEC's host part accepts
MAX_RANGE_HOSTS = 10_000                      # one typo (node[1:99999999]) must not eat memory


@dataclass(frozen=True)
class Host:
    """One host to capture and how to reach it."""

    name: str                       # what the user called it; names its snapshot
    address: str = ""               # what SSH connects to; empty for local
    port: int | None = None      # None: ~/.ssh/config or 22
    user: str | None = None
    key_file: str | None = None
    vars: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def is_local(self) -> bool:
        return not self.address

    @property
    def python(self) -> str:
        return str(self.vars.get("python") or self.vars.get("ansible_python_interpreter")
                   or "python3")

    def list_var(self, name: str) -> list[str]:
        return name_list(self.vars.get(name), f"{self.name}: {name}")


LIST_VARS = ("repos", "procs", "hot_paths")


def name_list(value: Any, what: str) -> list[str]:
    """A host var that is one string or a list of them (paths, patterns). It comes from an
    inventory or a playbook task's args, so any YAML value can arrive here."""
    if not value:
        return []
    if isinstance(value, str):
        return [value]
    if not isinstance(value, (list, tuple)) or \
            not all(isinstance(item, (str, int, float)) for item in value):
        raise UsageError(f"{what} must be a string or a list of strings, not {value!r}")
    return [str(item) for item in value]


def parse_host_spec(spec: str) -> Host:
    """`local`, `host`, `user@host`, `host:2222`, `user@[::1]:2222` -> Host."""
    if spec == LOCAL:
        return Host(name=LOCAL)
    match = HOST_SPEC.match(spec)
    if not match:
        raise UsageError(f"not a host: {spec!r} (expected [user@]host[:port], an inventory "
                         "name, or 'local')")
    port = int(match["port"]) if match["port"] else None
    if port is not None and not 0 < port < 65536:
        raise UsageError(f"port out of range in {spec!r}")
    address = match["v6"] or match["host"]
    return Host(name=spec, address=address, port=port, user=match["user"])


def expand_range(name: str) -> list[str]:
    """Ansible's `node[01:32]` host ranges, leading zeros kept."""
    match = HOST_RANGE.search(name)
    if not match:
        if not HOST_NAME.match(name):
            raise UsageError(f"{name!r} is not a host name, nor a range like node[01:32]")
        return [name]
    first, last = match.group(1), match.group(2)
    if int(last) - int(first) >= MAX_RANGE_HOSTS:
        raise UsageError(f"{name!r}: a range of more than {MAX_RANGE_HOSTS} hosts")
    width = len(first) if first.startswith("0") else 0
    names = []
    for number in range(int(first), int(last) + 1):
        names += expand_range(name[:match.start()] + str(number).zfill(width) + name[match.end():])
    return names


class Inventory:
    """Hosts and groups of one inventory file, with vars merged Ansible's way."""

    def __init__(self, document: Any, source: str = "<inventory>") -> None:
        self.source = source
        self.given = document is not None    # False: the command was given no inventory
        self.hosts: dict[str, dict[str, Any]] = {}
        self.groups: dict[str, set[str]] = {}
        if document is None:
            return
        if not isinstance(document, dict):
            raise UsageError(f"{source}: an inventory is a mapping of groups (like all:)")
        for group, body in document.items():
            self._walk(str(group), body, {})

    def _walk(self, group: str, body: Any, inherited: dict[str, Any]) -> set[str]:
        body = self._mapping(body, f"group {group!r}")
        merged = {**inherited, **self._mapping(body.get("vars"), f"vars of group {group!r}")}
        members: set[str] = set()
        for pattern, host_vars in self._mapping(body.get("hosts"),
                                                f"hosts of group {group!r}").items():
            host_vars = self._mapping(host_vars, f"host {pattern!r}")
            try:
                names = expand_range(str(pattern))
            except UsageError as exc:
                raise UsageError(f"{self.source}: group {group!r}: {exc}") from None
            for name in names:
                # A host seen in several groups keeps what each added; deeper groups win.
                self.hosts[name] = {**self.hosts.get(name, {}), **merged, **host_vars}
                members.add(name)
        for child, child_body in self._mapping(body.get("children"),
                                               f"children of group {group!r}").items():
            members |= self._walk(str(child), child_body, merged)
        self.groups[group] = self.groups.get(group, set()) | members
        return members

    def _mapping(self, value: Any, what: str) -> dict[str, Any]:
        """An optional mapping of the inventory (None or empty is {}), else one clear line."""
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise UsageError(f"{self.source}: {what} must be a mapping, not "
                             f"{type(value).__name__} {str(value)[:40]!r}")
        return value

    def names(self, pattern: str) -> list[str]:
        if pattern in self.hosts:
            return [pattern]
        return sorted(self.groups.get(pattern, set()))

    def not_found_text(self) -> str:
        """"not in inventory hosts.yml (groups: gpu, all) and ", or "" without one."""
        if not self.given:
            return ""
        groups = f" (groups: {', '.join(self.groups)})" if self.groups else ""
        return f"not in inventory {self.source}{groups} and "

    def host(self, name: str) -> Host:
        host_vars = self.hosts[name]
        for listed in LIST_VARS:   # refused here, before any host is contacted
            name_list(host_vars.get(listed), f"{self.source}: host {name!r}: {listed}")
        if host_vars.get("ansible_connection") == "local":
            return Host(name=name, vars=host_vars)
        address = str(host_vars.get("ansible_host") or name)
        if not (HOST_NAME.match(address) or is_ip_address(address)):
            raise UsageError(f"{self.source}: host {name!r}: ansible_host {address!r} is not "
                             "a host name or address")
        return Host(name=name, address=address, port=self._port(name, host_vars),
                    user=host_vars.get("ansible_user"),
                    key_file=host_vars.get("ansible_ssh_private_key_file"), vars=host_vars)

    def _port(self, name: str, host_vars: dict[str, Any]) -> int | None:
        port = host_vars.get("ansible_port")
        if port is None or port == "":
            return None
        if isinstance(port, bool) or not str(port).isdigit() or not 0 < int(port) < 65536:
            raise UsageError(f"{self.source}: host {name!r}: ansible_port {port!r} is not a "
                             "port number (1-65535)")
        return int(port)


def is_ip_address(text: str) -> bool:
    """An IPv4 or IPv6 address (`::1` has colons a host name may not have)."""
    import ipaddress

    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def load_inventory(path: str | None) -> Inventory:
    if not path:
        return Inventory(None)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read inventory {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise UsageError(f"cannot read inventory {path}: not UTF-8 text") from None
    try:
        return Inventory(yaml.safe_load(text), source=path)
    except RecursionError:   # `[[[[...]]]]` a few thousand deep
        raise UsageError(f"{path}: not valid YAML (nested too deeply)") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark else ""
        reason = getattr(exc, "problem", exc)
        raise UsageError(f"{path}{where}: not valid YAML ({reason})") from None


def resolve_hosts(patterns: list[str], inventory: Inventory,
                  overrides: dict[str, Any] | None = None) -> list[Host]:
    """Each pattern names an inventory host or group, `local`, or an ad-hoc host spec.

    `overrides` (from the command line) win over inventory vars, as Ansible's -e does.
    """
    hosts: dict[str, Host] = {}
    for pattern in patterns:
        names = inventory.names(pattern)
        found = [inventory.host(name) for name in names] or [ad_hoc_host(pattern, inventory)]
        for host in found:
            hosts.setdefault(host.name, with_vars(host, overrides or {}))
    if not hosts:
        raise UsageError("no hosts given")
    return list(hosts.values())


def ad_hoc_host(pattern: str, inventory: Inventory) -> Host:
    """A host the inventory does not name: `local`, or a spec SSH can find. A name that is
    neither is most likely a typo, said as such before any connection is tried."""
    # Imported here: transport imports this module (and paramiko, which `local` never needs).
    from envsnap.hosts.transport import is_known_host

    host = parse_host_spec(pattern)
    if host.is_local or is_known_host(host.address):
        return host
    raise UsageError(f"{pattern}: {inventory.not_found_text()}not a known host")


def inventory_of(host: Host) -> Inventory:
    """An inventory of this one host, as it is (address, port, user, key, vars): for code
    that holds a Host and hands it to the playbook engine, which finds hosts by name."""
    if host.is_local:
        how: dict[str, Any] = {"ansible_connection": "local"}
    else:
        how = {"ansible_host": host.address, "ansible_port": host.port,
               "ansible_user": host.user, "ansible_ssh_private_key_file": host.key_file}
    host_vars = {**host.vars, **{key: value for key, value in how.items() if value is not None}}
    return Inventory({"all": {"hosts": {host.name: host_vars}}}, source=f"<{host.name}>")


def with_vars(host: Host, overrides: dict[str, Any]) -> Host:
    set_overrides = {key: value for key, value in overrides.items() if value not in (None, [], ())}
    return Host(name=host.name, address=host.address, port=host.port, user=host.user,
                key_file=host.key_file, vars={**host.vars, **set_overrides})
