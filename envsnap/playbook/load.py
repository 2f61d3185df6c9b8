"""Playbooks: YAML plays of tasks, loaded with line numbers and checked before anything runs.

    - name: restore a snapshot            # a play
      hosts: all                          # inventory host or group names (a list, or "a,b")
      vars: {fetch: true}                 # rendered in order at the start of the play
      tasks:
        - name: stash current work        # a task: exactly one module key
          git: {repo: /root/sglang, action: stash}
          when: snapshot is defined       # a jinja2 expression (no braces), per loop item
          loop: "{{ repos }}"             # each element is `item`
          register: stashed               # the result, as a variable for later tasks
          ignore_errors: false
          check_mode: false               # run it for real even under --check (read-only tasks)

Every error names `file:line`: a YAML syntax error, an unknown module or argument, a bad
template or `when`, and (run.py) an undefined variable.

Every mapping the loader builds is a LineDict and every list a LineList (the few YAML tags
that build other lists, `!!omap` and `!!pairs`, give plain ones): their lines are what the
checks here and the renderer (run.py) read, and their types are what those checks test.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from envsnap import yamlread
from envsnap.errors import ArgError, PlaybookError, UsageError, YamlError
from envsnap.playbook.location import Where
from envsnap.playbook.modules import MODULES
from envsnap.playbook.tasks.base import yaml_kind
from envsnap.playbook.templating import Variables, check_syntax, is_template

PLAY_KEYS = ("name", "hosts", "vars", "tasks")
TASK_KEYS = ("name", "when", "register", "loop", "ignore_errors", "check_mode",
             "changed_when", "failed_when")
EXPRESSION_KEYS = ("when", "changed_when", "failed_when")


class LineDict(dict[object, object]):
    """A YAML mapping that remembers where it and each of its values start (1-based). Its
    keys are plain values (text, numbers, booleans) and its values any YAML value."""

    line: int = 0
    key_lines: dict[object, int]

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.key_lines = {}   # an empty one made for a missing `vars:` has no lines either


class LineList(list[object]):
    line: int = 0
    item_lines: list[int]

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.item_lines = []   # `tasks: []` and a missing `tasks:` share the empty one


def value_line(node: yaml.Node) -> int:
    # A block scalar's text starts on the line after its `|`.
    block = isinstance(node, yaml.ScalarNode) and node.style in ("|", ">")
    return node.start_mark.line + 1 + int(block)


class _Loader(yamlread.Loader):
    """SafeLoader whose mappings and lists carry their lines; duplicate keys are refused."""


def _mapping(loader: _Loader, node: yaml.MappingNode) -> LineDict:
    loader.flatten_mapping(node)
    result = LineDict()
    result.line, result.key_lines = node.start_mark.line + 1, {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        plain = isinstance(key, (str, int, float, bool))   # `? [a, b]` is not even hashable
        if not plain or key in result:
            problem = "duplicate key" if plain else "a key must be a plain value"
            raise yamlread.refusal(f"{problem} {key!r}", key_node)
        result[key] = loader.construct_object(value_node, deep=True)
        result.key_lines[key] = value_line(value_node)
    return result


def _sequence(loader: _Loader, node: yaml.SequenceNode) -> LineList:
    result = LineList(loader.construct_object(child, deep=True) for child in node.value)
    result.line = node.start_mark.line + 1
    result.item_lines = [value_line(child) for child in node.value]
    return result


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _sequence)


@dataclass(frozen=True)
class Task:
    name: str
    module: str
    args: object         # as written (a mapping, or a free-form string): checked when rendered
    line: int            # the task's first line
    args_line: int       # the module key's value
    source: str
    when: str | None = None
    register: str | None = None
    loop: object = None
    ignore_errors: bool = False
    check_mode: bool | None = None
    changed_when: str | None = None
    failed_when: str | None = None
    lines: Mapping[object, int] = field(default_factory=dict)   # task keyword -> line

    def where(self, key: str | None = None) -> Where:
        """The task's line, or the line of one of its keywords (`when`, `loop`, ...)."""
        return Where(self.source, self.lines.get(key, self.line) if key else self.line)

    @property
    def args_where(self) -> Where:
        return Where(self.source, self.args_line)


@dataclass(frozen=True)
class Play:
    name: str
    hosts: list[str]
    vars: LineDict
    tasks: list[Task]
    line: int
    source: str

    def where(self, line: int | None = None) -> Where:
        """The play's first line, or another line of its file (a play var's)."""
        return Where(self.source, self.line if line is None else line)


