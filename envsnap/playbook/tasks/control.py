"""`fail` and `debug`: a playbook's own checks and notes, e.g. a preflight that refuses."""
from __future__ import annotations

import json
from typing import TypedDict

from envsnap.playbook.tasks.base import Context, Module, ModuleResult, as_str


class MsgArgs(TypedDict, total=False):
    msg: object          # fail: the message; debug: any value, shown as JSON


def fail(ctx: Context, args: MsgArgs) -> ModuleResult:
    return ModuleResult(failed=True, msg=as_str(args, "msg", "failed as the playbook asked"))


def debug(ctx: Context, args: MsgArgs) -> ModuleResult:
    value = args.get("msg", "")
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return ModuleResult(msg=text, data={"value": value})


FAIL = Module[MsgArgs](name="fail", run=fail, optional=("msg",), free_form="msg")
DEBUG = Module[MsgArgs](name="debug", run=debug, optional=("msg",), free_form="msg")
