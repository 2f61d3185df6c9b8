"""An inventory as Ansible holds one before it merges vars: groups with their own hosts,
children and vars, and each host's own vars. Every format (YAML, INI, the JSON of
`ansible-inventory --list`) is read into this, and vars are merged from it by Ansible's
precedence, so a host gets the same vars whichever way its inventory is written.
"""
from __future__ import annotations

import re
from collections.abc import Mapping

from envsnap.errors import UsageError

ALL, UNGROUPED = "all", "ungrouped"   # Ansible's implicit groups
HOST_NAME = re.compile(r"^[^:@\s/\[\]]+$")   # what a host spec's host part accepts
# Ansible's ranges: node[01:32], node[1:32:2] (a stride), rack[a:f]; numbers or letters
HOST_RANGE = re.compile(r"\[(?:(?P<first>[0-9]*):(?P<last>[0-9]+)|"
                        r"(?P<alpha_first>[a-zA-Z]):(?P<alpha_last>[a-zA-Z]))(?::(?P<step>[0-9]+))?\]")
MAX_RANGE_HOSTS = 10_000                      # one typo (node[1:99999999]) must not eat memory
PRIORITY_VAR = "ansible_group_priority"       # Ansible's tie-break between groups of one depth

# A host's or a group's vars as the inventory writes them: names to any YAML value, Ansible's
# own, envsnap's and the user's (templates see them all). Open by nature, so not a record,
# and each value an `object`: each var envsnap uses is read by its own reader (Host,
# inventory_bool, name_list, inventory_jump), which says in one line what a wrong value
# should be.
Vars = dict[str, object]


def range_items(name: str, match: re.Match[str]) -> list[str]:
    """The values one `[a:b(:step)]` of `name` stands for, as Ansible expands them."""
    step = int(match["step"] or 1)
    if step == 0:
        raise UsageError(f"{name!r}: a range's step must not be 0")
    if match["alpha_first"]:
        import string  # on use: its Template compiles a pattern at import (~0.5 ms)

        letters = string.ascii_letters
        start, end = letters.index(match["alpha_first"]), letters.index(match["alpha_last"])
        items = list(letters[start:end + 1:step])
    else:
        first, last = match["first"] or "0", match["last"]
        numbers = range(int(first), int(last) + 1, step)
        if len(numbers) > MAX_RANGE_HOSTS:
            raise UsageError(f"{name!r}: a range of more than {MAX_RANGE_HOSTS} hosts")
        width = len(first) if first.startswith("0") else 0   # node[01:32] keeps its zeros
        items = [str(number).zfill(width) for number in numbers]
    if not items:
        raise UsageError(f"{name!r}: an empty range (its start is past its end)")
    return items


def expand_range(name: str) -> list[str]:
    """Ansible's `node[01:32]` host ranges (leading zeros kept), `[a:f]` and strides."""
    names = [name]
    while HOST_RANGE.search(names[0]) is not None:
        expanded = []
        for partial in names:
            found = HOST_RANGE.search(partial)
            assert found is not None   # every name of this round has the same ranges left
            expanded += [partial[:found.start()] + item + partial[found.end():]
                         for item in range_items(name, found)]
            if len(expanded) > MAX_RANGE_HOSTS:
                raise UsageError(f"{name!r}: a range of more than {MAX_RANGE_HOSTS} hosts")
        names = expanded
    for each in names:
        if not HOST_NAME.match(each):
            raise UsageError(f"{name!r} is not a host name, nor a range like node[01:32]")
    return names


def is_ip_address(text: str) -> bool:
    """An IPv4 or IPv6 address (`::1` has colons a host name may not have)."""
    import ipaddress

    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


