"""`sitecustomize`: write a snapshot's sitecustomize back where the host's python reads it.

The task over hostops.site (which says where it goes and why, and writes it through the
write policy): it adds check mode, the diff, and the messages of a plan.

    action: write      content, path (as recorded), backup (optional), host_wide (optional:
                       may write a sitecustomize every python of the host loads, which a
                       venv's own one would be shadowed by; hostops/site.py says where)
    action: put_back   source: a rollback puts back what an earlier restore saved there
"""
from __future__ import annotations

from typing import Callable, TypedDict

from envsnap.hostops import site
from envsnap.playbook.tasks.base import (
    Context,
    Module,
    ModuleResult,
    as_bool,
    as_str,
    failed,
)
from envsnap.playbook.tasks.hostfile import unified_diff
from envsnap.text import plural


class _Required(TypedDict):
    action: object       # write or put_back


class SiteArgs(_Required, total=False):
    content: object      # write: the snapshot's sitecustomize
    path: object         # write: where it was recorded
    backup: object       # the restore's backup folder on the host
    source: object       # put_back: the backup folder of the restore being undone
    host_wide: object    # write: a sitecustomize outside the python's venv may be written


def write(ctx: Context, args: SiteArgs) -> ModuleResult:
    data = as_str(args, "content").encode("utf-8", "surrogateescape")
    backup = str(args["backup"]) if args.get("backup") else None
    try:
        done = site.write(ctx, data, as_str(args, "path", ""), backup, dry=ctx.check,
                          host_wide=as_bool(args, "host_wide"))
    except site.SiteRefused as exc:
        return failed(str(exc))
    if done.before is None:
        return ModuleResult(msg=f"{done.path} is already as wanted{done.note}",
                            data={"dest": done.path})
    diff = unified_diff(done.path, done.before, data) if ctx.diff else ""
    verb = "update" if done.before.exists else "create"
    if ctx.check:
        return ModuleResult(changed=True, diff=diff, msg=f"would {verb} {done.path}{done.note}",
                            data={"dest": done.path})
    kept = f" (what was there is kept in {backup})" if backup else ""
    return ModuleResult(changed=True, diff=diff, msg=f"{verb}d {done.path}{done.note}{kept}",
                        data={"dest": done.path})


def put_back(ctx: Context, args: SiteArgs) -> ModuleResult:
    source = as_str(args, "source")
    backup = str(args["backup"]) if args.get("backup") else None
    try:
        restored, removed = site.put_back(ctx, source, backup, dry=ctx.check)
    except site.SiteRefused as exc:
        return failed(str(exc))
    if not (restored or removed):
        return ModuleResult(msg="no saved sitecustomize to put back")
    verbs = ("would put back", "would remove") if ctx.check else ("put back", "removed")
    return ModuleResult(changed=True, msg=f"{verbs[0]} {plural(len(restored), 'file')}, "
                                          f"{verbs[1]} {plural(len(removed), 'file')} the "
                                          f"restore made: {', '.join(restored + removed)}")


ACTIONS: dict[str, Callable[[Context, SiteArgs], ModuleResult]] = {"write": write,
                                                                  "put_back": put_back}


def run(ctx: Context, args: SiteArgs) -> ModuleResult:
    return ACTIONS[as_str(args, "action")](ctx, args)


MODULE = Module[SiteArgs](name="sitecustomize", run=run, required=("action",),
                optional=("content", "path", "backup", "source", "host_wide"),
                choices={"action": tuple(ACTIONS)})
