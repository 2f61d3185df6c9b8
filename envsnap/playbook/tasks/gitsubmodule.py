"""`git: action=submodules`: each submodule of a checkout brought to the snapshot's commit.

What `git submodule update --init` does, but to the commit the snapshot saw checked out in
each submodule (the one its superproject recorded, when it was not checked out), and never
losing work: a submodule's own uncommitted work is stashed in its own repository first (git
stash in the superproject cannot take it), the stash is noted in the restore's backup folder,
and the rollback of that restore (`source`: the backup folder of the restore being undone)
applies it again once the submodule is back on its commit.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from envsnap import yamlread
from envsnap.errors import ArgError
from envsnap.hostops import treefile
from envsnap.hostops.git import (
    GitFailure,
    complaint,
    ensure_commit,
    head,
    output,
    porcelain,
    run,
    stash_push,
)
from envsnap.playbook.tasks.base import Context, ModuleResult, SubmoduleMove, as_bool, as_str
from envsnap.playbook.tasks.gitargs import GitArgs
from envsnap.shape import is_mapping
from envsnap.text import plural

COMMIT = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")


@dataclass(frozen=True)
class Wanted:
    path: str        # relative to the superproject's top folder
    commit: str      # checked out at capture, else the one the superproject recorded
    dirty: bool      # the snapshot saw work of the submodule's own in it


def wanted_submodules(value: object) -> list[Wanted]:
    """The snapshot's `submodules` record, each with a full commit to go to."""
    if value is None:
        return []
    submodules = yamlread.as_mapping(value)
    if submodules is None:
        raise ArgError("git: submodules must map each submodule path to "
                       "{recorded, checked_out}")
    found = []
    for path, record in sorted(submodules.items()):
        if not is_mapping(record):
            continue
        commit = record.get("checked_out") or record.get("recorded")
        if isinstance(commit, str) and COMMIT.match(commit):
            found.append(Wanted(safe_path(str(path)), commit,
                                bool(record.get("modified") or record.get("untracked"))))
    return found


def safe_path(path: str) -> str:
    """A submodule path stays inside its superproject and out of .git (a foreign snapshot's
    record is data, not a place to write)."""
    parts = path.split("/")
    if not path or path.startswith("/") or any(p in ("", ".", "..", ".git") for p in parts):
        raise GitFailure(f"submodule path {path!r} leaves its checkout: refused")
    return path


def is_gitlink(ctx: Context, top: str, path: str, rev: str) -> bool:
    """`path` is a submodule in commit `rev` of the superproject, not a folder of its own
    (one added but not committed at capture is the patch's business, not this step's)."""
    listed = output(ctx, top, "ls-tree", rev, "--", path) or ""
    return listed.startswith("160000 ")


def not_committed(path: str, rev: str) -> str:
    return f"submodule {path} is not in commit {rev[:12]}: left alone"


def submodule_top(ctx: Context, top: str, path: str) -> str | None:
    """The submodule's own top folder, or None when it is not checked out (not initialized)."""
    where = f"{top}/{path}"
    found = output(ctx, where, "rev-parse", "--show-toplevel")
    return where if found == where else None


# ---- preflight --------------------------------------------------------------------------------

def preflight_submodules(ctx: Context, top: str, commit: str, value: object,
                         fetch: bool) -> list[str]:
    """Before anything moves: each submodule's commit is there (or fetched), so no restore
    stops half-way on a submodule."""
    said = []
    for want in wanted_submodules(value):
        if not is_gitlink(ctx, top, want.path, commit):
            said.append(not_committed(want.path, commit))
            continue
        sub = submodule_top(ctx, top, want.path)
        if sub is None:
            said.append(f"submodule {want.path} is not checked out: "
                        "git submodule update --init will be run")
            continue
        found, note = ensure_commit(ctx, sub, want.commit, fetch, probe=ctx.check)
        said.append(f"submodule {want.path}: {found[:12]} present" +
                    (f" ({note})" if note else ""))
    return said


# ---- the step -----------------------------------------------------------------------------------

@dataclass
class Step:
    """What one submodule's sync did (or, in check mode, would do)."""

    path: str
    said: list[str]
    changed: bool = False
    stash: str | None = None       # its work, stashed in its own repository
    previous: str | None = None    # its HEAD before


def sync_submodules(ctx: Context, top: str, args: GitArgs) -> ModuleResult:
    message = as_str(args, "message", f"envsnap: work saved at {ctx.timestamp}")
    backup = str(args["backup"]) if args.get("backup") else None
    source = str(args["source"]) if args.get("source") else None
    fetch = as_bool(args, "fetch", True)
    steps = [sync_one(ctx, top, want, message, backup, source, fetch)
             for want in wanted_submodules(args.get("submodules"))]
    said = [f"{step.path}: {', '.join(step.said)}" for step in steps if step.said]
    data = {step.path: SubmoduleMove(stash=step.stash, previous=step.previous)
            for step in steps}
    return ModuleResult(changed=any(step.changed for step in steps),
                        msg=f"{top}: " + ("; ".join(said) or "submodules already at the "
                                          "snapshot's commits"),
                        data={"submodules": data})


