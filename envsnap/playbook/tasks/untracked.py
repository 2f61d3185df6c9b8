"""`git: action=untracked`: put back the untracked files a snapshot kept the content of.

A snapshot keeps small text files whole; binary, large, redacted files and symlinks are
only described. Those are reported by name as not restorable, never silently dropped.
Each write goes through the write policy (treefile.py): inside the checkout, never under
`.git`, never through a symlink; a name the policy refuses fails the task, in the plan too.
What a write replaces is saved in `backup` (the restore's backup folder) first.
"""
from __future__ import annotations

import posixpath
from collections.abc import Mapping

from envsnap import yamlread
from envsnap.errors import ArgError
from envsnap.hostops import treefile
from envsnap.hostops.git import GitFailure
from envsnap.hostops.patch import patch_from
from envsnap.playbook.tasks.base import Context, ModuleResult, as_mapping
from envsnap.playbook.tasks.gitargs import GitArgs
from envsnap.playbook.tasks.hostfile import unified_diff


def restore_untracked(ctx: Context, top: str, args: GitArgs) -> ModuleResult:
    files = as_mapping(args, "files")
    patched = patched_paths(args.get("patch"))
    wanted: dict[str, bytes] = {}
    skipped = []
    for name, value in sorted(files.items()):
        facts = file_facts(str(name), value)
        reason = unrestorable(facts)
        if reason:
            skipped.append(f"{name} ({reason})")
            continue
        through = [folder for folder in parents(str(name)) if folder in patched]
        if through:   # the patch makes it a file or a symlink: the plan cannot see that yet
            raise GitFailure(f"{top}: untracked file refused: {name} would be written "
                             f"through {through[0]}, which the snapshot's patch writes")
        wanted[str(name)] = str(facts["content"]).encode("utf-8", "surrogateescape")
    try:
        written, diff = put_files(ctx, top, wanted, backup_arg(args))
    except treefile.TreeRefused as exc:
        raise GitFailure(f"{top}: untracked file refused: {exc}") from None
    return summary(ctx, top, written, skipped, diff)


def patched_paths(value: object) -> set[str]:
    """The paths the snapshot's patch writes (the untracked step comes after it)."""
    if value is None:
        return set()
    try:
        return set(patch_from(value).files)
    except GitFailure:
        return set()     # a patch that cannot apply has already stopped the restore


def parents(name: str) -> list[str]:
    parts = name.split("/")
    return ["/".join(parts[:depth]) for depth in range(1, len(parts))]


def backup_arg(args: GitArgs) -> str | None:
    value = args.get("backup")
    return str(value) if value else None


def put_files(ctx: Context, top: str, wanted: dict[str, bytes],
              backup: str | None) -> tuple[list[str], str]:
    """(the names that change, their diff): compared first, written only outside check
    mode; one call on the host for all the reads, one for all the writes."""
    if not wanted:
        return [], ""
    before = treefile.read_many(ctx, top, list(wanted))
    changing = {name: data for name, data in wanted.items()
                if not (before[name].exists and before[name].data == data)}
    diff = "".join(unified_diff(posixpath.join(top, name), before[name], data)
                   for name, data in changing.items()) if ctx.diff else ""
    if changing and not ctx.check:
        treefile.write_many(ctx, top, changing, backup)
    return list(changing), diff


def file_facts(name: str, facts: object) -> Mapping[str, object]:
    """One untracked file's record, as the snapshot's repo record holds it."""
    found = yamlread.as_mapping(facts)
    if found is None:
        raise ArgError(f"git: files: {name!r} must map to the snapshot's file facts")
    return found


# Why a described file cannot be written back, by what the agent says it skipped
SKIPPED = {"binary": "binary content not recorded",
           "over cap": "content over the size cap, not recorded",
           "not a regular file": "not a regular file"}


def unrestorable(facts: Mapping[str, object]) -> str:
    """Why envsnap cannot write this untracked file back, or "" when it can: the one text
    the task and the restore's report (restore/unwritable.py) both say."""
    if facts.get("redacted"):
        return "secrets were masked at capture"
    if "content" not in facts:
        if "symlink" in facts:
            return "a symlink, not written back"
        skipped = str(facts.get("content_skipped") or "")
        return SKIPPED.get(skipped) or skipped or str(facts.get("error") or
                                                      "content not recorded")
    return ""


def summary(ctx: Context, top: str, written: list[str], skipped: list[str],
            diff: str) -> ModuleResult:
    verb = "would write" if ctx.check else "wrote"
    parts = [f"{verb} {len(written)} untracked files"] if written else ["untracked files in place"]
    if skipped:
        parts.append(f"not restorable: {', '.join(skipped)}")
    return ModuleResult(changed=bool(written), diff=diff, msg=f"{top}: {'; '.join(parts)}",
                        data={"written": written, "not_restorable": skipped})
