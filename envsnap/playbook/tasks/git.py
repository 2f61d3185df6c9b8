"""The `git` task: bring a checkout on the host back to a snapshot, never losing work.

Actions, in the order restore.yml runs them:
  preflight    the commit is there (fetched from the remotes if `fetch`), the patch is whole
               and applies to that commit: all asked before anything moves
  backup       untracked and ignored files the restore may replace, copied aside (gitbackup.py)
  stash        `git stash push --include-untracked` with a message; its sha is returned
               (nothing to do when given sha and patch and the tree already matches them)
  checkout     the commit (its branch when the branch still points there, else detached)
  submodules   each submodule to the snapshot's commit, its own work stashed first and put
               back by a rollback (gitsubmodule.py)
  apply_patch  the snapshot's uncommitted patch, `git apply --check` first; the index gets
               the staged part alone when the snapshot recorded it
  untracked    the snapshot's untracked files whose content it kept
  verify       HEAD is the commit and `git diff HEAD` hashes to the snapshot's patch digest
  put_back     a rollback: the files an earlier restore backed up, written back
Nothing here runs `git reset --hard` or `git clean`: the user's work is only ever stashed.
The git work itself (stash, checkout, fetch, patch) is hostops.git and hostops.patch, shared
with bisect and explain; an action adds check and diff mode and the plan's words.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Callable

from envsnap.errors import ArgError
from envsnap.hostops.git import (
    GitFailure,
    ensure_commit,
    head,
    output,
    plan_checkout,
    porcelain,
    resolve_commit,
    run,
    stash_push,
    switch,
    toplevel,
)
from envsnap.hostops.patch import (
    Patch,
    apply,
    check_on_commit,
    current_digest,
    expected_digest,
    patch_from,
    remove,
    upload,
)
from envsnap.playbook.tasks.base import (
    Context,
    Module,
    ModuleResult,
    TaskData,
    as_bool,
    as_str,
    failed,
    host_path,
)
from envsnap.playbook.tasks.gitargs import GitArgs
from envsnap.playbook.tasks.gitbackup import backup, put_back
from envsnap.playbook.tasks.gitsubmodule import preflight_submodules, sync_submodules
from envsnap.playbook.tasks.untracked import restore_untracked
from envsnap.text import plural

Action = Callable[[Context, str, GitArgs], ModuleResult]


def run_git_task(ctx: Context, args: GitArgs) -> ModuleResult:
    action = ACTIONS[as_str(args, "action")]
    top, problem = toplevel(ctx, host_path(args, "repo"))
    if top is None:
        return failed(problem)
    try:
        result = action(ctx, top, args)
    except GitFailure as exc:
        return failed(str(exc), repo=top)
    result.data.setdefault("repo", top)
    return result


# ---- preflight ----------------------------------------------------------------------------------

def preflight(ctx: Context, top: str, args: GitArgs) -> ModuleResult:
    sha = as_str(args, "sha")
    commit, note = ensure_commit(ctx, top, sha, as_bool(args, "fetch"), probe=ctx.check)
    patch = patch_from(args["patch"]) if args.get("patch") is not None else None
    if patch is not None and patch.data:
        check_on_commit(ctx, top, commit, patch)
    said = f"{top}: {commit[:12]} present" + (f" ({note})" if note else "")
    if patch is not None and patch.data:
        said += f"; its patch ({plural(len(patch.files), 'file')}) applies"
    said += "".join(f"; {line}" for line in preflight_submodules(
        ctx, top, commit, args.get("submodules"), as_bool(args, "fetch")))
    return ModuleResult(changed=bool(note), msg=said, data={"commit": commit})


# ---- stash ------------------------------------------------------------------------------------

def stash(ctx: Context, top: str, args: GitArgs) -> ModuleResult:
    # Submodules are left out: `git stash` cannot take them ("No local changes to save" when
    # a moved submodule is all that changed); the submodules step keeps their work.
    entries = porcelain(ctx, top, submodules=False)
    if not entries:
        only_submodules = bool(porcelain(ctx, top))
        return ModuleResult(msg=f"{top}: " + ("only submodules changed, nothing to stash here "
                                              "(the submodules step keeps their work)"
                                              if only_submodules else
                                              "working tree clean, nothing to stash"))
    if already_there(ctx, top, args):
        return ModuleResult(msg=f"{top}: already as in the snapshot, nothing to stash")
    untracked = sum(entry.startswith("??") for entry in entries)
    what = (f"{plural(len(entries) - untracked, 'changed file')} and "
            f"{plural(untracked, 'untracked file')}")
    listing = "".join(f"  {entry}\n" for entry in entries) if ctx.diff else ""
    if ctx.check:
        return ModuleResult(changed=True, msg=f"{top}: would stash {what}", diff=listing)
    message = as_str(args, "message", f"envsnap: work saved at {ctx.timestamp}")
    after = stash_push(ctx, top, message)
    left = porcelain(ctx, top, submodules=False)
    if left:
        raise GitFailure(f"{top}: stashed as {after[:12]}, but changes remain that git "
                         f"cannot stash: {', '.join(left[:5])}")
    return ModuleResult(changed=True, diff=listing, data={"stash": after, "message": message},
                        msg=f"{top}: stashed {what} as {after[:12]} ({message!r}); get them "
                            f"back with: git -C {top} stash apply --index {after[:12]}")


def already_there(ctx: Context, top: str, args: GitArgs) -> bool:
    """Given the snapshot's sha and patch: the tree is that state, so nothing will move and
    a second restore does not stash the first one's result."""
    if args.get("sha") is None or args.get("patch") is None:
        return False
    wanted = resolve_commit(ctx, top, str(args["sha"]))
    return bool(wanted) and head(ctx, top) == wanted and \
        current_digest(ctx, top) == expected_digest(args["patch"])


