"""The one gate for every command that acts on a host from a snapshot, and its review.

A snapshot envsnap did not sign for this user (snapshot/provenance.py) may have been written
by anyone, so before a command acts on a host with it (restore and `restore --abort`, both
endpoints of bisect, explain, play's `-e snapshot=` or a host var naming one) the user sees,
read from the snapshot alone, all the command would take from it: every file it would write
(with its size), every command and interpreter it would run, every environment variable it
would start a process with, flagged where it changes how a process starts (`STARTUP`:
PYTHONPATH, LD_PRELOAD, BASH_ENV, ...); `trust` shows the same before it adopts one. Then
`gate` lets the command go on only with consent (`--trust-foreign`, or the label typed at a
terminal); `--check` shows it and changes nothing. A snapshot of the user's own passes
unshown. Each command builds its `ForeignPlan` (the restore's is `foreign_plan`), the CLI
prints `review_lines` (cli/options.py `review_foreign`): one review, one consent.
"""
from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from envsnap.errors import DeclinedError
from envsnap.snapshot import customize as customize_words
from envsnap.snapshot import document as snap
from envsnap.snapshot.provenance import Provenance
from envsnap.text import visible_line

if TYPE_CHECKING:
    from envsnap.snapshot.records import Blob, Repo, Snapshot, Submodule

DIFF_HEADER = re.compile(r"^diff --git a/(.*?) b/(.*)$")
# Variables that change how a process starts (what it loads or runs before its own code):
# shown flagged in a review, whatever their value.
STARTUP = frozenset({
    "PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "PYTHONUSERBASE", "PYTHONEXECUTABLE",
    "PYTHONINSPECT", "PYTHONBREAKPOINT", "PYTHONWARNINGS", "PYTHONPLATLIBDIR", "PYTHONSAFEPATH",
    "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "LD_BIND_NOW", "BASH_ENV", "ENV", "PATH",
    "SHELLOPTS", "PS4", "PROMPT_COMMAND", "PERL5OPT", "PERL5LIB", "RUBYOPT", "NODE_OPTIONS",
    "GIT_EXEC_PATH", "GIT_SSH", "GIT_SSH_COMMAND", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM",
    "CUDA_INJECTION64_PATH", "NCCL_NET_PLUGIN", "NCCL_TUNER_PLUGIN", "NCCL_PROFILER_PLUGIN",
    "MALLOC_CONF", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR",
})


@dataclass(frozen=True)
class PlannedWrite:
    path: str              # on the host
    size: int | None       # bytes written (a patched file: the bytes of its diff); None unknown
    what: str              # "untracked file", "patched", "sitecustomize"


@dataclass(frozen=True)
class ForeignPlan:
    """What a command would take from a foreign snapshot: its review."""

    label: str
    host: str
    provenance: Provenance
    writes: tuple[PlannedWrite, ...]
    commands: tuple[str, ...]
    needs_consent: bool    # False under --check or --trust-foreign: shown, not asked
    left_alone: tuple[str, ...] = ()   # the snapshot's checkouts nobody named
    env: tuple[tuple[str, str], ...] = ()   # (name, value) a process would be started with
    doing: str = "restoring it"        # what the command does with it, for the review


def startup_variable(name: str) -> bool:
    return name in STARTUP or name.startswith(("LD_", "DYLD_"))


def review_lines(plan: ForeignPlan) -> list[str]:
    """All a foreign snapshot would make the command do: every write with its size, every
    command, every variable, whether or not the host has drifted from it. One line each,
    newlines and tabs escaped too: the exact bytes that would be written or run."""
    lines = [f"snapshot {visible_line(plan.label)} is foreign ({plan.provenance.foreign}): not "
             f"signed with your key, so here is everything {plan.doing} could do to "
             f"{visible_line(plan.host)}:"]
    lines.append(f"  files it would write ({len(plan.writes)}):")
    lines += [f"    {visible_line(write.path)}  ({write.what}: {bytes_text(write.size)})"
              for write in plan.writes] or ["    none"]
    lines.append(f"  commands it would run ({len(plan.commands)}):")
    lines += [f"    {visible_line(command)}" for command in plan.commands] or ["    none"]
    if plan.env:
        lines.append(f"  variables it would start a process with ({len(plan.env)}):")
        lines += [f"    {visible_line(name)}={visible_line(value)}" +
                  ("  (changes how a process starts)" if startup_variable(name) else "")
                  for name, value in plan.env]
    if plan.left_alone:
        lines.append("  checkouts it records that nobody named (left alone; --repo PATH "
                     f"names one): {', '.join(visible_line(p) for p in plan.left_alone)}")
    return lines


