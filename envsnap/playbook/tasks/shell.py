"""`shell`: run a command on the host. In check mode it is skipped (it could change
anything), unless the task says `check_mode: false` because the command only reads."""
from __future__ import annotations

import shlex
from typing import TypedDict

from envsnap.errors import ArgError
from envsnap.hostops.shell import last_line, quote_path
from envsnap.playbook.tasks.base import (
    Context,
    Module,
    ModuleResult,
    TaskData,
    as_mapping,
    as_number,
    as_str,
)
from envsnap.playbook.tasks.env_file import NAME


class _Required(TypedDict):
    cmd: object


class ShellArgs(_Required, total=False):
    chdir: object
    creates: object      # a path: when it exists, the command is not run
    env: object          # a mapping of variable names to values
    timeout: object      # seconds


def shell(ctx: Context, args: ShellArgs) -> ModuleResult:
    cmd = as_str(args, "cmd")
    if args.get("creates") and exists(ctx, str(args["creates"])):
        return ModuleResult(skipped=True, msg=f"{args['creates']} exists")
    if ctx.check:
        return ModuleResult(skipped=True, msg="skipped in check mode (check_mode: false runs it)")
    result = ctx.sh(full_command(cmd, args), timeout_of(args))
    data = TaskData(cmd=cmd, rc=result.exit_code, stdout=result.stdout.rstrip("\n"),
                    stderr=result.stderr.rstrip("\n"))
    if result.exit_code != 0:
        why = last_line(result.stderr) or last_line(result.stdout)
        return ModuleResult(failed=True, msg=f"exit {result.exit_code}: {why}", data=data)
    return ModuleResult(changed=True, msg=last_line(result.stdout), data=data)


def exists(ctx: Context, path: str) -> bool:
    return ctx.sh(f"test -e {quote_path(path)}").exit_code == 0


def full_command(cmd: str, args: ShellArgs) -> str:
    env = as_mapping(args, "env")
    for name in env:
        if not NAME.match(str(name)):
            raise ArgError(f"shell: {name!r} is not a variable name")
    exports = "".join(f"export {name}={shlex.quote(str(value))}; " for name, value in env.items())
    chdir = f"cd {quote_path(str(args['chdir']))} && " if args.get("chdir") else ""
    # A subshell, so `exit` in cmd or a failed cd reports its status instead of escaping.
    return f"(\n{exports}{chdir}{cmd}\n)"


def timeout_of(args: ShellArgs) -> float | None:
    if args.get("timeout") is None:
        return None
    seconds = as_number(args, "timeout", 0.0)
    if seconds <= 0:
        raise ArgError(f"shell: timeout must be more than 0 seconds, not {args['timeout']!r}")
    return seconds


MODULE = Module[ShellArgs](name="shell", run=shell, required=("cmd",),
                optional=("chdir", "creates", "env", "timeout"), free_form="cmd")