# ---- checkout ---------------------------------------------------------------------------------

def checkout(ctx: Context, top: str, args: GitArgs) -> ModuleResult:
    move = plan_checkout(ctx, top, as_str(args, "sha"), str(args.get("branch") or ""),
                         as_bool(args, "fetch"), probe=ctx.check)
    if move.done:
        return ModuleResult(msg=f"{top}: already at {move.commit[:12]}",
                            data={"commit": move.commit})
    diff = moving_summary(ctx, top, move.now, move.commit) if ctx.diff else ""
    if ctx.check:
        return ModuleResult(changed=True, diff=diff, msg=f"{top}: would check out "
                                                           f"{move.where}, HEAD is {move.was}")
    switch(ctx, move)
    return ModuleResult(changed=True, diff=diff,
                        msg=f"{top}: checked out {move.where}, was {move.was}",
                        data={"commit": move.commit, "previous": move.now,
                              "previous_branch": move.branch})


LEAVING_SHOWN = 50   # commits listed in a restore plan's move; the rest are counted


def moving_summary(ctx: Context, top: str, now: str | None, commit: str) -> str:
    if not now:
        return ""
    leaving = output(ctx, top, "log", "--oneline", "--no-decorate", "-n", str(LEAVING_SHOWN),
                     f"{commit}..{now}") or ""
    stat = run(ctx, top, "diff", "--stat=100", now, commit).stdout.rstrip()
    lines = [f"HEAD now {now[:12]}, target {commit[:12]}"]   # as a restore plan says it
    if leaving:
        shown = leaving.splitlines()
        lines += ["commits on HEAD that the target does not have:"]
        lines += [f"  {line}" for line in shown]
        if len(shown) == LEAVING_SHOWN:  # the list stops here: say how many it leaves out
            total = output(ctx, top, "rev-list", "--count", f"{commit}..{now}") or ""
            more = int(total) - len(shown) if total.strip().isdigit() else 0
            if more > 0:
                lines.append(f"  ... {more} more (git log {commit[:12]}..{now[:12]})")
    if stat:
        lines += ["files that change:"] + [f"  {line}" for line in stat.splitlines()]
    return "\n".join(lines) + "\n"


# ---- apply_patch ------------------------------------------------------------------------------

