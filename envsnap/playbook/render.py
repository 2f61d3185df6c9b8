"""A playbook run as text, the way Ansible shows it: PLAY, TASK, a line per host, a RECAP.

Pure functions from the engine's events to strings; envsnap/cli/ writes them.
"""
from __future__ import annotations

from envsnap.playbook.run import (
    Event,
    PlayStarted,
    RunResult,
    TaskResult,
    TaskStarted,
    TaskStatus,
)
from envsnap.shape import is_mapping

WIDTH = 79
STATUS_WORDS: dict[TaskStatus, str] = {"ok": "ok", "changed": "changed", "skipped": "skipping",
                                       "failed": "failed", "unreachable": "unreachable"}


def banner(title: str) -> str:
    return f"\n{title} {'*' * max(3, WIDTH - len(title) - 1)}\n"


def item_label(item: object) -> str:
    """A loop item as the run shows it: a `dict2items` entry by its key."""
    if is_mapping(item) and "key" in item:
        item = item["key"]
    text = str(item)
    return text if len(text) <= 60 else text[:57] + "..."


def result_line(result: TaskResult, show_diff: bool) -> str:
    word = STATUS_WORDS[result.status]
    if result.ignored:
        word += " (ignored)"
    item = f" => (item={item_label(result.item)})" if result.looped else ""
    message = f": {result.msg}" if result.msg else ""
    line = f"{word}: [{result.host}]{item}{message}\n"
    if show_diff and result.diff:
        line += result.diff if result.diff.endswith("\n") else result.diff + "\n"
    return line


def render_event(event: Event, show_diff: bool) -> str:
    if isinstance(event, PlayStarted):
        name = event.play.name or ",".join(event.play.hosts)
        return banner(f"PLAY [{name}]")
    if isinstance(event, TaskStarted):
        return banner(f"TASK [{event.task.name}]")
    return result_line(event, show_diff)


def render_recap(result: RunResult, check: bool) -> str:
    lines = [banner("PLAY RECAP" + (" (check mode: nothing was changed)" if check else ""))]
    width = max((len(host) for host in result.hosts), default=0)
    for host, counts in result.recap().items():
        numbers = "  ".join(f"{key}={value}" for key, value in counts.items())
        lines.append(f"{host:<{width}} : {numbers}\n")
    return "".join(lines)
