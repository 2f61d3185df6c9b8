"""Hosts: `local`, `[user@]host[:port]`, or names and groups from an Ansible inventory.

The inventory is Ansible's as it is: YAML (`all: hosts: / children: / vars:`), INI
(inventory_ini.py), the JSON of `ansible-inventory --list`, with the `host_vars/` and
`group_vars/` folders beside it, or any other source through `ansible-inventory`
(inventory_ansible.py); vars merge by Ansible's precedence (inventory_graph.py). Ansible's own
connection vars are understood, so an existing inventory works unchanged. envsnap's own vars
(`python`, `repos`, `procs`, `hot_paths`, `accept_new_host_keys`) sit beside them.
"""
from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from envsnap.errors import UsageError, YamlError
from envsnap.hosts.inventory_graph import (
    ALL,
    HOST_NAME,
    UNGROUPED,
    InventoryGraph,
    Vars,
    expand_range,
    is_ip_address,
)
from envsnap.hosts.jump import inventory_jump
from envsnap.hosts.sshconfig import is_known_host, unknown_host_text
from envsnap.shape import is_mapping
from envsnap.text import did_you_mean

if TYPE_CHECKING:
    from envsnap.hosts.inventory_ansible import InventoryJson
    from envsnap.hosts.patterns import Pattern

LOCAL = "local"
HOST_SPEC = re.compile(r"^(?:(?P<user>[^@\s]+)@)?"
                       r"(?:\[(?P<v6>[0-9a-fA-F:.]+)\]|(?P<host>[^:@\s/\[\]]+))"
                       r"(?::(?P<port>\d{1,5}))?$")
__all__ = ["HOST_NAME", "expand_range", "is_ip_address"]   # here before inventory_graph.py


class Host:
    """One host to capture and how to reach it; frozen. Equal and hashed by how it is reached
    (a connection started early is found by its Host), never by its vars (a dict). A class of
    its own, not a dataclass: the handshake of `envsnap capture HOST` starts after this module
    loads, and dataclasses would load inspect, ast and dis before it (~5 ms)."""

    name: str                       # what the user called it; names its snapshot
    address: str                    # what SSH connects to; empty for local
    port: int | None                # None: ~/.ssh/config or 22
    user: str | None
    key_file: str | None
    vars: Vars                      # a fresh dict unless given

    def __init__(self, name: str, address: str = "", port: int | None = None,
                 user: str | None = None, key_file: str | None = None,
                 vars: Vars | None = None) -> None:
        self.__dict__.update(name=name, address=address, port=port, user=user,
                             key_file=key_file, vars={} if vars is None else vars)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"a Host is frozen: cannot assign to {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"a Host is frozen: cannot delete {name!r}")

    def identity(self) -> tuple[str, str, int | None, str | None, str | None]:
        """All that makes two Hosts the same host: everything but its vars."""
        return self.name, self.address, self.port, self.user, self.key_file

    def __eq__(self, other: object) -> bool:
        return self.identity() == other.identity() if isinstance(other, Host) \
            else NotImplemented

    def __hash__(self) -> int:
        return hash(self.identity())

    def __repr__(self) -> str:
        return (f"Host(name={self.name!r}, address={self.address!r}, port={self.port!r}, "
                f"user={self.user!r}, key_file={self.key_file!r}, vars={self.vars!r})")

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
# Vars that are true or false. YAML gives `"false"` (quoted) as a string, and a non-empty
# string is truthy in Python: each is read as a real boolean here, or refused.
BOOL_VARS = ("accept_new_host_keys",)
TRUE_WORDS = frozenset({"true", "yes", "on", "1"})
FALSE_WORDS = frozenset({"false", "no", "off", "0"})


