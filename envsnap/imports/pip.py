"""pip's outputs -> python_env.packages (given whole: a package missing is really missing).

- `pip list`: a `Package Version [Editable project location]` header, a rule of dashes,
  then one package a line (pip 10 onwards; `pip list --format=columns`);
- `pip list --format=json`: `[{"name": ..., "version": ...}, ...]`, editable ones with
  `editable_project_location`;
- `pip freeze`: `name==version` a line; `name @ URL` (a direct URL: no version on the
  line), `-e ...` (editable) and `# comment` lines are read too;
- `pip inspect` (pip 22.2 onwards, report `version: "1"`): `installed[].metadata` with name
  and version, and the interpreter's `environment` markers (python_full_version,
  platform_release, platform_machine);
- `uv pip list` (uv's crates/uv/src/commands/pip/list.rs, as its tests' snapshots show it):
  pip's columns, told apart by what uv does differently: the names it prints are
  normalized (`typing-extensions`, where pip prints `typing_extensions`), its JSON is
  compact (`[{"name":"jinja2","version":"3.1.6"}]`), and on stderr, which a paste of a
  terminal holds above the table, it names the environment for any but ./.venv (`Using
  Python 3.11.2 environment at: /srv/venv`: the interpreter's version and, when the path is
  absolute, its sys.prefix). A table of normalized names holding no `pip` row is uv's
  (pip lists itself in the environment it runs in; uv's environments hold no pip unless
  asked); with a pip row and no stderr line it reads as pip's (the facts are the same).

Names are keyed as the agent keys them (PEP 503 canonical names)."""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from envsnap.imports.collect_env import canonical, package_facts
from envsnap.imports.reading import Reading, Unreadable, merge, quoted
from envsnap.shape import is_object
from envsnap.yamlread import NESTED_TOO_DEEPLY

if TYPE_CHECKING:
    from envsnap.snapshot.records import Facts, Interpreter, Kernel

PACKAGES = "python_env.packages"
FREEZE_LINE = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*(?:==\s*(\S+)|@\s*\S+)\s*"
                         r"(?:;.*)?$")
# pip's own spelling: a list of {"name": ..., "version": ...}, name first (any other list is
# no pip list, and is left to whatever else it may be: a snapshot's loader names its error)
LIST_JSON = re.compile(r'\s*\[\s*(?:\]|\{\s*"name"\s*:)')
LIST_HEADER = re.compile(r"Package\s+Version(\s+Latest\s+Type)?(\s+Editable project location)?"
                         r"\s*$")
UV_ENVIRONMENT = re.compile(r"Using Python (\S+) environment at:? (.+?)\s*$")
UV_JSON = re.compile(r'\s*\[\{"name":"')   # serde's compact JSON; pip's has spaces
NORMALIZED = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")


def reading(tool: str, form: str, packages: dict[str, str | None],
            more: Facts | None = None, version: str | None = None) -> Reading:
    facts = package_facts(packages)
    merge(facts, more or {})
    return Reading(tool, form, facts, version, complete=[PACKAGES])


# ---- telling them apart ------------------------------------------------------------------

def json_kind(text: str) -> str | None:
    """"pip list json" / "pip inspect" for a JSON document of either shape, else None."""
    head = text.lstrip()[:1]
    if UV_JSON.match(text):
        return "uv pip list json"
    if LIST_JSON.match(text):
        return "pip list json"
    if head == "{" and '"installed"' in text[:4000] and '"pip_version"' in text[:4000]:
        return "pip inspect"
    return None


def text_kind(text: str) -> str | None:
    lines = [line for line in text.splitlines() if line.strip()]
    first = lines[0] if lines else ""
    if UV_ENVIRONMENT.match(first.strip()) and len(lines) > 1 and \
            LIST_HEADER.match(lines[1].strip()):
        return "uv pip list"
    if LIST_HEADER.match(first.strip()):
        return "uv pip list" if uv_names(lines[2:]) else "pip list"
    if FREEZE_LINE.match(first.strip()) or first.startswith(("-e ", "# ")):
        return "pip freeze"
    return None


# ---- the readers ---------------------------------------------------------------------------

def uv_names(rows: list[str]) -> bool:
    """Rows of names as uv prints them: every one normalized, and no pip among them."""
    names = [line.split()[0] for line in rows]
    return bool(names) and "pip" not in names and all(NORMALIZED.fullmatch(n) for n in names)


