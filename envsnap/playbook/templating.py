"""jinja2 for playbooks: one Environment, StrictUndefined, errors that name file:line.

Two ways a string is rendered, chosen by its shape and nothing else (no literal_eval
guessing as in jinja2's NativeEnvironment, which would turn a file's text "[1, 2]" into a list):
- a string that is exactly one `{{ expression }}` keeps the expression's own type, so
  `loop: "{{ snapshot.facts.git.repos | dict2items }}"` is a list and `patch: "{{ ... }}"`
  can be a mapping;
- anything else renders to a string, like a plain jinja2 Template.
`when`, `changed_when` and `failed_when` are bare expressions, as in Ansible.
"""
from __future__ import annotations

import base64
import hashlib
import json
import posixpath
import re
import shlex
from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any, Callable, TypedDict, TypeVar

import jinja2
import yaml
from jinja2 import meta, nodes
from jinja2.exceptions import SecurityError
from jinja2.sandbox import SandboxedEnvironment

from envsnap.errors import PlaybookError
from envsnap.playbook.location import Where
from envsnap.snapshot.store import label_from_name

SINGLE_EXPRESSION = re.compile(r"^\{\{(?P<expr>.*)\}\}$", re.DOTALL)
UNDEFINED_NAME = re.compile(r"^'(?P<name>[A-Za-z_][A-Za-z0-9_]*)' is undefined$")
GUARD_TESTS = {"defined", "undefined", "none"}
GUARD_FILTERS = {"default", "d"}
FALSE_WORDS = {"", "0", "false", "no", "off", "n", "f"}
HINTS = {"snapshot": " (give one with -e snapshot=LABEL)"}

# The names a template sees (run.py: host vars, magic vars, play vars, registered results,
# -e), each any YAML value or a loaded snapshot: open by nature, as in Ansible; a task
# module checks the rendered arguments it takes (tasks/base.py).
Variables = dict[str, Any]
Item = TypeVar("Item")


class KeyValue(TypedDict):
    """One entry of `mapping | dict2items`, as Ansible's filter gives it."""

    key: str
    value: Any


def to_bool(value: Any) -> bool:
    """Ansible's `bool` filter: the strings of -e key=value mean what they say."""
    if isinstance(value, str):
        return value.strip().lower() not in FALSE_WORDS
    return bool(value)


def dict2items(value: Mapping[str, Any]) -> list[KeyValue]:
    return [{"key": key, "value": item} for key, item in value.items()]


def with_prefix(value: Mapping[str, Item], *prefixes: str) -> dict[str, Item]:
    """The entries whose key starts with one of the prefixes: `env | with_prefix('NCCL_')`."""
    return {key: item for key, item in value.items() if str(key).startswith(prefixes)}


def sha256(value: str | bytes) -> str:
    data = value.encode("utf-8") if isinstance(value, str) else value
    return hashlib.sha256(data).hexdigest()


FILTERS: dict[str, Callable[..., Any]] = {
    "bool": to_bool,
    "dict2items": dict2items,
    "with_prefix": with_prefix,
    "sha256": sha256,
    "b64decode": lambda value: base64.b64decode(value).decode("utf-8"),
    "b64encode": lambda value: base64.b64encode(str(value).encode("utf-8")).decode("ascii"),
    "quote": lambda value: shlex.quote(str(value)),
    "basename": lambda value: posixpath.basename(str(value)),
    "dirname": lambda value: posixpath.dirname(str(value)),
    "to_json": lambda value: json.dumps(value, sort_keys=True, default=str),
    "safe_label": label_from_name,
    "to_yaml": lambda value: yaml.safe_dump(value, sort_keys=True, default_flow_style=False),
}


def make_environment() -> jinja2.Environment:
    # Sandboxed: a playbook comes with a snapshot or from a colleague, and a template is no
    # licence to run code here (`lipsum.__globals__.os`, `''.__class__.__mro__`): an
    # underscore attribute, a function's globals, a mutating method are refused, and a
    # refusal is one line like any template error.
    env = SandboxedEnvironment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                               autoescape=False)
    env.filters.update(FILTERS)
    return env


ENV = make_environment()


def is_template(text: str) -> bool:
    return "{{" in text or "{%" in text or "{#" in text


def single_expression(text: str) -> str | None:
    match = SINGLE_EXPRESSION.match(text)
    if match and "{{" not in match["expr"] and "}}" not in match["expr"]:
        return match["expr"]
    return None


def bare_expression(text: str) -> str:
    """`when: "{{ x }}"` is forgiven: the braces are taken off, as Ansible does with a warning."""
    return single_expression(text) or text


