"""`env_file`: environment variables that every future process gets, persisted on the host.

As the engineer in docs/STORY.md did: NCCL settings written into the interpreter's sitecustomize.py,
so the workers SGLang spawns get them too, whatever shell started the server. The block is
kept between markers and replaced as a whole; the rest of the file is the user's and stays.
Formats: `sitecustomize` (Python), `shell` (`export K=V`, for profile.d), `dotenv` (`K=V`),
`pth` (one `import os; os.environ...` startup line a variable, in a .pth file of the venv's
site-packages: site.py runs those on every Python, Debian's included).

With `python:` the file is that interpreter's own: inside its venv, never through a link out
of it. Where the sitecustomize it loads is not its own (stock Debian and Ubuntu: the standard
library's /usr/lib/python3.X/sitecustomize.py, a link into /etc, which every python3.X of the
host loads and which shadows the venv's), nothing is written unless `host_wide: true` names
it; the refusal says so in one line with what works instead (`format: pth`).
"""
from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from typing import TypedDict

from envsnap.agent.redact import holds_marker
from envsnap.errors import ArgError
from envsnap.hostops.files import read_file
from envsnap.hostops.hostwide import HostWideRefused, startup_gate
from envsnap.hostops.shell import last_line
from envsnap.playbook.tasks.base import (
    Context,
    Module,
    ModuleResult,
    as_bool,
    as_mapping,
    as_str,
    failed,
    host_path,
    is_scalar,
)
from envsnap.playbook.tasks.hostfile import install
from envsnap.shape import is_object

NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
PTH_NAME = "envsnap-env.pth"
# The sitecustomize that will actually load (an existing one earlier on sys.path wins over
# the venv's site-packages), its real path, and whether it and site-packages are the
# interpreter's own: inside sys.prefix, which is not one every python shares.
LOCATE = """
import importlib.machinery as m, json, os, sys, sysconfig
prefix = os.path.realpath(sys.prefix)
def own(path):
    return prefix not in ("/", "/usr", "/usr/local") and \\
        (os.path.realpath(path) + "/").startswith(prefix + "/")
s = m.PathFinder.find_spec("sitecustomize")
loaded = s.origin if s and s.origin else None
purelib = sysconfig.get_path("purelib")
path = [os.path.abspath(entry) for entry in sys.path if entry]
at = lambda folder: path.index(folder) if folder in path else len(path)
print(json.dumps({"loaded": loaded, "real": loaded and os.path.realpath(loaded),
                  "shadows": bool(loaded) and at(os.path.dirname(loaded)) < at(purelib),
                  "own": bool(loaded and own(loaded)), "purelib": purelib,
                  "purelib_own": own(purelib), "version": "%d.%d" % sys.version_info[:2]}))
"""


class Refused(Exception):
    """env_file does not write there: the message says why and what works."""


class _Required(TypedDict):
    env: object          # variable names to plain values


class EnvFileArgs(_Required, total=False):
    path: object         # the file on the host, or
    python: object       # an interpreter, whose sitecustomize.py (or .pth) it is
    format: object       # sitecustomize, shell, dotenv or pth (default: by the file's name)
    host_wide: object    # with python: may write a sitecustomize every python loads
    override: object     # replace a value the environment already has
    marker: object       # names the block between markers


def env_file(ctx: Context, args: EnvFileArgs) -> ModuleResult:
    env = checked_env(as_mapping(args, "env"))
    try:
        path, note = target_path(ctx, args)
    except Refused as exc:
        return failed(str(exc))
    style = str(args.get("format") or ("sitecustomize" if path.endswith(".py") else
                                       "pth" if path.endswith(".pth") else "shell"))
    marker = as_str(args, "marker", "envsnap env")
    before = read_file(ctx, path)
    text = before.data.decode("utf-8", "surrogateescape")
    block = render_block(style, env, marker, as_bool(args, "override"))
    result = install(ctx, path, replace_block(text, marker, block).encode("utf-8",
                                                                           "surrogateescape"))
    result.data["path"], result.data["env"] = path, env
    if note and not result.failed:
        result.msg += note
    return result


def checked_env(env: dict[str, object]) -> dict[str, str]:
    for name, value in env.items():
        if not NAME.match(str(name)):
            raise ArgError(f"env_file: {name!r} is not a variable name")
        if value is None or not is_scalar(value):
            raise ArgError(f"env_file: {name} needs a plain value, not {value!r}")
        if holds_marker(str(value)):
            raise ArgError(f"env_file: the value of {name} was masked at capture "
                           "(it looks like a secret): give it explicitly")
    return {str(name): str(value) for name, value in env.items()}