@dataclass(frozen=True)
class Playbook:
    path: Path
    source: str          # the path as the user gave it: what errors show
    plays: list[Play]

    @property
    def base_dir(self) -> Path:
        return self.path.parent


def load(path: str | Path) -> Playbook:
    source = str(path)
    try:
        text = yamlread.read_text(path)
    except OSError as exc:
        raise UsageError(f"cannot read playbook {source}: {exc.strerror}") from None
    except YamlError as exc:
        raise PlaybookError(f"{source}: not a playbook: {exc.reason}") from None
    except UnicodeDecodeError as exc:
        raise PlaybookError(f"{source}: not a playbook: not UTF-8 text (byte {exc.start})") \
            from None
    return parse(text, source, Path(path))


def parse(text: str, source: str, path: Path | None = None) -> Playbook:
    document = parse_yaml(text, source)
    if not isinstance(document, LineList) or not document:
        raise PlaybookError(f"{source}:1: a playbook is a list of plays (- hosts: ...)")
    plays = [parse_play(play, source, line) for play, line in zip(document,
                                                                    document.item_lines)]
    return Playbook(path or Path(source), source, plays)


def parse_yaml(text: str, source: str) -> object:
    try:
        return yamlread.load(text, _Loader)
    except YamlError as exc:
        raise PlaybookError(f"{source}:{exc.line or 1}: YAML error: {exc.reason}") from None


def parse_play(play: object, source: str, line: int) -> Play:
    if not isinstance(play, LineDict):
        raise PlaybookError(f"{source}:{line}: a play is a mapping with hosts and tasks")
    where = f"{source}:{play.line}"
    unknown_keys(play, PLAY_KEYS, source, "play")
    if "hosts" not in play:
        raise PlaybookError(f"{where}: the play has no hosts")
    variables = play.get("vars") or LineDict()
    if not isinstance(variables, LineDict):
        raise PlaybookError(f"{source}:{play.key_lines['vars']}: vars must be a mapping")
    check_templates(variables, source, play.key_lines.get("vars", play.line))
    tasks = play.get("tasks") or LineList()
    if not isinstance(tasks, LineList):
        raise PlaybookError(f"{source}:{play.key_lines['tasks']}: tasks must be a list")
    return Play(name=str(play.get("name") or ""), hosts=host_patterns(play["hosts"], where),
                vars=variables, line=play.line, source=source,
                tasks=[parse_task(task, source, at) for task, at in zip(tasks,
                                                                        tasks.item_lines)])


def host_patterns(value: object, where: str) -> list[str]:
    patterns = value if isinstance(value, list) else str(value or "").split(",")
    if isinstance(value, (LineDict, bool)) or not all(isinstance(pattern, (str, int))
                                                  for pattern in patterns):
        raise PlaybookError(f"{where}: hosts must be a name, names separated by commas, "
                            f"or a list of names, not {value!r}")
    cleaned = [str(pattern).strip() for pattern in patterns if str(pattern).strip()]
    if not cleaned:
        raise PlaybookError(f"{where}: hosts is empty")
    return cleaned


def unknown_keys(mapping: LineDict, allowed: tuple[str, ...], source: str, what: str) -> None:
    for key in mapping:
        if key not in allowed:
            raise PlaybookError(f"{source}:{mapping.key_lines[key]}: unknown {what} key "
                                f"{key!r} (allowed: {', '.join(allowed)})")


def parse_task(task: object, source: str, line: int) -> Task:
    if not isinstance(task, LineDict):
        raise PlaybookError(f"{source}:{line}: a task is a mapping (- name: ..., module: args)")
    module_key = find_module(task, source)
    module_line = task.key_lines[module_key]
    args = task[module_key]
    check_args(module_key, args, source, module_line)
    check_keywords(task, source)
    check_mode = task.get("check_mode")
    return Task(name=str(task.get("name") or module_key), module=module_key, args=args,
                line=task.line, args_line=module_line, source=source,
                when=text_or_none(task.get("when")), register=register_name(task, source),
                loop=task.get("loop"), ignore_errors=bool(task.get("ignore_errors", False)),
                check_mode=None if check_mode is None else bool(check_mode),
                changed_when=text_or_none(task.get("changed_when")),
                failed_when=text_or_none(task.get("failed_when")), lines=task.key_lines)