def inventory_bool(value: object, what: str) -> bool:
    """A boolean var as YAML or Ansible users write it: true/false, "yes"/"no", "on"/"off",
    "1"/"0" (any case), 1/0. Anything else is a usage error, never a guess."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in TRUE_WORDS | FALSE_WORDS:
        return value.strip().lower() in TRUE_WORDS
    raise UsageError(f"{what} must be true or false (or yes/no, on/off, 1/0), not {value!r}")


def name_list(value: object, what: str) -> list[str]:
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


def check_proc_patterns(value: object, what: str) -> None:
    """Process patterns are regexes matched on the host: one that could backtrack
    catastrophically (`(a+)+$`) is refused here, before any host is contacted."""
    patterns = name_list(value, what)
    if not patterns:   # the checker (with json) loads only for patterns to check
        return
    from envsnap.agent.patterns import proc_pattern_problem

    for pattern in patterns:
        why = proc_pattern_problem(pattern)
        if why is not None:
            raise UsageError(f"{what}: pattern {pattern!r} refused: {why} "
                             "(see docs/guide/capture.md#patterns)")


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


class Inventory:
    """Hosts and groups of one inventory, with vars merged Ansible's way."""

    def __init__(self, document: object, source: str = "<inventory>",
                 folders: Path | None = None) -> None:
        """`document`: a YAML inventory as loaded, any YAML value until it is checked here
        (None: the command was given none); `folders`: where its host_vars/ and group_vars/
        are."""
        self.source = source
        self.given = document is not None    # False: the command was given no inventory
        self.hosts: dict[str, Vars] = {}
        self.groups: dict[str, set[str]] = {}
        self.ordered_groups: dict[str, list[str]] = {}   # in Ansible's order, for patterns
        if document is None:
            return
        self.adopt(yaml_graph(document, source), folders)

    @classmethod
    def of_graph(cls, graph: InventoryGraph, source: str, folders: Path | None) -> Inventory:
        """An inventory read into a graph; `folders`: where host_vars/ and group_vars/ are."""
        inventory = cls({}, source)
        inventory.adopt(graph, folders)
        return inventory

    def adopt(self, graph: InventoryGraph, folders: Path | None = None) -> None:
        from envsnap.hosts import inventory_ansible

        try:
            graph.reconcile()
            groups = inventory_ansible.folder_vars(folders, list(graph.group_hosts),
                                                   "group_vars")
            hosts = inventory_ansible.folder_vars(folders, list(graph.host_vars), "host_vars")
            self.hosts = graph.merged_vars(groups, hosts)
            self.groups = graph.members()
            self.ordered_groups = graph.ordered_members()
        except UsageError as exc:
            raise UsageError(f"{self.source}: {exc}") from None
        except RecursionError:   # children of children, a thousand deep
            raise UsageError(f"{self.source}: groups nested too deeply") from None

    def names(self, pattern: str) -> list[str]:
        if pattern in self.hosts:
            return [pattern]
        return sorted(self.groups.get(pattern, set()))

    def not_found_text(self) -> str:
        """"not in inventory hosts.yml (groups: gpu, all)", or where to give one."""
        if not self.given:
            return "not in the inventory (none given; see --inventory)"
        # the groups the inventory names, then `all`; the implicit `ungrouped` is left out
        named = [group for group in self.groups if group not in (ALL, UNGROUPED)]
        groups = f" (groups: {', '.join([*named, ALL])})" if self.hosts or named else \
            " (it has no hosts)"
        return f"not in inventory {self.source}{groups}"

    def host(self, name: str) -> Host:
        host_vars = self.hosts[name]
        for listed in LIST_VARS:   # refused here, before any host is contacted
            name_list(host_vars.get(listed), f"{self.source}: host {name!r}: {listed}")
        check_proc_patterns(host_vars.get("procs"), f"{self.source}: host {name!r}: procs")
        host_vars = {**host_vars, **{flag: inventory_bool(host_vars[flag],
                                                          f"{self.source}: host {name!r}: {flag}")
                                     for flag in BOOL_VARS if host_vars.get(flag) is not None}}
        inventory_jump(host_vars, f"{self.source}: host {name!r}")   # its bastion, refused here too
        if host_vars.get("ansible_connection") == "local":
            return Host(name=name, vars=host_vars)
        address = str(host_vars.get("ansible_host") or name)
        if not (HOST_NAME.match(address) or is_ip_address(address)):
            raise UsageError(f"{self.source}: host {name!r}: ansible_host {address!r} is not "
                             "a host name or address")
        return Host(name=name, address=address, port=self._port(name, host_vars),
                    user=optional_text(host_vars.get("ansible_user")),
                    key_file=optional_text(host_vars.get("ansible_ssh_private_key_file")),
                    vars=host_vars)

    def _port(self, name: str, host_vars: Vars) -> int | None:
        port = host_vars.get("ansible_port")
        if port is None or port == "":
            return None
        digits = str(port)
        if isinstance(port, bool) or not digits.isdigit() or not 0 < int(digits) < 65536:
            raise UsageError(f"{self.source}: host {name!r}: ansible_port {port!r} is not a "
                             "port number (1-65535)")
        return int(digits)


