"""Sections reshaped for comparison: what identifies a thing across captures, not where it
happened to sit.

- Worker processes are keyed by command line, not pid: pids change on every restart.
- Stashes are keyed by their commit sha, not `stash@{n}`: a new stash renumbers the others.
- The interpreter is the binary it is: `python3` and `python3.11` that resolve to one file
  are one interpreter (the venv, prefix and sys.path say what else differs).
- Variables are compared only where both sides record them: a capture records those of its
  `env_prefixes` (and a few names always), so a name outside the other side's prefixes
  (vLLM's collect_env prints CUDAHOSTCXX; a capture's CUDA_ does not cover it) is unknown
  there, not removed.
- A repository's uncommitted work is one unit (patch, untracked files, their digest), and the
  ordered history and reflog are left to gitexplain, which reads them as a graph.
Shared by the pairwise diff and by fleet mode.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from envsnap.agent.envnames import DEFAULT_NAMES, is_selected

if TYPE_CHECKING:
    from envsnap.snapshot.records import Env, Process, PythonEnv, Repo, Stash

# Facts about a process that change on every restart or name another pid.
PROCESS_NOISE = frozenset(["ppid", "start_since_boot_s", "start_epoch", "matched", "cmdline"])
# Repository facts that gitexplain reads instead of the walk: as lists they would shift.
GIT_EXPLAINED = frozenset(["history", "reflog", "history_limit", "history_complete",
                           "reflog_truncated", "history_error", "shallow_boundary"])

# A part of a section reshaped for comparison: its facts, re-keyed, some wrapped in Atoms.
# No snapshot record any more (its keys and values are the diff's), so a plain tree.
View = dict[str, object]


class Atom:
    """A value compared whole and reported as one finding (a patch, a stash)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Atom) and self.value == other.value

    __hash__ = None  # type: ignore[assignment]


class Worker(NamedTuple):
    """A worker process as the diff knows it: its key names it, pid and rank describe it."""

    pid: str
    rank: str | None    # the RANK a launcher (torchrun) set, also shown in the key


def launcher_rank(info: Process) -> str | None:
    rank = info.get("env", {}).get("RANK")
    return None if rank is None else str(rank)


def worker_name(pid: str, info: Process) -> str:
    """The command line, with the worker's RANK where a launcher (torchrun) set one."""
    base = " ".join(info.get("cmdline", [])) or f"pid {pid}"
    rank = launcher_rank(info)
    return f"{base} [rank {rank}]" if rank is not None else base


def worker_keys(processes: Mapping[str, Process]) -> dict[str, str]:
    """{pid: key}: the command line (and rank), numbered in start order when several workers
    still share one (eight tensor-parallel workers without a RANK often do)."""
    def started(pid: str) -> tuple[float, int]:
        start = processes[pid].get("start_since_boot_s")
        return (float(start) if start is not None else 0.0, int(pid) if pid.isdigit() else 0)

    keys: dict[str, str] = {}
    seen: dict[str, int] = {}
    for pid in sorted(processes, key=started):
        base = worker_name(pid, processes[pid])
        seen[base] = seen.get(base, 0) + 1
        keys[pid] = base if seen[base] == 1 else f"{base} #{seen[base]}"
    return keys


def env_view(env: Env) -> tuple[View, dict[str, Worker]]:
    """(the env section with workers keyed by command line, {key: the worker})."""
    processes = env.get("processes", {})
    keys = worker_keys(processes)
    view: View = dict(env)
    view["processes"] = {key: process_view(processes[pid]) for pid, key in keys.items()}
    return view, {key: Worker(pid, launcher_rank(processes[pid])) for pid, key in keys.items()}


def records_variable(facts: Env, name: str) -> bool:
    """Whether the side with these env facts records variable `name`: a capture, those of
    its `env_prefixes` and the names the agent always reads (its own rule); a side that
    names no prefixes (a pasted output) is taken at its word."""
    prefixes = tuple(facts.get("env_prefixes") or ())
    return not prefixes or is_selected(name, (prefixes, DEFAULT_NAMES))


def variable_at(path: tuple[str, ...]) -> str | None:
    """The variable an env path names: shell.NAME or processes.KEY.env.NAME."""
    if len(path) == 2 and path[0] == "shell":
        return path[1]
    if len(path) == 4 and path[0] == "processes" and path[2] == "env":
        return path[3]
    return None


def recorded_by_both(before: Env, after: Env) -> tuple[Env, Env]:
    """Both env sections with only the variables each side records (see the docstring)."""
    if not (before.get("env_prefixes") or after.get("env_prefixes")):
        return before, after

    def kept(variables: dict[str, str | None]) -> dict[str, str | None]:
        if "error" in variables:                 # an unreadable environ, kept as it is
            return variables
        return {name: value for name, value in variables.items()
                if records_variable(before, name) and records_variable(after, name)}

    def narrowed(side: Env) -> Env:
        narrow = side.copy()
        if "shell" in side:
            narrow["shell"] = kept(side["shell"])
        if "processes" in side:
            narrow["processes"] = {}
            for pid, info in side["processes"].items():
                narrow["processes"][pid] = process = info.copy()
                if "env" in info:
                    process["env"] = kept(info["env"])
        return narrow

    return narrowed(before), narrowed(after)


def process_view(info: Process) -> View:
    return {k: v for k, v in info.items() if k not in PROCESS_NOISE}


def stash_key(ref: str, stash: Stash) -> str:
    return stash.get("sha") or ref


def repo_view(repo: Repo) -> View:
    """A repository's facts as compared: stashes by sha, uncommitted work as one unit."""
    if "error" in repo:
        return dict(repo)
    # held_by is not the checkout's state but who made it: the diff's notes say it
    view: View = {k: v for k, v in repo.items() if k not in GIT_EXPLAINED and k != "held_by"}
    view["stashes"] = {stash_key(ref, s): Atom(s) for ref, s in repo.get("stashes", {}).items()}
    if "uncommitted" in repo:
        view["uncommitted"] = Atom(repo["uncommitted"])
    if "in_progress" in repo:  # one finding for a stopped rebase, not one per field
        view["in_progress"] = Atom(repo["in_progress"])
    if "submodules" in repo:  # one finding per submodule: its commit and its tree
        view["submodules"] = {path: Atom(sub) for path, sub in repo["submodules"].items()}
    return view


def python_env_view(facts: PythonEnv) -> View:
    """python_env with the interpreter named by its real path only, where one is recorded:
    the path it was started by (`python3`, or `/usr/bin/python3.11` as Ansible discovers it)
    is no change of interpreter."""
    interpreter: Mapping[str, Any] = facts.get("interpreter", {})
    if not interpreter.get("executable_real"):
        return dict(facts)
    return {**facts, "interpreter": {key: value for key, value in interpreter.items()
                                     if key != "executable"}}
