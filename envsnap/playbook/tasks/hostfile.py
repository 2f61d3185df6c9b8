"""Installing a file on the host for the copy, template and env_file tasks: compare, diff,
then (not in check mode) write through hostops.files.
"""
from __future__ import annotations

import difflib

from envsnap.hostops.files import FileState, read_file, write_file
from envsnap.playbook.tasks.base import Context, ModuleResult, failed

MAX_DIFF_BYTES = 256 * 1024


def unified_diff(path: str, before: FileState, after: bytes) -> str:
    old = before.data if before.kind == "file" else b""
    if len(old) > MAX_DIFF_BYTES or len(after) > MAX_DIFF_BYTES:
        return f"{path}: {len(old)} -> {len(after)} bytes (too large to show)\n"
    try:
        old_text, new_text = old.decode("utf-8"), after.decode("utf-8")
    except UnicodeDecodeError:
        return f"{path}: binary content, {len(old)} -> {len(after)} bytes\n"
    lines = difflib.unified_diff(old_text.splitlines(keepends=True),
                                 new_text.splitlines(keepends=True),
                                 fromfile=f"{path} (on host)" if before.exists else "/dev/null",
                                 tofile=f"{path} (after)")
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
                   for line in lines)


def install(ctx: Context, path: str, data: bytes, mode: str = "",
            backup: bool = True) -> ModuleResult:
    """The whole of copy/template/env_file: compare, diff, then (not in check mode) write."""
    before = read_file(ctx, path)
    if before.kind == "other":
        return failed(f"{path} exists and is not a regular file")
    if before.data == data and before.exists and (not mode or before.mode == mode.lstrip("0")):
        return ModuleResult(msg=f"{path} is already as wanted", data={"dest": path})
    diff = unified_diff(path, before, data) if ctx.diff else ""
    verb = "update" if before.exists else "create"
    if ctx.check:
        return ModuleResult(changed=True, diff=diff, msg=f"would {verb} {path}",
                            data={"dest": path})
    stamp = (ctx.timestamp or "now") if backup and before.exists else ""
    saved = write_file(ctx, path, data, mode, stamp)
    note = f" (previous kept as {saved})" if saved else ""
    return ModuleResult(changed=True, diff=diff, msg=f"{verb}d {path}{note}",
                        data={"dest": path, "backup": saved})