def yaml_graph(document: object, source: str) -> InventoryGraph:
    """The groups, hosts and vars of a YAML inventory as loaded (any YAML value until it is
    checked here), as Ansible's yaml plugin reads them."""
    from envsnap import yamlread

    groups = yamlread.as_mapping(document)
    if groups is None:
        raise UsageError(f"{source}: an inventory is a mapping of groups (like all:)")
    refuse_names_ansible_refuses(document, "group name", source)
    graph = InventoryGraph()
    try:
        for group, body in groups.items():
            walk_group(graph, group, body, None, source)
    except RecursionError:   # children of children, a thousand deep
        raise UsageError(f"{source}: groups nested too deeply") from None
    return graph


def refuse_names_ansible_refuses(raw: object, what: str, source: str) -> None:
    """YAML gives `1234:` as a number and `yes:` as a boolean; Ansible refuses such a host
    or group name (it must be quoted), so envsnap does: a name is never guessed from it."""
    for name in raw if is_mapping(raw) else ():
        if not isinstance(name, str):
            raise UsageError(f"{source}: {what} {name!r} must be a string; quote it, as "
                             "Ansible asks (\"Enclose integers/floats in quotation marks\")")


def walk_group(graph: InventoryGraph, group: str, value: object, parent: str | None,
               source: str) -> None:
    body = yaml_mapping(value, f"group {group!r}", source)
    refuse_names_ansible_refuses(body.get("hosts"), f"group {group!r}: host", source)
    refuse_names_ansible_refuses(body.get("children"), "group name", source)
    graph.add_group(group)
    if parent is not None:
        graph.add_child(parent, group)
    graph.group_vars[group].update(yaml_mapping(body.get("vars"), f"vars of group {group!r}",
                                                source))
    for pattern, own in yaml_mapping(body.get("hosts"), f"hosts of group {group!r}",
                                     source).items():
        host_vars = yaml_mapping(own, f"host {pattern!r}", source)
        try:
            names = expand_range(pattern)
        except UsageError as exc:
            raise UsageError(f"{source}: group {group!r}: {exc}") from None
        for name in names:
            graph.add_host(name, group, host_vars)
    for child, child_body in yaml_mapping(body.get("children"),
                                          f"children of group {group!r}", source).items():
        walk_group(graph, child, child_body, group, source)


def yaml_mapping(value: object, what: str, source: str) -> Mapping[str, object]:
    """An optional mapping of the inventory (None or empty is {}), else one clear line."""
    from envsnap import yamlread

    found = {} if value is None else yamlread.as_mapping(value)
    if found is None:
        raise UsageError(f"{source}: {what} must be a mapping, not "
                         f"{type(value).__name__} {str(value)[:40]!r}")
    return found


def optional_text(value: object) -> str | None:
    """A var that names something (a user, a key file): YAML may give `ansible_user: 1000`
    as a number, which names it all the same."""
    return None if value is None else str(value)


VAULT_HEADER = b"$ANSIBLE_VAULT;"
MAX_INVENTORY_BYTES = 64 << 20    # an inventory of thousands of hosts is a few MB
# What makes ansible-inventory decrypt a vault without a flag, as it does for `ansible`.
VAULT_ENV = ("ANSIBLE_VAULT_PASSWORD_FILE", "ANSIBLE_VAULT_IDENTITY_LIST")
YAML_SUFFIXES = ("", ".yaml", ".yml", ".json")   # Ansible's yaml plugin's default extensions


