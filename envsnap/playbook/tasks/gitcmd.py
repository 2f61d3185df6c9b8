"""Running git on the host for the git task module: one way to build every command line.

The same `-c` flags as the capture agent (envsnap/agent/gitrun.py): output must not depend
on the user's taste, the digest of `git diff HEAD` must be computed exactly as at capture,
and a checkout owned by another user (root restoring the ml user's tree) must still work.
"""
from __future__ import annotations

import shlex

from envsnap.agent.gitrun import CONFIG_FLAGS
from envsnap.hosts.transport import Result
from envsnap.playbook.tasks.base import Context, last_line

# C messages (we parse "patch failed: f:12"); never ask for a password on a fetch.
ENV = "LC_ALL=C GIT_TERMINAL_PROMPT=0"
# `git stash` writes commits; a host's root often has no identity, and git then refuses.
# The user's own identity, when configured, is left alone.
IDENTITY = ('{git} config user.name >/dev/null 2>&1 || '
            'export GIT_AUTHOR_NAME="${{GIT_AUTHOR_NAME:-envsnap}}" '
            'GIT_COMMITTER_NAME="${{GIT_COMMITTER_NAME:-envsnap}}"; '
            '{git} config user.email >/dev/null 2>&1 || '
            'export GIT_AUTHOR_EMAIL="${{GIT_AUTHOR_EMAIL:-envsnap@localhost}}" '
            'GIT_COMMITTER_EMAIL="${{GIT_COMMITTER_EMAIL:-envsnap@localhost}}"; ')


class GitFailure(Exception):
    """This repository cannot be brought to the wanted state; the message says why."""


# No fsmonitor command runs for a restore: defence in depth, should a `.git/config` naming
# one ever reach a checkout (the write policy refuses to write under .git). The checkout's
# own hooks do run, as for any git command the user types.
NO_COMMANDS = ["-c", "core.fsmonitor=false"]


def git_prefix(top: str) -> str:
    flags = " ".join(shlex.quote(flag) for flag in CONFIG_FLAGS + NO_COMMANDS)
    return f"git -C {shlex.quote(top)} {flags}"


def command(top: str, *args: str) -> str:
    return f"{ENV} {git_prefix(top)} {' '.join(shlex.quote(arg) for arg in args)}"


def run(ctx: Context, top: str, *args: str) -> Result:
    return ctx.sh(command(top, *args))


def run_as_author(ctx: Context, top: str, *args: str) -> Result:
    identity = IDENTITY.format(git=git_prefix(top))
    return ctx.sh(f"{identity}{command(top, *args)}")


def output(ctx: Context, top: str, *args: str) -> str | None:
    """stdout of a read that may fail (a missing ref): None then."""
    result = run(ctx, top, *args)
    return result.stdout.strip() if result.exit_code == 0 else None


def complaint(result: Result) -> str:
    """git's own words: its error lines and the file names it lists under them."""
    said: list[str] = []
    for line in result.stderr.splitlines():
        if line.startswith(("error:", "fatal:")):
            said.append(line.strip())
        elif line.startswith("\t") and said and len(said) < 8:
            said[-1] += f" {line.strip()}"
    return "; ".join(said) or last_line(result.stderr) or last_line(result.stdout) or \
        f"exit {result.exit_code}"


def toplevel(ctx: Context, repo: str) -> tuple[str | None, str]:
    """The checkout's top folder (patches are relative to it), or None and why not."""
    result = ctx.sh(f"{ENV} git -C {shlex.quote(repo)} -c safe.directory='*' "
                    "rev-parse --show-toplevel")
    if result.exit_code != 0:
        return None, f"{repo}: not a git checkout ({complaint(result)})"
    return result.stdout.strip(), ""


def resolve_commit(ctx: Context, top: str, rev: str) -> str | None:
    return output(ctx, top, "rev-parse", "--verify", "-q", f"{rev}^{{commit}}")


def head(ctx: Context, top: str) -> str | None:
    return resolve_commit(ctx, top, "HEAD")


def current_branch(ctx: Context, top: str) -> str | None:
    return output(ctx, top, "symbolic-ref", "-q", "--short", "HEAD")


def porcelain(ctx: Context, top: str, submodules: bool = True) -> list[str]:
    """Changed and untracked paths, as `XY path` (ignored files are not work to save).
    submodules=False leaves out submodules (moved, or with work of their own), as `git stash`
    does: it neither saves nor counts them."""
    flags = () if submodules else ("--ignore-submodules=all",)
    result = run(ctx, top, "status", "--porcelain=v1", "-z", "--untracked-files=all", *flags)
    if result.exit_code != 0:
        raise GitFailure(f"{top}: git status failed: {complaint(result)}")
    fields = result.stdout.split("\0")
    entries, index = [], 0
    while index < len(fields):
        entry = fields[index]
        index += 1
        if not entry:
            continue
        entries.append(entry)
        if entry[0] in "RC":  # a rename carries its old name in the next field
            index += 1
    return entries
