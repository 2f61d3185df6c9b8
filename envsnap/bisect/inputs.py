"""What a bisect starts from: the snapshots' repo, commits and host, and the line between.

Everything here is asked before the checkout moves: a refusal leaves the host as it was.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from envsnap.bench.run import BenchSpec
from envsnap.bisect import search
from envsnap.bisect.search import Commit
from envsnap.errors import HostError, UsageError
from envsnap.hostops.git import GitFailure, complaint, resolve_commit, run, toplevel
from envsnap.hostops.patch import Patch, patch_from
from envsnap.hostops.shell import Shell
from envsnap.hosts.inventory import Host, Inventory, resolve_hosts, with_vars
from envsnap.snapshot import document as snapshot

if TYPE_CHECKING:
    from envsnap.snapshot.records import Repo, Snapshot

# ---- from the snapshots, before the host is touched -------------------------------------------

def check_options(spec: BenchSpec, max_repeat: int) -> None:
    spec.check()
    if max_repeat < spec.repeat:
        raise UsageError(f"--max-repeat ({max_repeat}) must be at least --repeat "
                         f"({spec.repeat})")


def repos_of(document: Snapshot) -> dict[str, Repo]:
    return snapshot.repos(document)


def matches(path: str, key: str, repo: Repo) -> bool:
    names = {key, repo.get("toplevel"), repo.get("realpath")}
    return path.rstrip("/") in {name.rstrip("/") for name in names if name}


def pick_repo(good: Snapshot, bad: Snapshot, repo: str | None,
              labels: tuple[str, str]) -> tuple[str, Repo, Repo]:
    """(path on the host, good's repo facts, bad's): --repo, or the one repo both recorded."""
    if repo is None:
        common = sorted(set(repos_of(good)) & set(repos_of(bad)))
        if len(common) != 1:
            listed = ", ".join(common) or "none"
            raise UsageError(f"snapshots {labels[0]!r} and {labels[1]!r} recorded "
                             f"{len(common)} repos in common ({listed}): choose one with --repo")
        repo = common[0]
    found = []
    for document, label in zip((good, bad), labels):
        entry = next((value for key, value in repos_of(document).items()
                      if matches(repo, key, value)), None)
        if entry is None or entry.get("head") is None:
            why = "not recorded" if entry is None else entry.get("error", "no commit recorded")
            raise UsageError(f"snapshot {label!r} has no HEAD for repo {repo} ({why})")
        found.append(entry)
    path = str(found[1].get("toplevel") or repo)
    return path, found[0], found[1]


def pick_host(bad: Snapshot, inventory: Inventory, host: str | None) -> Host:
    """--host, else the bad snapshot's host (where it is slow), with its recorded python."""
    pattern = host or snapshot.host(bad, "local")
    hosts = resolve_hosts([pattern], inventory)
    if len(hosts) != 1:
        raise UsageError(f"--host {pattern!r} names {len(hosts)} hosts: bisect one at a time")
    python = snapshot.capture_config(bad).get("python")
    return with_vars(hosts[0], {"python": python}) if host is None else hosts[0]


def good_patch(repo: Repo, label: str) -> Patch:
    work = repo.get("uncommitted")    # null: no work tree recorded
    blob = work.get("patch") if work is not None else None
    if blob is None:
        raise UsageError(f"--with-patch: snapshot {label!r} recorded no uncommitted patch")
    try:
        return patch_from(blob)
    except GitFailure as exc:
        raise UsageError(f"--with-patch: {exc}") from None


def recorded_baseline(good: Snapshot, spec: BenchSpec, label: str) -> list[float]:
    record = snapshot.bench(good)
    if record is None or not record.get("values"):
        raise UsageError(f"--good-from-snapshot: snapshot {label!r} has no recorded benchmark")
    if (record.get("command"), record.get("metric")) != (spec.cmd, spec.metric):
        raise UsageError(f"--good-from-snapshot: snapshot {label!r} recorded another benchmark "
                         f"({record.get('command')!r}, metric {record.get('metric')!r})")
    return [float(value) for value in record["values"]]


# ---- the repository on the host (read only) -------------------------------------------------

def find_toplevel(shell: Shell, path: str) -> str:
    top, problem = toplevel(shell, path)
    if top is None:
        raise HostError(f"{shell.host.name}: {problem}")
    return top


def commit_here(shell: Shell, top: str, sha: str, label: str) -> str:
    commit = resolve_commit(shell, top, sha)
    if commit is None:
        raise UsageError(f"{top}: commit {sha[:12]} (HEAD of snapshot {label!r}) is not in "
                         f"this checkout on {shell.host.name}: fetch it first")
    return commit


def commit_line(shell: Shell, top: str, good: str, bad: str,
                labels: tuple[str, str]) -> list[Commit]:
    """The commits to bisect, oldest first; refused unless good is a proper ancestor of bad."""
    if good == bad:
        raise UsageError(f"snapshots {labels[0]!r} and {labels[1]!r} have the same HEAD "
                         f"{good[:12]}: there is no commit between them to blame")
    asked = run(shell, top, "merge-base", "--is-ancestor", good, bad)
    if asked.exit_code == 1:
        raise UsageError(f"{good[:12]} (HEAD of {labels[0]!r}) is not an ancestor of "
                         f"{bad[:12]} (HEAD of {labels[1]!r}): bisect needs the good commit "
                         "in the bad one's history; nothing was changed")
    if asked.exit_code != 0:
        raise HostError(f"{top}: git merge-base failed: {complaint(asked)}")
    logged = run(shell, top, "log", "--ancestry-path", f"--format={search.LOG_FORMAT}",
                 f"{good}..{bad}")
    if logged.exit_code != 0:
        raise HostError(f"{top}: git log failed: {complaint(logged)}")
    return search.line_of_commits(search.parse_log(logged.stdout), good, bad)


def subject_of(shell: Shell, top: str, sha: str) -> str:
    shown = run(shell, top, "log", "-1", "--format=%s", sha)
    return shown.stdout.strip() if shown.exit_code == 0 else ""


def describe_head(shell: Shell, top: str) -> str:
    branch = run(shell, top, "symbolic-ref", "-q", "--short", "HEAD").stdout.strip()
    sha = (resolve_commit(shell, top, "HEAD") or "no commit")[:12]
    return f"{branch} at {sha}" if branch else f"{sha}, detached"


def merged_by(shell: Shell, top: str, merge: Commit) -> list[Commit]:
    """The commits a merge brought into its first parent's line, newest first: when the
    first bad commit is a merge, one of them is the change to read."""
    if len(merge.parents) < 2:
        return []
    logged = run(shell, top, "log", f"--format={search.LOG_FORMAT}", merge.sha,
                 f"^{merge.parents[0]}")
    if logged.exit_code != 0:
        return []
    return [c for c in search.parse_log(logged.stdout) if c.sha != merge.sha]


def files_touched(shell: Shell, top: str, before: str, commit: str) -> list[str]:
    """Against the commit before it on the line: for a merge, what the merge brought in."""
    listed = run(shell, top, "diff", "--name-only", "--no-renames", "-z", before, commit)
    return [name for name in listed.stdout.split("\0") if name] if listed.exit_code == 0 else []
