"""Undefined variables found before any host is contacted.

Every template's top-level names must be defined by something that will be there when it
renders: extra vars, host vars, magic vars, play vars above it, `item` inside a loop, a
`register` of an earlier task. Names guarded by `is defined` or `| default` may be absent.
Deeper lookups (`snapshot.facts.nope`) can only fail at run time, on the host that lacks them.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable

from envsnap.errors import PlaybookError
from envsnap.hosts.inventory import Host
from envsnap.playbook.load import Play, Playbook, Task, strings_with_lines
from envsnap.playbook.location import Where
from envsnap.playbook.templating import ENV, HINTS, needed_names


def check_names(playbook: Playbook, plan: list[tuple[Play, list[Host]]],
                extra: Mapping[str, Any], magic: Callable[[Host], Mapping[str, Any]]) -> None:
    registered: set[str] = set()
    for play, hosts in plan:
        checked: set[frozenset[str]] = set()
        for host in hosts:
            known = set(host.vars) | set(magic(host)) | set(extra) | registered | set(ENV.globals)
            if "snapshot" in known:
                known.add("snapshot_label")
            if frozenset(known) not in checked:  # a fleet of alike hosts is checked once
                checked.add(frozenset(known))
                check_play(play, known, set(extra))
        registered |= {task.register for task in play.tasks if task.register}


def check_play(play: Play, known: set[str], extra: set[str]) -> None:
    known = set(known)
    for name, value in play.vars.items():
        if name not in extra:
            check_value(value, known, play.source, play.vars.key_lines[name])
        known.add(str(name))
    for task in play.tasks:
        check_task(task, known)
        if task.register:
            known.add(task.register)


def check_task(task: Task, known: set[str]) -> None:
    inside = known | ({"item"} if task.loop is not None else set())
    if task.loop is not None:
        check_value(task.loop, known, task.source, task.lines.get("loop", task.line))
    check_value(task.args, inside, task.source, task.args_line)
    if task.when is not None:
        check_expression(task.when, inside, task.where("when"))
    judged = inside | {"result"} | ({task.register} if task.register else set())
    for key in ("changed_when", "failed_when"):
        expression = getattr(task, key)
        if expression is not None:
            check_expression(expression, judged, task.where(key))


def check_value(value: Any, known: set[str], source: str, line: int) -> None:
    for text, at in strings_with_lines(value, line):
        report(needed_names(text) - known, Where(source, at))


def check_expression(expression: str, known: set[str], where: Where) -> None:
    report(needed_names(expression, expression=True) - known, where)


def report(missing: set[str], where: Where) -> None:
    if missing:
        name = sorted(missing)[0]
        raise PlaybookError(f"{where}: undefined variable '{name}'{HINTS.get(name, '')}")