def read_list(text: str, source: str) -> Reading:
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip()), None)
    if start is None:
        raise Unreadable(source, 1, "an empty pip list")
    environment = UV_ENVIRONMENT.match(lines[start].strip())
    if environment:
        start = next((i for i in range(start + 1, len(lines)) if lines[i].strip()), start)
    rule = start + 1
    tool = "pip list" if environment is None else "uv pip list"
    if rule >= len(lines) or not re.fullmatch(r"-+(\s+-+)*\s*", lines[rule]):
        raise Unreadable(source, rule + 1, f"truncated {tool}: no rule of dashes under its "
                         "header")
    packages: dict[str, str | None] = {}
    for number in range(rule + 1, len(lines)):
        cells = lines[number].split()
        if not cells:
            continue
        # a version starts with a digit (PEP 440, its epoch too): a line of prose does not
        if len(cells) < 2 or not re.match(r"[0-9A-Za-z]", cells[0]) or \
                not re.match(r"\d", cells[1]):
            raise Unreadable(source, number + 1, f"cannot read {quoted(lines[number])} as a "
                             f"{tool} line ('name version')")
        packages[canonical(cells[0])] = cells[1]
    rows = [line for line in lines[rule + 1:] if line.strip()]
    if environment is None and not uv_names(rows):
        return reading("pip list", "columns", packages)
    return reading("uv pip list", "columns", packages, uv_environment(environment))


def uv_environment(found: re.Match[str] | None) -> Facts:
    """uv's `Using Python 3.11.2 environment at: /srv/venv`: the version, and the prefix
    where uv printed it whole (a path under the current folder it prints relative)."""
    if found is None:
        return {}
    version, root = found.groups()
    interpreter: Interpreter = {"version": version}
    if root.startswith("/") or re.match(r"[A-Za-z]:\\", root):
        interpreter["prefix"] = root
    return {"python_env": {"interpreter": interpreter}}


def read_freeze(text: str, source: str) -> Reading:
    packages: dict[str, str | None] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith(("-e ", "--editable")):
            egg = re.search(r"#egg=([A-Za-z0-9._-]+)", line)
            if egg:
                packages[canonical(egg.group(1))] = None
            continue
        match = FREEZE_LINE.match(line)
        if not match:
            raise Unreadable(source, number, f"cannot read {quoted(raw)} as a pip freeze line "
                             "('name==version')")
        packages[canonical(match.group(1))] = match.group(2)
    # not given whole: freeze leaves out pip itself (older pips setuptools and wheel too)
    return Reading("pip freeze", "requirements", package_facts(packages))


def load_json(text: str, source: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as bad:
        line = getattr(bad, "lineno", 1)
        raise Unreadable(source, line, f"cannot read it as JSON ({getattr(bad, 'msg', bad)}):"
                         " malformed or truncated") from None
    except RecursionError:   # `[[[[...]]]]` some thousands deep: json.loads recurses
        raise Unreadable(source, 1, f"cannot read it as JSON ({NESTED_TOO_DEEPLY})") from None


def json_object(value: object) -> Mapping[str, object]:
    """A JSON object of the pasted report as read; {} for anything else, which then lacks
    what the reader asks of it (every part of the report is checked through here)."""
    return value if is_object(value) else {}


def text_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def read_list_json(text: str, source: str) -> Reading:
    rows = load_json(text, source)
    packages: dict[str, str | None] = {}
    for number, value in enumerate(rows if isinstance(rows, list) else [None], 1):
        row = json_object(value)
        name, version = row.get("name"), row.get("version")
        if not (isinstance(name, str) and isinstance(version, str)):
            raise Unreadable(source, 1, f"entry {number} is not a pip list entry "
                             '({"name": ..., "version": ...})')
        packages[canonical(name)] = version
    return reading("uv pip list" if UV_JSON.match(text) else "pip list", "json", packages)


def read_inspect(text: str, source: str) -> Reading:
    report = json_object(load_json(text, source))
    installed = report.get("installed")
    if not isinstance(installed, list):
        raise Unreadable(source, 1, "not a pip inspect report: no 'installed' list")
    packages: dict[str, str | None] = {}
    for number, entry in enumerate(installed, 1):
        metadata = json_object(json_object(entry).get("metadata"))
        name = metadata.get("name")
        if not isinstance(name, str):
            raise Unreadable(source, 1, f"installed entry {number} has no metadata name")
        packages[canonical(name)] = text_or_none(metadata.get("version"))
    environment = json_object(report.get("environment"))
    more: Facts = {}
    python = text_or_none(environment.get("python_full_version"))
    if python is not None:
        merge(more, {"python_env": {"interpreter": {"version": python}}})
    kernel: Kernel = {}
    release = text_or_none(environment.get("platform_release"))
    machine = text_or_none(environment.get("platform_machine"))
    if release is not None:
        kernel["release"] = release
    if machine is not None:
        kernel["machine"] = machine
    if kernel:
        merge(more, {"system": {"kernel": kernel}})
    return reading("pip inspect", f"report version {report.get('version')}", packages, more,
                   text_or_none(report.get("pip_version")))