@lru_cache(maxsize=4096)
def _template(text: str) -> jinja2.Template:
    return ENV.from_string(text)


@lru_cache(maxsize=4096)
def _expression(text: str) -> Any:
    return ENV.compile_expression(text, undefined_to_none=False)


def where_line(where: Where, exc: jinja2.TemplateSyntaxError) -> Where:
    """A multi-line template's own line number moves the playbook line down."""
    if exc.lineno and exc.lineno > 1:
        return where.at(where.line + exc.lineno - 1)
    return where


def check_syntax(text: str, where: Where, expression: bool = False) -> None:
    """Compile now, at load time: a typo is reported before any host is touched."""
    try:
        _expression(bare_expression(text)) if expression else _template(text)
    except jinja2.TemplateSyntaxError as exc:
        what = "bad expression" if expression else "template syntax error"
        raise PlaybookError(f"{where_line(where, exc)}: {what}: {exc.message}") from None
    except Exception as exc:  # compiling folds constants: `10 ** 10000` fails in str(int)
        raise PlaybookError(f"{where}: {describe(exc, text)}") from None


def describe(exc: Exception, text: str) -> str:
    if isinstance(exc, jinja2.UndefinedError):
        match = UNDEFINED_NAME.match(str(exc.message or ""))
        if match:
            return f"undefined variable '{match['name']}'{HINTS.get(match['name'], '')}"
        return f"undefined: {exc.message} in {text.strip()!r}"
    if isinstance(exc, SecurityError):
        reason = str(exc.message).rstrip(".")
        return f"template refused: {reason} in {text.strip()!r} (templates run sandboxed)"
    if isinstance(exc, jinja2.TemplateError):
        return f"template error: {exc.message} in {text.strip()!r}"
    return f"template error: {type(exc).__name__}: {exc} in {text.strip()!r}"


def render_string(text: str, variables: Mapping[str, Any], where: Where) -> Any:
    """A playbook string with the host's variables; see the module docstring for the type."""
    if not is_template(text):
        return text
    try:
        expression = single_expression(text)
        if expression is not None:
            return defined(_expression(expression)(**variables))
        return _template(text).render(**variables)
    except jinja2.TemplateSyntaxError as exc:
        raise PlaybookError(f"{where_line(where, exc)}: template syntax error: "
                            f"{exc.message}") from None
    except Exception as exc:  # a filter's TypeError is the playbook's fault too
        raise PlaybookError(f"{where}: {describe(exc, text)}") from None


def render_text(text: str, variables: Mapping[str, Any], where: Where) -> str:
    """A template file's whole text: always a string (the native rule is for playbook values)."""
    try:
        return _template(text).render(**variables)
    except jinja2.TemplateSyntaxError as exc:
        raise PlaybookError(f"{where_line(where, exc)}: template syntax error: "
                            f"{exc.message}") from None
    except Exception as exc:
        raise PlaybookError(f"{where}: {describe(exc, text[:60])}") from None


def defined(value: Any) -> Any:
    """An expression returns StrictUndefined rather than raising: make it raise here."""
    if isinstance(value, jinja2.Undefined):
        value._fail_with_undefined_error()
    return value


def evaluate(expression: str, variables: Mapping[str, Any], where: Where) -> bool:
    try:
        return to_bool(_expression(bare_expression(expression))(**variables))
    except jinja2.TemplateSyntaxError as exc:
        raise PlaybookError(f"{where}: bad expression: {exc.message}") from None
    except Exception as exc:
        raise PlaybookError(f"{where}: {describe(exc, expression)}") from None


# ---- names a template needs, for the check before any host is touched ------------------------

def needed_names(text: str, expression: bool = False) -> set[str]:
    """Top-level variables the template reads, minus those it guards with `is defined` or
    `| default`: those may be absent on purpose."""
    source = "{{ " + bare_expression(text) + " }}" if expression else text
    if not expression and not is_template(text):
        return set()
    tree = ENV.parse(source)
    return set(meta.find_undeclared_variables(tree)) - guarded_names(tree)


def guarded_names(tree: nodes.Node) -> set[str]:
    # Only a bare name is guarded: `a.b is defined` still reads `a`, which must exist.
    return {guard.name for guard in _guards(tree) if isinstance(guard, nodes.Name)}


def _guards(tree: nodes.Node) -> Iterator[nodes.Node]:
    for test in tree.find_all(nodes.Test):
        if test.name in GUARD_TESTS:
            yield test.node
    for filtered in tree.find_all(nodes.Filter):
        if filtered.name in GUARD_FILTERS and filtered.node is not None:
            yield filtered.node
