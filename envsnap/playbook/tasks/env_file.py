"""`env_file`: environment variables that every future process gets, persisted on the host.

As the engineer in docs/STORY.md did: NCCL settings written into the interpreter's sitecustomize.py,
so the workers SGLang spawns get them too, whatever shell started the server. The block is
kept between markers and replaced as a whole; the rest of the file is the user's and stays.
Formats: `sitecustomize` (Python), `shell` (`export K=V`, for profile.d), `dotenv` (`K=V`).
"""
from __future__ import annotations

import re
import shlex
from typing import TypedDict

from envsnap.agent.redact import holds_marker
from envsnap.errors import ArgError
from envsnap.hostops.files import read_file
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

NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# The sitecustomize that will actually load: an existing one earlier on sys.path wins over
# the venv's site-packages (Debian ships /usr/lib/python3.X/sitecustomize.py).
LOCATE = ("import importlib.machinery as m, sysconfig; "
          "s = m.PathFinder.find_spec('sitecustomize'); "
          "print(s.origin if s and s.origin else "
          "sysconfig.get_path('purelib') + '/sitecustomize.py')")


class _Required(TypedDict):
    env: object          # variable names to plain values


class EnvFileArgs(_Required, total=False):
    path: object         # the file on the host, or
    python: object       # an interpreter, whose sitecustomize.py it is
    format: object       # sitecustomize, shell or dotenv (default: by the file's name)
    override: object     # replace a value the environment already has
    marker: object       # names the block between markers


def env_file(ctx: Context, args: EnvFileArgs) -> ModuleResult:
    env = checked_env(as_mapping(args, "env"))
    path = target_path(ctx, args)
    if path is None:
        return failed(f"cannot locate sitecustomize.py with {args['python']}")
    style = str(args.get("format") or ("sitecustomize" if path.endswith(".py") else "shell"))
    marker = as_str(args, "marker", "envsnap env")
    before = read_file(ctx, path)
    text = before.data.decode("utf-8", "surrogateescape")
    block = render_block(style, env, marker, as_bool(args, "override"))
    result = install(ctx, path, replace_block(text, marker, block).encode("utf-8",
                                                                           "surrogateescape"))
    result.data["path"], result.data["env"] = path, env
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


def target_path(ctx: Context, args: EnvFileArgs) -> str | None:
    if args.get("path"):
        return host_path(args, "path")
    if not args.get("python"):
        raise ArgError("env_file: give path, or python to find its sitecustomize.py")
    found = ctx.sh(f"{shlex.quote(str(args['python']))} -c {shlex.quote(LOCATE)}")
    location = last_line(found.stdout)
    return location if found.exit_code == 0 and location.startswith("/") else None


def render_block(style: str, env: dict[str, str], marker: str, override: bool) -> str:
    if not env:
        return ""
    if style == "sitecustomize":
        setter = "_envsnap_os.environ[{0!r}] = {1!r}" if override else \
            "_envsnap_os.environ.setdefault({0!r}, {1!r})"
        body = ["import os as _envsnap_os",
                *(setter.format(name, value) for name, value in sorted(env.items())),
                "del _envsnap_os"]
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
                optional=("path", "python", "format", "override", "marker"),
                choices={"format": ("sitecustomize", "shell", "dotenv")})
