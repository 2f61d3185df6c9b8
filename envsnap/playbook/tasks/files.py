"""`copy` and `template`: a file on the host from content, a local file, or a jinja2 template.

Both back up what they overwrite (`<dest>.envsnap-backup-<time>`), show a unified diff in
diff mode, and change nothing when the content is already the same.
"""
from __future__ import annotations

from pathlib import Path
from typing import TypedDict, Union

from envsnap.errors import ArgError
from envsnap.playbook.tasks.base import Context, Module, ModuleResult, as_bool, as_str, host_path
from envsnap.playbook.tasks.hostfile import install


class _Dest(TypedDict):
    dest: object         # the path on the host: absolute or ~/...


class _Written(_Dest, total=False):
    mode: object         # octal digits, like '0644'
    backup: object       # keep what is overwritten (default true)


class CopyArgs(_Written, total=False):
    content: object      # the file's text, or
    src: object          # a file on this machine, relative to the playbook's folder


class _Source(TypedDict):
    src: object          # a jinja2 template on this machine


class TemplateArgs(_Written, _Source):
    pass


FileArgs = Union[CopyArgs, TemplateArgs]


def local_file(ctx: Context, args: FileArgs) -> bytes:
    """`src` is on this machine, relative to the playbook's folder (as in Ansible)."""
    path = Path(as_str(args, "src")).expanduser()
    path = path if path.is_absolute() else ctx.base_dir / path
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ArgError(f"cannot read src {path}: {exc.strerror}") from None


def mode_of(args: FileArgs) -> str:
    mode = str(args.get("mode") or "")
    if mode and not (mode.isdigit() and set(mode) <= set("01234567") and len(mode) <= 4):
        raise ArgError(f"mode must be octal digits like '0644', not {mode!r}")
    return mode


def copy(ctx: Context, args: CopyArgs) -> ModuleResult:
    if ("content" in args) == ("src" in args):
        raise ArgError("copy: give exactly one of content and src")
    data = (str(args["content"]).encode("utf-8") if "content" in args
            else local_file(ctx, args))
    return install(ctx, host_path(args, "dest"), data, mode_of(args),
                   as_bool(args, "backup", True))


def template(ctx: Context, args: TemplateArgs) -> ModuleResult:
    try:
        text = local_file(ctx, args).decode("utf-8")
    except UnicodeDecodeError:
        raise ArgError(f"template: {args['src']} is not UTF-8 text") from None
    rendered = ctx.template(text)
    return install(ctx, host_path(args, "dest"), rendered.encode("utf-8"), mode_of(args),
                   as_bool(args, "backup", True))


COPY = Module[CopyArgs](name="copy", run=copy, required=("dest",),
              optional=("content", "src", "mode", "backup"))
TEMPLATE = Module[TemplateArgs](name="template", run=template, required=("src", "dest"),
                  optional=("mode", "backup"))