def find_module(task: LineDict, source: str) -> str:
    candidates = [key for key in task if key not in TASK_KEYS]
    if not candidates:
        raise PlaybookError(f"{source}:{task.line}: the task names no module "
                            f"(one of: {', '.join(MODULES)})")
    for key in candidates:
        if key not in MODULES:
            raise PlaybookError(f"{source}:{task.key_lines[key]}: unknown module {key!r} "
                                f"(modules: {', '.join(MODULES)}; task keys: "
                                f"{', '.join(TASK_KEYS)})")
    names = [str(key) for key in candidates]   # each a module's name now
    if len(names) > 1:
        raise PlaybookError(f"{source}:{task.key_lines[candidates[1]]}: one module per task, "
                            f"this one has {', '.join(names)}")
    return names[0]


def check_args(module_name: str, args: object, source: str, line: int) -> None:
    """Names and literal choices now; values that are templates are checked when rendered."""
    check_templates(args, source, line)
    if isinstance(args, str) and is_template(args):
        return
    try:
        MODULES[module_name].normalize(args)
    except ArgError as exc:
        bad = next((key for key in (args if isinstance(args, LineDict) else {})
                    if key not in MODULES[module_name].accepted), None)
        at = args.key_lines[bad] if bad is not None and isinstance(args, LineDict) else line
        raise PlaybookError(f"{source}:{at}: {exc}") from None


def check_keywords(task: LineDict, source: str) -> None:
    for key in EXPRESSION_KEYS:
        if isinstance(task.get(key), (list, LineDict)):
            # str() of a list is a non-empty list literal: `when: [false]` would be true.
            raise PlaybookError(f"{source}:{task.key_lines[key]}: {key} must be one expression "
                                f"(a string, e.g. x > 1), not a {yaml_kind(task[key])}")
        if key in task and not isinstance(task[key], bool):
            check_syntax(str(task[key]), Where(source, task.key_lines[key]), expression=True)
    if "loop" in task:
        check_templates(task["loop"], source, task.key_lines["loop"])
    for key in ("ignore_errors", "check_mode"):
        if key in task and not isinstance(task[key], bool):
            raise PlaybookError(f"{source}:{task.key_lines[key]}: {key} must be true or false")


def register_name(task: LineDict, source: str) -> str | None:
    name = task.get("register")
    if name is None:
        return None
    if not isinstance(name, str) or not name.isidentifier():
        raise PlaybookError(f"{source}:{task.key_lines['register']}: register needs a variable "
                            f"name, not {name!r}")
    return name


def text_or_none(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def check_templates(value: object, source: str, line: int) -> None:
    """Every template compiles: syntax errors surface at load, with their line."""
    for text, at in strings_with_lines(value, line):
        if is_template(text):
            check_syntax(text, Where(source, at))


def strings_with_lines(value: object, line: int) -> list[tuple[str, int]]:
    if isinstance(value, str):
        return [(value, line)]
    if isinstance(value, LineDict):
        return [found for key, item in value.items()
                for found in strings_with_lines(item, value.key_lines.get(key, line))]
    if isinstance(value, list):
        lines = value.item_lines if isinstance(value, LineList) else [line] * len(value)
        return [found for item, at in zip(value, lines) for found in strings_with_lines(item, at)]
    return []


def parse_extra_vars(values: list[str]) -> Variables:
    """-e key=value (a string, as in Ansible), -e '{"k": ...}' (YAML/JSON), -e @file.yml."""
    merged: Variables = {}
    for value in values:
        merged.update(parse_extra_var(value))
    return merged


def parse_extra_var(value: str) -> Variables:
    if value.startswith("@"):
        try:
            text = yamlread.read_text(value[1:])
        except OSError as exc:
            raise UsageError(f"-e {value}: {exc.strerror}") from None
        except YamlError as exc:
            raise UsageError(f"-e {value}: {exc.reason}") from None
        except UnicodeDecodeError:
            raise UsageError(f"-e {value}: not UTF-8 text") from None
        return mapping_of(text, value)
    try:   # argv bytes that are not UTF-8 arrive as surrogates: no host, file or YAML takes them
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError(f"-e {value!r}: not UTF-8 text") from None
    if value.lstrip().startswith("{"):
        return mapping_of(value, value)
    key, sep, text = value.partition("=")
    if not sep or not key.strip().isidentifier():
        raise UsageError(f"-e {value!r}: expected key=value, a {{...}} mapping or @file")
    return {key.strip(): text}


def mapping_of(text: str, what: str) -> Variables:
    try:
        loaded = yamlread.as_mapping(yamlread.load(text, yamlread.Loader))
    except YamlError as exc:
        raise UsageError(f"-e {what}: not valid YAML ({exc.reason})") from None
    if loaded is None:
        raise UsageError(f"-e {what}: expected a mapping of variables")
    return dict(loaded)
