"""`git: action=untracked`: put back the untracked files a snapshot kept the content of.

A snapshot keeps small text files whole; binary, large, redacted files and symlinks are
only described. Those are reported by name as not restorable, never silently dropped.
"""
from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any

from envsnap.playbook.tasks.base import ArgError, Context, ModuleResult, as_mapping
from envsnap.playbook.tasks.gitcmd import GitFailure
from envsnap.playbook.tasks.hostfile import install


def restore_untracked(ctx: Context, top: str, args: dict[str, Any]) -> ModuleResult:
    files = as_mapping(args, "files")
    written, diffs, skipped = [], [], []
    for name, facts in sorted(files.items()):
        reason = unrestorable(str(name), facts)
        if reason:
            skipped.append(f"{name} ({reason})")
            continue
        result = install(ctx, posixpath.join(top, str(name)), str(facts["content"]).encode())
        if result.failed:
            raise GitFailure(f"{top}: {result.msg}")
        written += [str(name)] if result.changed else []
        diffs.append(result.diff)
    return summary(ctx, top, written, skipped, "".join(diffs))


def unrestorable(name: str, facts: Any) -> str:
    if not isinstance(facts, Mapping):
        raise ArgError(f"git: files: {name!r} must map to the snapshot's file facts")
    if name.startswith("/") or ".." in name.split("/"):
        return "outside the checkout"
    if facts.get("redacted"):
        return "secrets were masked at capture"
    if "content" not in facts:
        return str(facts.get("content_skipped") or facts.get("error") or
                   ("symlink" if "symlink" in facts else "content not kept"))
    return ""


def summary(ctx: Context, top: str, written: list[str], skipped: list[str],
            diff: str) -> ModuleResult:
    verb = "would write" if ctx.check else "wrote"
    parts = [f"{verb} {len(written)} untracked files"] if written else ["untracked files in place"]
    if skipped:
        parts.append(f"not restorable: {', '.join(skipped)}")
    return ModuleResult(changed=bool(written), diff=diff, msg=f"{top}: {'; '.join(parts)}",
                        data={"written": written, "not_restorable": skipped})