def gate(plan: ForeignPlan, review: Callable[[ForeignPlan], bool] | None,
         action: str = "") -> None:
    """Go on only with consent: a foreign snapshot's review is shown (`review` prints it and,
    at a terminal, may ask); refused, before the host is touched, unless --check or
    --trust-foreign settled it or the person consented. `plan.provenance.mine`: no review."""
    if plan.provenance.mine:
        return
    consented = review(plan) if review is not None else False
    if plan.needs_consent and not consented:
        raise DeclinedError(f"nothing was changed on {plan.host}: snapshot {plan.label!r} is "
                            f"foreign ({plan.provenance.foreign}); pass --trust-foreign to "
                            f"{action or 'go on'} as shown above, or adopt it first with "
                            f"`envsnap trust {plan.label}`")


def interpreter_command(python: str) -> str:
    """The interpreter a snapshot names to run envsnap's agent (and so its .pth lines)."""
    return f"{python} (the snapshot's recorded python: runs envsnap's agent)"


def foreign_plan(document: Snapshot, label: str, host: str, provenance: Provenance,
                 *, repos: Sequence[str], pip: bool, rerun: str | None,
                 needs_consent: bool, serve: str | None = None,
                 env: Mapping[str, str] | None = None, host_wide: bool = False) -> ForeignPlan:
    """repos: the snapshot's checkouts this restore may touch (restore/policy.py: those the
    user named); rerun: the command --rerun would run, None without --rerun; serve: the
    server --rerun --serve would start; env: what the snapshot would start it with;
    host_wide: --host-wide, without which a sitecustomize outside the recorded venv is not
    written."""
    writes: list[PlannedWrite] = []
    commands = [capture_command(repos)]
    # restore.yml skips a repo without a commit, and a checkout nobody named is left alone
    for path, repo in sorted(snap.repos_with_head(document).items()):
        if path not in repos:
            continue
        repo_writes, repo_commands = repo_plan(path, repo)
        writes += repo_writes
        commands += repo_commands
    writes += sitecustomize_writes(document, host_wide)
    if pip:
        commands += [f"pip install --no-deps {shlex.quote(f'{name}=={version}')}"
                     for name, version in sorted(snap.packages(document).items())
                     if isinstance(version, str)]
    if rerun:
        commands.append(f"benchmark (--rerun): {rerun}")
    if serve:
        commands.append(f"server (--rerun --serve): {serve}")
    left_alone = tuple(path for path in recorded_repos(document) if path not in repos)
    return ForeignPlan(label=label, host=host, provenance=provenance, writes=tuple(writes),
                       commands=tuple(commands), needs_consent=needs_consent,
                       left_alone=left_alone, env=tuple(sorted((env or {}).items())))


def capture_command(repos: Sequence[str]) -> str:
    """The captures before and after run git in the checkouts restored."""
    return "envsnap agent: capture the host before and after" + \
        (f" (git status in {', '.join(repos)})" if repos else "")


def submodule_commands(path: str, submodules: dict[str, Submodule]) -> list[str]:
    """What the submodules step runs in each submodule the snapshot records (gitsubmodule.py)."""
    commands = []
    for sub, record in sorted(submodules.items()):
        commit = record.get("checked_out") or record.get("recorded") or "?"
        quoted = shlex.quote(posixpath.join(path, sub))
        commands += [f"git -C {shlex.quote(path)} submodule update --init -- "
                     f"{shlex.quote(sub)}  (only if it is not checked out)",
                     f"git -C {quoted} stash push --include-untracked  (only if there is work)",
                     f"git -C {quoted} checkout --detach {commit}"]
    return commands


def repo_plan(path: str, repo: Repo) -> tuple[list[PlannedWrite], list[str]]:
    """What restoring one checkout runs and writes; `repo` has a HEAD (repos_with_head)."""
    work = repo.get("uncommitted") or {}
    quoted = shlex.quote(path)
    head = str(repo.get("head"))
    commands = [f"git -C {quoted} stash push --include-untracked  (only if there is work)",
                f"git -C {quoted} fetch  (only if {head[:12]} is not there)",
                f"git -C {quoted} checkout {shlex.quote(repo.get('branch') or head)}"
                f"  (commit {head})"]
    commands += submodule_commands(path, repo.get("submodules", {}))
    writes: list[PlannedWrite] = []
    for staged, blob in ((False, work.get("patch")), (True, work.get("staged"))):
        if blob is not None and (blob.get("bytes") or blob.get("text")):
            patch_writes, command = blob_plan(path, blob, staged)
            writes += patch_writes
            commands.append(command)
    writes += [PlannedWrite(posixpath.join(path, name),
                            len(content.encode("utf-8", "surrogateescape")), "untracked file")
               for name, content in sorted(snap.untracked_contents(repo).items())]
    return writes, commands


