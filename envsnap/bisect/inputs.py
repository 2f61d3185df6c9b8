"""What a bisect starts from: the snapshots' repo, commits and host, and the line between.

Everything here is asked before the checkout moves: a refusal leaves the host as it was.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from envsnap.agent.redact import holds_marker
from envsnap.bench.run import BenchSpec, ServeSpec
from envsnap.bisect import search
from envsnap.bisect.search import Commit
from envsnap.defaults import DEFAULT_SERVE_TIMEOUT
from envsnap.errors import HostError, UsageError
from envsnap.hostops.git import GitFailure, complaint, resolve_commit, run, toplevel
from envsnap.hostops.patch import Patch, patch_from
from envsnap.hostops.shell import Shell
from envsnap.hosts.inventory import Host, Inventory, resolve_hosts, with_vars
from envsnap.snapshot import document as snapshot

if TYPE_CHECKING:
    from envsnap.snapshot.records import Bench, Repo, Snapshot

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


@dataclass(frozen=True)
class BenchAsked:
    """bisect's benchmark options as given; None where left out, to be taken from the
    benchmark both snapshots recorded (`envsnap bench ... --label`)."""

    cmd: str | None
    metric: str | None
    cwd: str | None
    lower_is_better: bool
    repeat: int
    run_timeout: float
    serve: ServeSpec | None = None
    ready: str | None = None            # --ready alone: for the recorded server
    serve_timeout: float | None = None


def benchmark_of(record: Bench) -> tuple[object, ...]:
    """What makes two recorded benchmarks the same one: command, metric, direction, the
    folder it ran in and the server it started."""
    server = record.get("server") or {}
    return (record.get("command"), record.get("metric"), bool(record.get("lower_is_better")),
            record.get("cwd"), server.get("command"))


def bench_spec(asked: BenchAsked, good: Snapshot, bad: Snapshot, labels: tuple[str, str],
               repo_path: str) -> tuple[BenchSpec, Bench | None]:
    """The benchmark to run at every commit, and the record it was taken from (None: all of
    it given). --cmd and --metric given: those, in --cwd, else where the snapshots ran the
    same command, else the repository. Either left out: the benchmark both snapshots
    recorded, the same in both, with what was given in its place. Refused in one line when
    there is none, or the two differ."""
    records = (snapshot.bench(good), snapshot.bench(bad))
    same = records[0] is not None and records[1] is not None \
        and benchmark_of(records[0]) == benchmark_of(records[1])
    recorded = records[0] if same else None
    if asked.cmd is not None and asked.metric is not None:
        ran_there = recorded is not None and recorded.get("command") == asked.cmd
        cwd = asked.cwd or (recorded.get("cwd") if recorded and ran_there else None) \
            or repo_path
        spec = BenchSpec(cmd=asked.cmd, metric=asked.metric, repeat=asked.repeat,
                         lower_is_better=asked.lower_is_better, cwd=cwd,
                         sample_interval=None, run_timeout=asked.run_timeout,
                         serve=given_serve(asked))
        return spec, None
    missing = " and ".join(flag for flag, value in (("--cmd", asked.cmd),
                                                    ("--metric", asked.metric)) if value is None)
    if recorded is None:
        if records[0] is None or records[1] is None:
            label = labels[0] if records[0] is None else labels[1]
            raise UsageError(f"bisect needs {missing}: snapshot {label!r} records no benchmark "
                             "(envsnap bench HOST --label ... records one)")
        raise UsageError(f"bisect needs {missing}: snapshots {labels[0]!r} and {labels[1]!r} "
                         "recorded different benchmarks (command, metric, folder or server)")
    command = asked.cmd or recorded.get("command") or ""
    if holds_marker(command):
        raise UsageError(f"the recorded benchmark command {command!r} had a secret masked at "
                         "capture: give it with --cmd")
    spec = BenchSpec(cmd=command, metric=asked.metric or recorded.get("metric") or "",
                     repeat=asked.repeat,
                     lower_is_better=asked.lower_is_better
                     or bool(recorded.get("lower_is_better")),
                     cwd=asked.cwd or recorded.get("cwd") or repo_path, sample_interval=None,
                     run_timeout=asked.run_timeout, serve=recorded_serve(asked, recorded))
    return spec, recorded


def given_serve(asked: BenchAsked) -> ServeSpec | None:
    if asked.serve is None and (asked.ready is not None or asked.serve_timeout is not None):
        flag = "--ready" if asked.ready is not None else "--serve-timeout"
        raise UsageError(f"{flag} is about a --serve server: give --serve CMD too")
    return asked.serve


def recorded_serve(asked: BenchAsked, recorded: Bench) -> ServeSpec | None:
    """--serve as given, else the server the snapshots' benchmark started, once --ready says
    how to tell it is up (the record keeps its command, not that)."""
    command = (recorded.get("server") or {}).get("command")
    if asked.serve is not None or command is None:
        return given_serve(asked)
    if asked.ready is None:
        raise UsageError(f"the recorded benchmark ran with a server ({command!r}): give "
                         "--ready REGEX|URL to start it the same way, or --serve CMD --ready")
    serve = ServeSpec(cmd=command, ready=asked.ready,
                      timeout=asked.serve_timeout or DEFAULT_SERVE_TIMEOUT)
    serve.check()
    return serve


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