def sync_one(ctx: Context, top: str, want: Wanted, message: str, backup: str | None,
             source: str | None, fetch: bool) -> Step:
    step = Step(want.path, [])
    if not is_gitlink(ctx, top, want.path, "HEAD"):
        step.said.append("not a submodule in the commit checked out: left alone")
        return step
    sub = submodule_top(ctx, top, want.path)
    if sub is None:
        if ctx.check:
            step.said.append(f"would initialize it (git submodule update --init) and check "
                             f"out {want.commit[:12]}")
            step.changed = True
            return step
        sub = initialize(ctx, top, want.path)
        step.said.append("initialized (git submodule update --init)")
        step.changed = True
    now = head(ctx, sub)
    step.previous = now
    entries = porcelain(ctx, sub)
    # Work in it at the snapshot's commit, where the snapshot saw work too: already as
    # recorded as far as anyone can tell (a resumed rollback has put it back already).
    keep = bool(entries) and want.dirty and now == want.commit
    if entries and not keep:
        stash_work(ctx, sub, entries, message, backup, step)
    if now != want.commit:
        move(ctx, sub, want.commit, now, fetch, step)
    put_back = False
    if keep:
        step.said.append("its own uncommitted work kept as it is")
    elif source:
        put_back = put_back_work(ctx, sub, source, backup, step)
    if want.dirty and not (keep or put_back):
        step.said.append("the snapshot saw uncommitted work in it that it does not record: "
                         "envsnap cannot put that back")
    return step


def initialize(ctx: Context, top: str, path: str) -> str:
    done = run(ctx, top, "submodule", "update", "--init", "--", path)
    sub = submodule_top(ctx, top, path)
    if done.exit_code != 0 or sub is None:
        raise GitFailure(f"{top}: git submodule update --init {path} failed: {complaint(done)}")
    return sub


def stash_work(ctx: Context, sub: str, entries: list[str], message: str, backup: str | None,
               step: Step) -> None:
    untracked = sum(entry.startswith("??") for entry in entries)
    what = (f"{plural(len(entries) - untracked, 'changed file')} and "
            f"{plural(untracked, 'untracked file')}")
    step.changed = True
    if ctx.check:
        step.said.append(f"would stash its own {what}")
        return
    after = stash_push(ctx, sub, message)
    if backup:   # so the rollback of this restore applies it again
        treefile.note_stash(ctx, sub, after, backup)
    step.stash = after
    step.said.append(f"stashed its own {what} as {after[:12]} (git -C {sub} stash apply "
                     f"--index {after[:12]})")


def move(ctx: Context, sub: str, commit: str, now: str | None, fetch: bool,
         step: Step) -> None:
    step.changed = True
    was = (now or "no commit")[:12]
    if ctx.check:
        step.said.append(f"would check out {commit[:12]} (detached), HEAD is {was}")
        return
    ensure_commit(ctx, sub, commit, fetch)
    result = run(ctx, sub, "checkout", "-q", "--detach", commit)
    if result.exit_code != 0:
        raise GitFailure(f"{sub}: git checkout {commit[:12]} failed: {complaint(result)}")
    step.said.append(f"checked out {commit[:12]} (detached), was {was}")


def put_back_work(ctx: Context, sub: str, source: str, backup: str | None, step: Step) -> bool:
    """A rollback: the work the restore being undone stashed in this submodule, applied
    (in check mode: to be); False when it had stashed none."""
    try:
        saved = treefile.put_back(ctx, sub, source, backup, dry=ctx.check).stash
    except treefile.TreeRefused as exc:
        raise GitFailure(f"{sub}: cannot read what the restore being undone saved: {exc}") \
            from None
    if saved is None:
        return False
    if not COMMIT.match(saved):
        raise GitFailure(f"{sub}: the backup names no stash commit ({saved[:40]!r})")
    step.changed = True
    if ctx.check:
        step.said.append(f"would stash apply --index {saved[:12]} (its work before the "
                         "restore being undone)")
        return True
    applied = run(ctx, sub, "stash", "apply", "--index", saved)
    if applied.exit_code != 0:
        raise GitFailure(f"{sub}: git stash apply --index {saved[:12]} failed (the stash is "
                         f"still there): {complaint(applied)}")
    step.said.append(f"put back its work before the restore being undone (stash apply "
                     f"--index {saved[:12]})")
    return True
