"""Ansible's INI inventory, read as Ansible's own `ini` inventory plugin reads it.

    host0 ansible_host=10.0.0.5     # before any section: the group `ungrouped`
    [gpu]
    node[01:04] ansible_user=ml     # host lines: a name or range, then key=value vars
    login:2222                      # host:port sets ansible_port
    [gpu:vars]
    python=/opt/ml/bin/python3      # one key=value a line, everything after `=` the value
    [cluster:children]
    gpu                             # groups named here must have a section of their own

Values are typed as Ansible types them: a Python literal (`22`, `True`, `[1, 2]`, `'quoted'`)
is that value, anything else (`true`, `yes`, `/usr/bin/python3`) a string.
"""
from __future__ import annotations

import ast
import re
import shlex

from envsnap.errors import UsageError
from envsnap.hosts.inventory_graph import (
    ALL,
    UNGROUPED,
    InventoryGraph,
    Vars,
    expand_range,
    is_ip_address,
)
from envsnap.shape import is_mapping

SECTION = re.compile(r"^\[(?P<group>[^:\]\s]+)(?::(?P<kind>\w+))?\]\s*(?:#.*)?$")
GROUP_NAME = re.compile(r"^(?P<group>[^:\]\s]+)\s*(?:#.*)?$")
COMMENT_MARKERS = ("#", ";")
SECTION_KINDS = ("hosts", "children", "vars")
V6_WITH_PORT = re.compile(r"^\[(?P<address>[0-9a-fA-F:.]+)\](?::(?P<port>\d{1,5}))?$")
RANGE_MASK = re.compile(r"\[[^\]]*\]")


def ini_value(text: str) -> object:
    """Ansible's typing of an INI value: a Python literal is that value, else the text."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text
    return plain(value)


def plain(value: object) -> object:
    """What Ansible keeps of a literal: tuples and sets as lists, bytes as text, `...` and
    complex numbers as the text they were written as."""
    if isinstance(value, (list, tuple, set)):
        return [plain(item) for item in value]
    if is_mapping(value):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if value is ... or isinstance(value, complex):
        return "..." if value is ... else str(value)
    return value


def host_and_port(pattern: str) -> tuple[str, int | None]:
    """`node1:2222`, `web[01:03]:22`, `[::1]:22` -> name (or range) and port."""
    v6 = V6_WITH_PORT.match(pattern)
    if v6:
        return v6["address"], int(v6["port"]) if v6["port"] else None
    masked = RANGE_MASK.sub(lambda found: "x" * len(found[0]), pattern)  # a range's colons
    if masked.count(":") != 1:
        return pattern, None   # no port, or a bare IPv6 address
    colon = masked.index(":")
    name, port = pattern[:colon], pattern[colon + 1:]
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"host {pattern!r}: {port!r} after ':' is not a port number (1-65535)")
    return name, int(port)


class IniReader:
    """One pass over the lines, as Ansible's plugin makes it."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.graph = InventoryGraph()
        self.graph.add_group(ALL)
        self.graph.add_group(UNGROUPED)
        self.declared = {ALL, UNGROUPED}       # groups with a [name] or [name:children]
        self.vars_sections: dict[str, int] = {}      # group -> line of its [name:vars]
        self.child_lines: dict[str, tuple[int, str]] = {}   # child -> (line, parent)
        self.line = 0

    def error(self, message: str) -> UsageError:
        return UsageError(f"{self.source}:{self.line}: {message}")

    def read(self, text: str) -> InventoryGraph:
        group, kind = UNGROUPED, "hosts"
        for self.line, raw in enumerate(text.splitlines(), start=1):
            line = raw.strip()
            if not line or line.startswith(COMMENT_MARKERS):
                continue
            section = SECTION.match(line)
            if section:
                group, kind = section["group"], section["kind"] or "hosts"
                self.start_section(group, kind)
            elif line.startswith("[") and line.endswith("]"):
                raise self.error(f"not a section header: {line!r} (spaces or other "
                                 "characters that a group name may not hold?)")
            elif kind == "hosts":
                self.host_line(line, group)
            elif kind == "vars":
                self.vars_line(line, group)
            else:
                self.child_line(line, group)
        self.check_declared()
        return self.graph

    def start_section(self, group: str, kind: str) -> None:
        if kind not in SECTION_KINDS:
            raise self.error(f"section [{group}:{kind}] has an unknown type {kind!r} "
                             "(hosts, children or vars)")
        self.graph.add_group(group)
        if kind == "vars":
            self.vars_sections.setdefault(group, self.line)
        else:
            self.declared.add(group)

    def host_line(self, line: str, group: str) -> None:
        try:
            words = shlex.split(line, comments=True)
        except ValueError as exc:
            raise self.error(f"host line {line!r}: {exc}") from None
        try:
            pattern, port = host_and_port(words[0])
            names = expand_range(pattern) if not is_ip_address(pattern) else [pattern]
        except UsageError as exc:
            raise self.error(str(exc)) from None
        host_vars: Vars = {} if port is None else {"ansible_port": port}
        for word in words[1:]:
            key, equals, value = word.partition("=")
            if not equals or not key:
                raise self.error(f"expected key=value after host {words[0]!r}, got {word!r}")
            host_vars[key] = ini_value(value)
        for name in names:
            self.graph.add_host(name, group, host_vars)

    def vars_line(self, line: str, group: str) -> None:
        key, equals, value = line.partition("=")
        if not equals or not key.strip():
            raise self.error(f"expected key=value in [{group}:vars], got {line!r}")
        self.graph.group_vars[group][key.strip()] = ini_value(value.strip())

    def child_line(self, line: str, group: str) -> None:
        child = GROUP_NAME.match(line)
        if not child:
            raise self.error(f"expected a group name in [{group}:children], got {line!r}")
        self.graph.add_child(group, child["group"])
        self.child_lines.setdefault(child["group"], (self.line, group))

    def check_declared(self) -> None:
        """As Ansible: a [name:vars] or a child needs the group's own section somewhere."""
        for group, line in self.vars_sections.items():
            if group not in self.declared:
                self.line = line
                raise self.error(f"section [{group}:vars] is for a group that is never "
                                 f"declared (no [{group}] or [{group}:children])")
        for child, (line, parent) in self.child_lines.items():
            if child not in self.declared:
                self.line = line
                raise self.error(f"section [{parent}:children] names group {child!r}, which "
                                 f"has no section of its own ([{child}])")


def parse_ini(text: str, source: str) -> InventoryGraph:
    """The groups, hosts and vars of an INI inventory; a bad line is one error naming it."""
    return IniReader(source).read(text)