def target_path(ctx: Context, args: EnvFileArgs) -> tuple[str, str]:
    """(the file, a note said after the task's message); Refused where it is not written."""
    if args.get("path"):
        return host_path(args, "path"), ""
    if not args.get("python"):
        raise ArgError("env_file: give path, or python to find its sitecustomize.py")
    python = str(args["python"])
    found = ctx.sh(f"{shlex.quote(python)} -c {shlex.quote(LOCATE)}")
    try:
        where = json.loads(last_line(found.stdout)) if found.exit_code == 0 else None
    except ValueError:
        where = None
    if not is_object(where):
        raise Refused(f"cannot locate sitecustomize.py with {python}")
    return choose(python, where, str(args.get("format") or ""), as_bool(args, "host_wide"))


def choose(python: str, where: dict[str, object], style: str,
           host_wide: bool) -> tuple[str, str]:
    """The interpreter's own file; a host-wide one only as `host_wide` names it (the
    host-wide gate, hostops/hostwide.py)."""
    purelib, loaded, real = str(where.get("purelib")), where.get("loaded"), where.get("real")
    version = str(where.get("version"))
    pth = f"{purelib}/{PTH_NAME}"

    def gate(own: bool, refusal: Callable[[str], str]) -> str:
        try:
            return startup_gate(own, host_wide, version, refusal, flag="host_wide")
        except HostWideRefused as exc:
            raise Refused(str(exc)) from None

    if style == "pth":
        return pth, gate(bool(where.get("purelib_own")), lambda words: (
            f"{pth} is not in a venv of {python}, {words}; not written: host_wide: true "
            "writes it"))
    if isinstance(loaded, str) and where.get("own"):
        return loaded, ""
    if isinstance(loaded, str) and (where.get("shadows") or not where.get("purelib_own")):
        shown = f"{loaded} (-> {real})" if real and real != loaded else loaded
        return str(real or loaded), gate(False, lambda words: (
            f"{python}'s own sitecustomize.py would be shadowed by {shown}: it would never "
            f"run; not written; what works: format: pth (a startup line in {pth}), "
            f"usercustomize where the user site is on, or the server's env through --serve; "
            f"or host_wide: true writes {shown}, {words}"))
    return f"{purelib}/sitecustomize.py", gate(bool(where.get("purelib_own")), lambda words: (
        f"{purelib}/sitecustomize.py is not in a venv of {python}, {words}; not written: "
        "host_wide: true writes it, or give the python of a venv"))


def render_block(style: str, env: dict[str, str], marker: str, override: bool) -> str:
    if not env:
        return ""
    if style == "sitecustomize":
        setter = "_envsnap_os.environ[{0!r}] = {1!r}" if override else \
            "_envsnap_os.environ.setdefault({0!r}, {1!r})"
        body = ["import os as _envsnap_os",
                *(setter.format(name, value) for name, value in sorted(env.items())),
                "del _envsnap_os"]
    elif style == "pth":      # site.py runs a .pth line that starts with `import`
        setter = "os.environ[{0!r}] = {1!r}" if override else "os.environ.setdefault({0!r}, {1!r})"
        body = ["import os; " + setter.format(name, value) for name, value in sorted(env.items())]
    elif style == "shell":
        body = [f"export {name}={shlex.quote(value)}" for name, value in sorted(env.items())]
    else:
        body = [f"{name}={shlex.quote(value)}" for name, value in sorted(env.items())]
    return "\n".join([begin(marker), *body, end(marker)]) + "\n"


def begin(marker: str) -> str:
    return f"# BEGIN {marker} (written by envsnap; edits inside this block are replaced)"


def end(marker: str) -> str:
    return f"# END {marker}"


def replace_block(text: str, marker: str, block: str) -> str:
    """The old block (if any) gives way to the new one in place; otherwise it is appended."""
    lines = text.splitlines(keepends=True)
    first = next((i for i, line in enumerate(lines) if line.startswith(f"# BEGIN {marker} ")),
                 None)
    last = next((i for i, line in enumerate(lines) if line.rstrip("\n") == end(marker)), None)
    if first is not None and last is not None and last >= first:
        return "".join(lines[:first]) + block + "".join(lines[last + 1:])
    if not block:
        return text
    separator = "" if not text or text.endswith("\n") else "\n"
    return text + separator + block


MODULE = Module[EnvFileArgs](name="env_file", run=env_file, required=("env",),
                optional=("path", "python", "format", "override", "marker", "host_wide"),
                choices={"format": ("sitecustomize", "shell", "dotenv", "pth")})