def load_inventory(path: str | None, vault_args: Sequence[str] = ()) -> Inventory:
    """An inventory in any of Ansible's forms. A folder, a program, a plugin's config or a
    file encrypted whole with ansible-vault is read by ansible-inventory itself
    (`vault_args`: the user's --vault-password-file/--vault-id, passed on). The JSON of
    `ansible-inventory --list` is taken as printed. Any other file goes through Ansible's
    file plugins in Ansible's order, the first that reads it winning: yaml (names ending in
    .yaml/.yml/.json or no suffix), ini (any name), toml (names ending in .toml)."""
    if not path:
        return Inventory(None)
    # on use, as the other readers' here: `capture local` alone reads no inventory, and the
    # YAML, TOML and Ansible readers cost it ~25 ms before its agent starts (headstart.py)
    from envsnap.hosts import inventory_ansible

    source = Path(path)
    try:
        head = b"" if source.is_dir() else read_at_most(source, MAX_INVENTORY_BYTES)
    except OSError as exc:
        raise UsageError(f"cannot read inventory {path}: {exc.strerror}") from None
    if len(head) > MAX_INVENTORY_BYTES:
        raise UsageError(f"cannot read inventory {path}: over {MAX_INVENTORY_BYTES >> 20} MiB"
                         ": not an inventory")
    if inventory_ansible.needs_ansible(source, head[:2048]):
        return through_ansible(path, vault_args)
    if head.lstrip().startswith(VAULT_HEADER):
        return vaulted(path, vault_args)
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"cannot read inventory {path}: not UTF-8 text") from None
    found = load_json(text) if text.lstrip().startswith("{") else None
    if found is not None and inventory_ansible.is_ansible_json(found):
        # ansible-inventory has applied the host_vars/ and group_vars/ it found already
        return Inventory.of_graph(inventory_ansible.json_graph(found, path), path, None)
    return through_file_plugins(source, text, vault_args)


def read_at_most(source: Path, limit: int) -> bytes:
    """`limit + 1` bytes at most: a file (or a device, `/dev/zero`) cannot fill the memory."""
    with source.open("rb") as handle:
        return handle.read(limit + 1)


def through_file_plugins(source: Path, text: str, vault_args: Sequence[str]) -> Inventory:
    """As Ansible tries its file plugins: each that accepts the name parses, the first that
    succeeds wins. When none does: the one plugin's own error, or one line with each one's."""
    # the INI reader too (with ast): a host named alone reads none before its handshake
    from envsnap import yamlread
    from envsnap.hosts import inventory_ansible, inventory_ini, inventory_toml

    path, folders = str(source), source.parent
    failures: list[tuple[str, UsageError]] = []
    if source.suffix in YAML_SUFFIXES:
        try:
            document = load_yaml(text, path)
            if inventory_ansible.is_plugin_config(document):
                return through_ansible(path, vault_args)
            if yamlread.as_mapping(document) is not None:
                return Inventory.of_graph(yaml_graph(document, path), path, folders)
        except UsageError as exc:
            failures.append(("YAML", exc))
    readers = [("INI", inventory_ini.parse_ini)]
    if source.suffix == inventory_toml.SUFFIX:
        readers.append(("TOML", inventory_toml.parse_toml))
    for form, read in readers:
        try:
            graph = read(text, path)
        except UsageError as exc:
            failures.append((form, exc))
            continue
        return Inventory.of_graph(graph, path, folders)
    if len(failures) == 1:
        raise failures[0][1]
    reasons = "; ".join(f"as {form}: {without_source(exc, path)}" for form, exc in failures)
    raise UsageError(f"{path}: not an inventory Ansible reads ({reasons})")


def without_source(exc: UsageError, path: str) -> str:
    """A reader's error without the `PATH:` it starts with (the line says it once), its
    `PATH:LINE:` as `line LINE:`."""
    said = str(exc).removeprefix(path)
    line, colon, rest = said.removeprefix(":").partition(":")
    if said.startswith(":") and colon and line.isdigit():
        return f"line {line}:{rest}"
    return said.removeprefix(": ")


def vaulted(path: str, vault_args: Sequence[str]) -> Inventory:
    """A file encrypted whole: only Ansible, with the user's vault secret, can read it."""
    if vault_args or any(os.environ.get(name) for name in VAULT_ENV):
        return through_ansible(path, vault_args)
    raise UsageError(f"{path}: the inventory is encrypted with ansible-vault; give "
                     "--vault-password-file FILE or --vault-id ID as to ansible (or set "
                     "ANSIBLE_VAULT_PASSWORD_FILE)")