class InventoryGraph:
    """Groups, their direct hosts and children, and vars as each place of the inventory gives
    them; nothing merged. Insertion order is the order the inventory names them. (A plain
    class: no dataclasses on the way to a capture's first handshake, see Host.)"""

    def __init__(self) -> None:
        self.group_hosts: dict[str, list[str]] = {}
        self.group_children: dict[str, list[str]] = {}
        self.group_vars: dict[str, Vars] = {}
        self.host_vars: dict[str, Vars] = {}

    def add_group(self, group: str) -> None:
        self.group_hosts.setdefault(group, [])
        self.group_children.setdefault(group, [])
        self.group_vars.setdefault(group, {})

    def add_host(self, host: str, group: str, host_vars: Mapping[str, object]) -> None:
        """A host in a group; a host named again keeps its vars, the later ones winning."""
        self.add_group(group)
        if host not in self.group_hosts[group]:
            self.group_hosts[group].append(host)
        self.host_vars.setdefault(host, {}).update(host_vars)

    def add_child(self, parent: str, child: str) -> None:
        self.add_group(parent)
        self.add_group(child)
        if child not in self.group_children[parent]:
            self.group_children[parent].append(child)

    def reconcile(self) -> None:
        """Ansible's implicit structure: every top group is a child of `all`, and a host in
        no group but `all` is in `ungrouped` (and only such a host)."""
        self.add_group(ALL)
        self.add_group(UNGROUPED)
        parented = {child for children in self.group_children.values() for child in children}
        for group in list(self.group_hosts):
            if group != ALL and group not in parented:
                self.add_child(ALL, group)
        grouped = {host for group, hosts in self.group_hosts.items()
                   if group not in (ALL, UNGROUPED) for host in hosts}
        self.group_hosts[UNGROUPED] = [host for host in self.host_vars if host not in grouped]

    def depths(self) -> dict[str, int]:
        """Each group's depth below `all` (its longest path): deeper groups' vars win."""
        parents: dict[str, list[str]] = {group: [] for group in self.group_hosts}
        for parent, children in self.group_children.items():
            for child in children:
                parents[child].append(parent)
        found: dict[str, int] = {}

        def depth(group: str, path: tuple[str, ...]) -> int:
            if group in path:
                raise UsageError(f"group {group!r} is its own ancestor "
                                 f"({' -> '.join((*path[path.index(group):], group))})")
            if group not in found:
                found[group] = max((depth(parent, (*path, group)) + 1
                                    for parent in parents[group]), default=0)
            return found[group]

        for group in self.group_hosts:
            depth(group, ())
        return found

    def members(self) -> dict[str, set[str]]:
        """Each group's hosts, its children's included."""
        found: dict[str, set[str]] = {}

        def hosts_of(group: str) -> set[str]:
            if group not in found:
                found[group] = set(self.group_hosts[group])   # set first: a cycle stops
                for child in self.group_children[group]:
                    found[group] |= hosts_of(child)
            return found[group]

        for group in self.group_hosts:
            hosts_of(group)
        return found

    def ordered_members(self) -> dict[str, list[str]]:
        """Each group's hosts in Ansible's order: its own, then its children's level by level
        (`all` takes `ungrouped` first, as Ansible's `all` does); each host once."""
        found: dict[str, list[str]] = {}
        for group in self.group_hosts:
            children = self.group_children[group]
            if group == ALL and UNGROUPED in children:
                children = [UNGROUPED, *(c for c in children if c != UNGROUPED)]
            walked, level, seen = [group], list(children), {group}
            while level:
                level = [g for g in dict.fromkeys(level) if g not in seen]
                seen.update(level)
                walked += level
                level = [child for g in level for child in self.group_children[g]]
            found[group] = list(dict.fromkeys(host for g in walked for host in self.group_hosts[g]))
        return found

    def merged_vars(self, folder_groups: dict[str, Vars],
                    folder_hosts: dict[str, Vars]) -> dict[str, Vars]:
        """Each host's vars by Ansible's precedence, lowest first: the inventory's group vars
        (`all`, then groups by depth, priority, name), group_vars/ files in that order, the
        inventory's host vars, host_vars/ files."""
        depths, members = self.depths(), self.members()
        order = sorted(self.group_hosts, key=lambda group: (
            depths[group], self.priority(group), group))
        merged = {}
        for host, own in self.host_vars.items():
            groups = [group for group in order if host in members[group]]
            host_vars: Vars = {}
            for group in groups:
                host_vars.update(self.group_vars[group])
            for group in groups:
                host_vars.update(folder_groups.get(group, {}))
            merged[host] = {**host_vars, **own, **folder_hosts.get(host, {})}
        return merged

    def priority(self, group: str) -> int:
        value = self.group_vars[group].get(PRIORITY_VAR, 1)
        if isinstance(value, bool) or not str(value).lstrip("-").isdigit():
            raise UsageError(f"group {group!r}: {PRIORITY_VAR} must be a whole number, "
                             f"not {value!r}")
        return int(str(value))