def apply_patch(ctx: Context, top: str, args: GitArgs) -> ModuleResult:
    patch = patch_from(args.get("patch"))
    if not patch.data:
        return ModuleResult(msg=f"{top}: the snapshot has no uncommitted changes to apply")
    if current_digest(ctx, top) == patch.sha256:
        return ModuleResult(msg=f"{top}: patch already applied")
    diff = patch.text if ctx.diff else ""
    base = str(args.get("base") or "")
    if ctx.check:
        return check_patch(ctx, top, patch, base, diff)
    now = head(ctx, top)
    if base and now != resolve_commit(ctx, top, base):
        raise GitFailure(f"{top}: the patch was taken on {base[:12]} but HEAD is "
                         f"{(now or 'nothing')[:12]}: check out {base[:12]} first")
    staged, why_not = staged_part(args.get("staged"))
    quoted = upload(ctx, patch)
    staged_quoted = upload(ctx, staged) if staged is not None and staged.data else ""
    try:
        apply(ctx, top, patch, quoted, None if staged is None else (staged, staged_quoted))
    finally:
        remove(ctx, quoted)
        if staged_quoted:
            remove(ctx, staged_quoted)
    index = "staged and unstaged as at capture" if staged is not None \
        else f"all of it staged: {why_not}"
    return ModuleResult(changed=True, diff=diff, data={"sha256": patch.sha256},
                        msg=f"{top}: applied the snapshot's patch "
                            f"({plural(len(patch.files), 'file')}; {index})")


def staged_part(value: object) -> tuple[Patch | None, str]:
    """The snapshot's staged patch (`git diff --cached` at capture), or None and why the index
    cannot be put back as it was (then the whole patch is staged, as before)."""
    if value is None:
        return None, "the snapshot did not record the index"
    try:
        return patch_from(value), ""
    except GitFailure as exc:
        return None, str(exc)


def check_patch(ctx: Context, top: str, patch: Patch, base: str, diff: str) -> ModuleResult:
    """Check mode: try the patch on the commit it will meet (base, else HEAD)."""
    commit = resolve_commit(ctx, top, base or "HEAD")
    if commit is None:
        return ModuleResult(changed=True, diff=diff, msg=f"{top}: would apply the patch "
                                                         f"once {base[:12]} is fetched")
    check_on_commit(ctx, top, commit, patch)
    return ModuleResult(changed=True, diff=diff, msg=f"{top}: would apply the snapshot's "
                                                     f"patch ({plural(len(patch.files), 'file')})")


# ---- verify -----------------------------------------------------------------------------------

def verify(ctx: Context, top: str, args: GitArgs) -> ModuleResult:
    if args.get("sha") is None and args.get("patch") is None:
        raise ArgError("git: verify needs sha, patch or both")
    drift, facts = [], TaskData()
    if args.get("sha") is not None:
        wanted, now = resolve_commit(ctx, top, str(args["sha"])), head(ctx, top)
        facts["head"] = now
        if not now or now != wanted:
            drift.append(f"HEAD is {(now or 'nothing')[:12]}, expected {str(args['sha'])[:12]}")
    if args.get("patch") is not None:
        digest, expected = current_digest(ctx, top), expected_digest(args["patch"])
        facts["patch_sha256"] = digest
        if digest != expected:
            drift.append(f"uncommitted changes differ from the snapshot's (sha256 "
                         f"{digest[:12]}, expected {expected[:12]})")
    if drift:
        return ModuleResult(failed=True, drift=True, msg=f"{top}: {'; '.join(drift)}",
                            data=facts)
    return ModuleResult(msg=f"{top}: matches the snapshot", data=facts)


def submodules(ctx: Context, top: str, args: GitArgs) -> ModuleResult:
    return sync_submodules(ctx, top, args)


ACTIONS: Mapping[str, Action] = {
    "preflight": preflight, "stash": stash, "checkout": checkout, "submodules": submodules,
    "apply_patch": apply_patch, "untracked": restore_untracked, "verify": verify,
    "backup": backup, "put_back": put_back,
}

MODULE = Module[GitArgs](name="git", run=run_git_task, required=("repo", "action"),
                optional=("sha", "branch", "fetch", "patch", "staged", "base", "message", "files",
                          "backup", "source", "submodules"),
                choices={"action": tuple(ACTIONS)})