def through_ansible(path: str, vault_args: Sequence[str] = ()) -> Inventory:
    """A source Ansible reads: its view as `ansible-inventory --list` prints it, with the
    host_vars/ and group_vars/ beside the source already applied by Ansible."""
    from envsnap.hosts import inventory_ansible

    document = inventory_ansible.run_ansible_inventory(path, vault_args)
    return Inventory.of_graph(inventory_ansible.json_graph(document, path), path, None)


def load_json(text: str) -> InventoryJson | None:
    """A JSON mapping, as Ansible reads one (a YAML flow mapping that is not JSON is None
    here, and read as YAML)."""
    from envsnap import yamlread
    from envsnap.hosts import inventory_ansible

    try:
        return yamlread.as_mapping(inventory_ansible.ansible_json(text))
    except (ValueError, RecursionError):
        return None


def load_yaml(text: str, path: str) -> object:
    from envsnap.hosts import inventory_ansible

    try:
        return inventory_ansible.ansible_yaml(text)
    except YamlError as exc:
        raise UsageError(f"{path}{inventory_ansible.where(exc)}: not valid YAML "
                         f"({exc.reason})") from None


def resolve_hosts(patterns: list[str], inventory: Inventory,
                  overrides: Vars | None = None) -> list[Host]:
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


def limit_hosts(hosts: list[Host], inventory: Inventory,
                limit: str) -> tuple[list[Host], list[Pattern]]:
    """The hosts a --limit keeps, in their order, and its patterns that matched no host.
    Patterns see the inventory as Ansible does, and hosts named on the command line that it
    does not hold as `ungrouped` ones."""
    from envsnap.hosts import patterns

    extra = [host.name for host in hosts if host.name not in inventory.hosts]
    groups = {**inventory.ordered_groups}
    groups[ALL] = [*groups.get(ALL, []), *extra]
    selection = patterns.select(patterns.limit_patterns(limit),
                                patterns.Hosts([*inventory.hosts, *extra], groups))
    kept = set(selection.hosts)
    return [host for host in hosts if host.name in kept], selection.unmatched


def no_host_left(limit: str, unmatched: list[Pattern]) -> UsageError:
    """As Ansible: a limit that leaves no host to act on is an error. A typed pattern is
    named as typed; those of an @FILE by counts and a line (patterns.unmatched_said)."""
    from envsnap.hosts.patterns import unmatched_said

    said = ", ".join(unmatched_said(unmatched, quoted=False))
    matched = f" (no host matches {said})" if unmatched else ""
    return UsageError(f"--limit {limit!r} leaves no host to act on{matched}")


def ad_hoc_host(pattern: str, inventory: Inventory) -> Host:
    """A host the inventory does not name: `local`, or a spec SSH can find. A name that is
    neither is most likely a typo, said as such before any connection is tried, with each
    place it was looked for: the inventory, the SSH config files, the resolver."""
    host = parse_host_spec(pattern)
    if host.is_local or is_known_host(host.address):
        return host
    known = [*inventory.hosts, *(group for group in inventory.groups if group != UNGROUPED)]
    raise UsageError(f"{pattern}: {inventory.not_found_text()}, "
                     f"{unknown_host_text(host.address)}{did_you_mean(pattern, known)}")


def inventory_of(host: Host) -> Inventory:
    """An inventory of this one host, as it is (address, port, user, key, vars): for code
    that holds a Host and hands it to the playbook engine, which finds hosts by name."""
    if host.is_local:
        how: Vars = {"ansible_connection": "local"}
    else:
        how = {"ansible_host": host.address, "ansible_port": host.port,
               "ansible_user": host.user, "ansible_ssh_private_key_file": host.key_file}
    host_vars = {**host.vars, **{key: value for key, value in how.items() if value is not None}}
    # Built as a graph, not read as an inventory file: the name is the target as the user
    # gave it and as the snapshot records it (`root@gpu-box`), parsed already, which the
    # name rule of an inventory file would refuse.
    graph = InventoryGraph()
    graph.add_host(host.name, ALL, host_vars)
    return Inventory.of_graph(graph, f"<{host.name}>", None)


def with_vars(host: Host, overrides: Vars) -> Host:
    set_overrides = {key: value for key, value in overrides.items() if value not in (None, [], ())}
    check_proc_patterns(set_overrides.get("procs"), "--proc/procs")
    return Host(name=host.name, address=host.address, port=host.port, user=host.user,
                key_file=host.key_file, vars={**host.vars, **set_overrides})
