"""conda's package lists -> python_env.conda (given whole), packages, the interpreter.

The layouts, as conda's own `conda/cli/main_list.py` prints them and the outputs pasted in
public issue threads show them (tests/data/pastes/README.md names each):

- `conda list`: `# packages in environment at PREFIX:`, `#`, `# Name Version Build Channel`
  (conda 4.x on; earlier ones print the first two lines only, some pastes start at the
  third), then one package a line, `%-25s %-15s %15s  [features]  channel`: the channel is
  left out for `defaults` (unless --show-channel-urls), the `[vc14]` features only where a
  package has them; conda up to 4.3 lists what pip installed as `name version <pip>`, later
  ones as `name version pypi_0 pypi` (`dev_0 <develop>` for `pip install -e`);
- `conda list --export` (`-e`): `# This file may be used to create an environment using:`,
  `# $ conda create --name <env> --file <this file>`, `# platform: linux-64`, then
  `name=version=build` a line (no channel).

Every row lands in `python_env.conda` (`{version, build, channel}`, keyed by conda's name):
the list is given whole, so a package missing there is really missing. What is a Python
distribution lands in `python_env.packages` too, where pip's lists put theirs, so a conda
list compares with a pip list or a capture: what pip installed (pypi_0, <pip>, <develop>)
and conda's own Python builds, whose build string conda-build starts with `py` (py39h..,
pyhd8ed1ab_0, py_0, py3.9_cuda11.3_cudnn8.2.0_0); libraries (cudatoolkit, mkl, libgcc-ng)
are no distribution a capture could see. conda's `python` row is the interpreter's version,
and the header's prefix its sys.prefix."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

from envsnap.imports.collect_env import canonical, package_facts
from envsnap.imports.reading import Reading, Unreadable, merge, quoted

if TYPE_CHECKING:
    from envsnap.snapshot.records import CondaPackage, Facts, Interpreter, PythonEnv

CONDA = "python_env.conda"
PREFIX_LINE = re.compile(r"# packages in environment at (.+):\s*$")
COLUMNS_LINE = re.compile(r"#\s+Name\s+Version\s+Build(?:\s+Channel)?\s*$")
EXPORT_LINE = "# This file may be used to create an environment using:"
PLATFORM_LINE = re.compile(r"#\s*platform:\s*(\S+)\s*$")
ROW = re.compile(r"(\S+)\s+(\S+)\s+(\S+)(?:\s+\[[^\]]*\])?(?:\s+(\S+))?\s*$")
EXPORT_ROW = re.compile(r"([^=\s]+)=([^=\s]+)=([^=\s]+)\s*$")
PIP_BUILDS = ("pypi_0", "<pip>")
PIP_CHANNELS = ("pypi", "<develop>")
# conda's name of a distribution whose pip name differs: conda's pytorch installs torch
DISTRIBUTION = {"pytorch": "torch"}


def first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def kind(text: str) -> str | None:
    """"conda list" / "conda list --export" for either layout's header, else None."""
    first = first_line(text[:4000])
    if PREFIX_LINE.match(first) or COLUMNS_LINE.match(first):
        return "conda list"
    if first == EXPORT_LINE or PLATFORM_LINE.match(first):
        return "conda list --export"
    return None


# ---- the readers ---------------------------------------------------------------------------

def read_list(text: str, source: str) -> Reading:
    lines = text.splitlines()
    start = next((number for number, line in enumerate(lines) if line.strip()), None)
    if start is None:
        raise Unreadable(source, 1, "an empty conda list")
    prefix = PREFIX_LINE.match(lines[start].strip())
    at = start + 1
    while at < len(lines) and lines[at].startswith("#"):
        if not (lines[at].strip() == "#" or COLUMNS_LINE.match(lines[at].strip())):
            raise Unreadable(source, at + 1, f"cannot read {quoted(lines[at])} as a conda "
                             "list header line")
        at += 1
    rows: dict[str, CondaPackage] = {}
    for number in range(at, len(lines)):
        if not lines[number].strip():
            continue
        match = ROW.match(lines[number].strip())
        if not match:
            raise Unreadable(source, number + 1, f"cannot read {quoted(lines[number])} as a "
                             "conda list line ('name version build [channel]')")
        name, version, build, channel = match.groups()
        if build == "<pip>" and name in rows:
            continue      # up to 4.3, pip's copy of a conda package is listed beside it
        # conda leaves out the defaults channel; a row pip installed has none (up to 4.3)
        rows[name] = {"version": version, "build": build}
        if build != "<pip>":
            rows[name]["channel"] = channel or "defaults"
    return reading("conda list", "table", rows, prefix.group(1) if prefix else None)


def read_export(text: str, source: str) -> Reading:
    rows: dict[str, CondaPackage] = {}
    platform = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            found = PLATFORM_LINE.match(line)
            platform = found.group(1) if found else platform
            continue
        match = EXPORT_ROW.match(line)
        if not match:
            raise Unreadable(source, number, f"cannot read {quoted(raw)} as a conda list "
                             "--export line ('name=version=build')")
        name, version, build = match.groups()
        rows[name] = {"version": version, "build": build}
    form = f"export ({platform})" if platform else "export"
    return reading("conda list --export", form, rows, None)


# ---- the facts -----------------------------------------------------------------------------

def is_distribution(row: CondaPackage) -> bool:
    """Installed by pip, or a conda build of a Python package (conda-build's `py` builds)."""
    return row["build"] in PIP_BUILDS or row.get("channel") in PIP_CHANNELS or \
        str(row["build"]).startswith("py")


def reading(tool: str, form: str, rows: dict[str, CondaPackage],
            prefix: str | None) -> Reading:
    packages: dict[str, str | None] = {
        canonical(DISTRIBUTION.get(name, name)): row["version"]
        for name, row in rows.items() if is_distribution(row)}
    facts = package_facts(packages)
    interpreter: Interpreter = {}
    python = rows.get("python", {}).get("version")
    if python:
        interpreter["version"] = python
    if prefix:
        interpreter["prefix"] = prefix
    python_env: PythonEnv = {"conda": rows}
    if interpreter:
        python_env["interpreter"] = interpreter
    more: Facts = {"python_env": python_env}
    return Reading(tool, form, merge(facts, more), complete=[CONDA])