def blob_plan(path: str, blob: Blob, staged: bool) -> tuple[list[PlannedWrite], str]:
    """The files a recorded patch (or staged changes) rewrites, and the apply that does it."""
    what = "staged changes" if staged else "uncommitted patch"
    command = (f"git -C {shlex.quote(path)} apply{' --cached' if staged else ''}"
               f"  (the snapshot's {what}, {bytes_text(blob.get('bytes'))})")
    writes = [PlannedWrite(posixpath.join(path, file), file_size, "patched")
              for file, file_size in patched_files(blob.get("text") or "")]
    return writes, command


def patched_files(text: str) -> list[tuple[str, int]]:
    """Each file a patch touches, with the bytes of its part of the diff."""
    found: list[tuple[str, int]] = []
    for line in text.splitlines(keepends=True):
        header = DIFF_HEADER.match(line.rstrip("\n"))
        if header:
            found.append((header.group(2), 0))
        if found:
            found[-1] = (found[-1][0], found[-1][1] + len(line.encode("utf-8", "replace")))
    return found


def sitecustomize_writes(document: Snapshot, host_wide: bool = False) -> list[PlannedWrite]:
    """The recorded sitecustomize, where restore may write it: inside the recorded python's
    venv, or anywhere with --host-wide (hostops/site.py decides on the host itself)."""
    site = snap.sitecustomize(document)
    content = site.get("content") if site is not None else None
    if site is None or content is None:
        return []
    interpreter = snap.python_env(document).get("interpreter", {})
    in_venv = bool(interpreter.get("venv")) and customize_words.inside(
        str(site.get("real_path") or site.get("path")), interpreter.get("prefix"))
    if not (in_venv or host_wide):
        return []
    return [PlannedWrite(str(site.get("path")),
                         len(content.encode("utf-8", "surrogateescape")), "sitecustomize")]


def bytes_text(size: int | None) -> str:
    return "size unknown" if size is None else f"{size} bytes"


def rerun_shown(document: Snapshot, rerun: bool, given: str | None) -> str | None:
    """The benchmark command --rerun would run: the one given, else the recorded one."""
    if not rerun:
        return None
    if given:
        return given
    record = snap.bench(document)
    command = record.get("command") if record is not None else None
    if record is None or command is None:
        return "(no benchmark recorded)"
    cwd = record.get("cwd")
    return command + (f"  (in {cwd})" if cwd else "")


def recorded_repos(document: Snapshot) -> list[str]:
    return sorted(snap.repos(document))


def endpoint_plan(document: Snapshot, label: str, host: str, found: Provenance, *,
                  doing: str, needs_consent: bool, repos: Sequence[str] = (),
                  patches: bool = False, startup: bool = False, python: bool = False,
                  env: Mapping[str, str] | None = None,
                  commands: Sequence[str] = (), host_wide: bool = False) -> ForeignPlan:
    """What bisect or explain would take from one of its two snapshots, read from it alone:
    the commit each of `repos` is checked out at, their uncommitted patches (`patches`),
    sitecustomize and the .pth startup lines (`startup`: code every start of that python
    runs), the interpreter it recorded (`python`: the agent runs with it), `env`."""
    writes: list[PlannedWrite] = []
    run = list(commands)
    recorded_python = snap.capture_config(document).get("python")
    if python and recorded_python:
        run.append(interpreter_command(str(recorded_python)))
    for path, repo in sorted(snap.repos_with_head(document).items()):
        if path not in repos:
            continue
        run.append(f"git -C {shlex.quote(path)} checkout --detach {repo.get('head')}")
        blob = (repo.get("uncommitted") or {}).get("patch")
        if patches and blob is not None and (blob.get("bytes") or blob.get("text")):
            patch_writes, command = blob_plan(path, blob, staged=False)
            writes += patch_writes
            run.append(command)
    if startup:
        writes += sitecustomize_writes(document, host_wide)
        for pth, record in sorted(snap.python_env(document).get("startup_pth", {}).items()):
            lines = record.get("code_lines") or []
            writes.append(PlannedWrite(pth, sum(len(line.encode("utf-8", "surrogateescape"))
                                                + 1 for line in lines), "startup lines"))
            run += [f"{line}  (a startup line of {pth}: every start of that python runs it)"
                    for line in lines]
    return ForeignPlan(label=label, host=host, provenance=found, writes=tuple(writes),
                       commands=tuple(run), needs_consent=needs_consent,
                       env=tuple(sorted((env or {}).items())), doing=doing)
