"""`sitecustomize`: write a snapshot's sitecustomize back where the host's python reads it.

The path a snapshot records is compared, never trusted: the host's python (the one this
host runs envsnap with) is asked for its own site-packages folders and the sitecustomize it
loads now. The recorded path is written when it is `<one of those folders>/sitecustomize.py`
or the one loaded now; else (another python's sitecustomize.py, a colleague's venv) the one
loaded now, when there is one; else (`~/.bashrc`, say) nothing, with one line saying why. The write
goes through the write policy (treefile.py: no symlink followed), and what it replaces, or
that nothing was there, is saved in `backup` so the rollback undoes it.

    action: write      content, path (as recorded), backup (optional)
    action: put_back   source: a rollback puts back what an earlier restore saved there
"""
from __future__ import annotations

import posixpath
from typing import Any

from envsnap.playbook.tasks import treefile
from envsnap.playbook.tasks.base import Context, Module, ModuleResult, as_str, failed
from envsnap.playbook.tasks.hostfile import unified_diff
from envsnap.words import plural

NAME = "sitecustomize.py"


def destination(site: treefile.SitePython, recorded: str) -> tuple[str | None, str]:
    """(the site folder to write into, a note); None and why when there is none."""
    own = {posixpath.join(folder, NAME): folder for folder in site.site_dirs}
    if site.sitecustomize and posixpath.basename(site.sitecustomize) == NAME:
        # the one this python loads now, wherever it reports it (Debian's is in the stdlib)
        own[site.sitecustomize] = posixpath.dirname(site.sitecustomize)
    wanted = posixpath.normpath(recorded) if recorded else ""
    if wanted in own:
        return own[wanted], ""
    if posixpath.basename(wanted) == NAME and site.sitecustomize and site.sitecustomize in own:
        # another python's folders (a colleague's venv): this python's own file instead
        return own[site.sitecustomize], (f" (the snapshot recorded {recorded}; this python "
                                         f"loads {site.sitecustomize})")
    return None, (f"the snapshot records sitecustomize at {recorded}, which is not in this "
                  f"python's site-packages ({', '.join(site.site_dirs) or 'none found'}): "
                  "not written; restore it by hand")


def folders(site: treefile.SitePython) -> list[str]:
    """Every folder `destination` may write into."""
    found = list(site.site_dirs)
    if site.sitecustomize and posixpath.dirname(site.sitecustomize) not in found:
        found.append(posixpath.dirname(site.sitecustomize))
    return found


def write(ctx: Context, args: dict[str, Any]) -> ModuleResult:
    data = as_str(args, "content").encode("utf-8", "surrogateescape")
    folder, note = destination(treefile.site_python(ctx), as_str(args, "path", ""))
    if folder is None:
        return failed(note)
    path = posixpath.join(folder, NAME)
    try:
        current = treefile.read(ctx, folder, NAME, follow_last=True)
        if current.exists and current.data == data:
            return ModuleResult(msg=f"{path} is already as wanted{note}", data={"dest": path})
        before = treefile.read(ctx, folder, NAME)    # refused if it must not be written
        diff = unified_diff(path, before, data) if ctx.diff else ""
        verb = "update" if before.exists else "create"
        if ctx.check:
            return ModuleResult(changed=True, diff=diff, msg=f"would {verb} {path}{note}",
                                data={"dest": path})
        backup = str(args["backup"]) if args.get("backup") else None
        treefile.write(ctx, folder, NAME, data, backup, record_absent=True)
    except treefile.TreeRefused as exc:
        return failed(f"sitecustomize refused: {exc}")
    kept = f" (what was there is kept in {backup})" if backup else ""
    return ModuleResult(changed=True, diff=diff, msg=f"{verb}d {path}{note}{kept}",
                        data={"dest": path})


def put_back(ctx: Context, args: dict[str, Any]) -> ModuleResult:
    source = as_str(args, "source")
    backup = str(args["backup"]) if args.get("backup") else None
    restored, removed = [], []
    try:
        for folder in folders(treefile.site_python(ctx)):
            done = treefile.put_back(ctx, folder, source, backup)
            restored += [posixpath.join(folder, name) for name in done.restored]
            removed += [posixpath.join(folder, name) for name in done.removed]
    except treefile.TreeRefused as exc:
        return failed(f"sitecustomize: cannot put back: {exc}")
    if not (restored or removed):
        return ModuleResult(msg="no saved sitecustomize to put back")
    verbs = ("would put back", "would remove") if ctx.check else ("put back", "removed")
    return ModuleResult(changed=True, msg=f"{verbs[0]} {plural(len(restored), 'file')}, "
                                          f"{verbs[1]} {plural(len(removed), 'file')} the "
                                          f"restore made: {', '.join(restored + removed)}")


ACTIONS = {"write": write, "put_back": put_back}


def run(ctx: Context, args: dict[str, Any]) -> ModuleResult:
    return ACTIONS[as_str(args, "action")](ctx, args)


MODULE = Module(name="sitecustomize", run=run, required=("action",),
                optional=("content", "path", "backup", "source"),
                choices={"action": tuple(ACTIONS)})
