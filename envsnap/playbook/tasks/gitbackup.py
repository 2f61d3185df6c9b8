"""`git: action=backup` and `action=put_back`: what git itself would not keep safe.

A stash keeps tracked changes and untracked files, but a checkout replaces an *ignored*
file that the target commit tracks without a word, and a write of the snapshot's untracked
files replaces an ignored file of that name. `backup` copies every such file (and every
untracked one, whose content a rollback point may not hold: binary, large) into the
restore's backup folder on the host, named after its rollback point, before anything moves.
`put_back`, run when that rollback point is restored, writes them back byte for byte.
"""
from __future__ import annotations

from envsnap.hostops import treefile
from envsnap.hostops.git import GitFailure, resolve_commit
from envsnap.hostops.patch import patch_from
from envsnap.playbook.tasks.base import Context, ModuleResult, as_mapping, as_str
from envsnap.playbook.tasks.gitargs import GitArgs
from envsnap.text import plural


def backup(ctx: Context, top: str, args: GitArgs) -> ModuleResult:
    folder = as_str(args, "backup")
    if ctx.check:
        return ModuleResult(msg=f"{top}: untracked and ignored files it may replace are "
                                f"saved in {folder} first")
    names = [str(name) for name in as_mapping(args, "files")]
    if args.get("patch") is not None:
        try:
            names += patch_from(args["patch"]).files
        except GitFailure:
            pass           # preflight has already said why this patch cannot be applied
    commit = resolve_commit(ctx, top, str(args["sha"])) if args.get("sha") else None
    try:
        saved = treefile.backup_repo(ctx, top, commit, names, folder)
    except treefile.TreeRefused as exc:
        raise GitFailure(f"{top}: cannot back up: {exc}") from None
    return ModuleResult(msg=f"{top}: saved {plural(len(saved), 'untracked or ignored file')} "
                            f"in {folder}", data={"saved": saved})


def put_back(ctx: Context, top: str, args: GitArgs) -> ModuleResult:
    source = as_str(args, "source")
    backup = str(args["backup"]) if args.get("backup") else None
    try:
        done = treefile.put_back(ctx, top, source, backup, dry=ctx.check)
    except treefile.TreeRefused as exc:
        raise GitFailure(f"{top}: cannot put back a saved file: {exc}") from None
    if not (done.restored or done.removed):
        return ModuleResult(msg=f"{top}: no saved file to put back")
    verb = "would put back" if ctx.check else "put back"
    said = [f"{verb} {', '.join(done.restored)}"] if done.restored else []
    said += [f"{'would remove' if ctx.check else 'removed'} {', '.join(done.removed)} "
             "(made by the restore)"] if done.removed else []
    return ModuleResult(changed=True, msg=f"{top}: {'; '.join(said)} from {source}",
                        data={"restored": done.restored, "removed": done.removed})
