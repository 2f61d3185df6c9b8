"""What differs between a good snapshot and the host now, as far as envsnap can put it back.

Each difference is one factor of the search (search.py): the commit range of a checkout (one
factor, however many commits), its uncommitted patch, each variable of the workers' env, and
sitecustomize, the startup lines of each .pth file. What differs but is not put back here (a
masked value, untracked files, packages) is named in `not_searched`, never silently dropped.

Pure: the documents in, typed data out; run.py asks git what this cannot know.
"""
from __future__ import annotations

import posixpath
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal

from envsnap.agent.python_env import startup_lines
from envsnap.agent.redact import holds_marker, redact_env_value
from envsnap.errors import UsageError
from envsnap.hostops.git import GitFailure
from envsnap.hostops.patch import Patch, patch_from
from envsnap.snapshot import document as snap
from envsnap.text import plural

if TYPE_CHECKING:
    from envsnap.snapshot.records import CustomizeFile, Repo, Snapshot, StartupPth

DifferenceKind = Literal["commits", "patch", "env", "sitecustomize", "pth", "package"]
# Where an env variable is put back: the server's start (--serve) or the benchmark command's.
EnvTarget = Literal["server", "benchmark"]
EnvSource = Literal["server worker", "--proc worker", "shell"]


@dataclass(frozen=True)
class Difference:
    kind: DifferenceKind
    name: str                 # the checkout's path, the variable's name, the file's path
    good: str | None          # commit, patch or file digest, or value (None: unset / none)
    current: str | None
    commits: int = 0          # "commits": how many the range holds
    lines: int = 0            # "pth": how many of its startup lines changed
    target: EnvTarget = "benchmark"   # "env": where it is set
    with_patch: bool = False  # "commits": the current patch comes too (it needs them)

    def describe(self) -> str:
        if self.kind == "commits":
            joined = " with the uncommitted patch made on them" if self.with_patch else ""
            return (f"{self.name}: {plural(self.commits, 'commit')} "
                    f"{short(self.good)}..{short(self.current)}{joined}")
        if self.kind == "package":
            return f"package {self.name} {self.good} -> {self.current}"
        if self.kind == "sitecustomize":
            change = ("added" if self.good is None else "removed" if self.current is None
                      else "changed")
            return f"sitecustomize {change} ({self.name})"
        if self.kind == "pth":
            return f"startup lines of {self.name} ({plural(self.lines, 'line')} changed)"
        if self.kind == "patch":
            change = ("the uncommitted patch added" if self.good is None else
                      "the uncommitted patch removed" if self.current is None else
                      "the uncommitted patch changed")
            return f"{self.name}: {change}"
        where = "the server env" if self.target == "server" else "the benchmark env"
        if self.current is None:
            return f"{self.name}={self.good} missing from {where}"
        if self.good is None:
            return f"{self.name}={self.current} added to {where}"
        return f"{self.name}={self.current} in {where} (was {self.good})"


    def masked(self) -> Difference:
        """As a snapshot records it: a variable's values masked by its name, else by their
        shape (the agent's rule), for what is written to disk. In a described line only the
        first value reads as `NAME=value`, so masking the line after would miss the other."""
        if self.kind != "env":
            return self
        return replace(self, good=env_value(self.name, self.good),
                       current=env_value(self.name, self.current))


def env_value(name: str, value: str | None) -> str | None:
    return None if value is None else redact_env_value(name, value)


def short(sha: str | None) -> str:
    return (sha or "?")[:12]


@dataclass(frozen=True)
class RepoEnds:
    """One checkout at both ends: GOOD's HEAD and patch, and the host's now."""

    path: str
    good_head: str
    current_head: str
    good_patch: Patch | None      # None: no uncommitted change
    current_patch: Patch | None


@dataclass(frozen=True)
class SiteEnds:
    """sitecustomize.py at both ends: its path and content (None: there was none)."""

    path: str
    good: str | None
    current: str | None


@dataclass(frozen=True)
class PthEnds:
    """The lines of a .pth file that site.py runs at startup (`import ...`), GOOD's and the
    host's now; none: no such file, or one of sys.path entries only."""

    path: str
    good: tuple[str, ...]
    current: tuple[str, ...]


@dataclass
class Differences:
    items: list[Difference] = field(default_factory=list)
    repos: list[RepoEnds] = field(default_factory=list)
    site: SiteEnds | None = None
    pth: dict[str, PthEnds] = field(default_factory=dict)   # by path
    # startup files every python of the host loads, switched as --host-wide asked: path ->
    # the words the plan says
    host_wide: dict[str, str] = field(default_factory=dict)
    env_source: EnvSource = "shell"
    not_searched: list[str] = field(default_factory=list)   # differs, cannot be put back


def repo_patch(repo: Repo, label: str, path: str) -> Patch | None:
    """The recorded uncommitted patch (None when there was none); UsageError when the
    snapshot did not keep it whole (truncated, masked): it could not be put back."""
    blob = (repo.get("uncommitted") or {}).get("patch")
    if blob is None:
        return None
    try:
        patch = patch_from(blob)
    except GitFailure as exc:
        raise UsageError(f"{path}: the uncommitted patch of {label} cannot be put back "
                         f"({exc}): nothing was changed") from None
    return patch if patch.data else None


def worker_env(document: Snapshot) -> tuple[EnvSource, dict[str, str | None]]:
    """The env the benchmark's workers ran with: the managed server's when one was recorded,
    else the first process --proc matched (its children carry the same), else the shell's.
    As recorded: {"error": why} where the agent could not read it (env_differences says so)."""
    section = snap.env(document)
    processes = section.get("processes", {})
    server = snap.server_worker(document)
    if server is not None and "env" in server[1]:
        return "server worker", server[1]["env"]
    for pid in sorted(processes, key=pid_order):
        worker = processes[pid]
        matched = worker.get("matched") or ""
        if matched and not matched.startswith("child of") and "env" in worker:
            return "--proc worker", worker["env"]
    return "shell", section.get("shell", {})


def pid_order(pid: str) -> tuple[int, str]:
    return (int(pid), pid) if pid.isdigit() else (0, pid)


def env_differences(good: Snapshot, bad: Snapshot, target: EnvTarget,
                    labels: tuple[str, str]) -> tuple[EnvSource, list[Difference], list[str]]:
    """Each variable whose value differs between GOOD's and BAD's workers."""
    good_source, good_env = worker_env(good)
    bad_source, bad_env = worker_env(bad)
    if "error" in good_env or "error" in bad_env:
        failed = labels[0] if "error" in good_env else labels[1]
        return bad_source, [], [f"worker env: {failed} could not read it"]
    found, skipped = [], []
    for name in sorted(set(good_env) | set(bad_env)):
        was, now = good_env.get(name), bad_env.get(name)
        if was == now:
            continue
        if any(value is not None and holds_marker(value) for value in (was, now)):
            skipped.append(f"{name}: differs, but its value was masked in the snapshot")
            continue
        found.append(Difference("env", name, was, now, target=target))
    if good_source != bad_source:
        skipped.append(f"worker env: {labels[0]} recorded the {good_source}'s, {labels[1]} "
                       f"the {bad_source}'s")
    return bad_source, found, skipped


def interpreter(document: Snapshot) -> str:
    """Which python (its sys.prefix: a venv is one of its own) the facts of python_env are
    of: another one's sitecustomize and packages are no difference to put back."""
    found = snap.python_env(document).get("interpreter", {})
    return str(found.get("prefix") or found.get("executable") or "?")


def digest(document: Snapshot) -> str | None:
    site = snap.sitecustomize(document)
    return str(site.get("sha256")) if site is not None else None


def recorded_whole(site: CustomizeFile | None) -> bool:
    """None (there was no file), or recorded with all its content."""
    return site is None or (site.get("content") is not None and not site.get("redacted")
                            and not site.get("truncated"))


def content(site: CustomizeFile | None) -> str | None:
    return site.get("content") if site is not None else None


def site_ends(good: Snapshot, live: Snapshot) -> SiteEnds | str:
    """Both ends' sitecustomize (one end at least has one: their digests differ), or why it
    cannot be put back (not recorded whole)."""
    was, now = snap.sitecustomize(good), snap.sitecustomize(live)
    if not (recorded_whole(was) and recorded_whole(now)):
        return ("sitecustomize differs, but was not recorded whole (masked or cut): "
                "explain cannot put it back")
    recorded = now if now is not None else was
    path = str(recorded.get("path")) if recorded is not None else "?"
    return SiteEnds(path, content(was), content(now))


def find_differences(good: Snapshot, bad: Snapshot, live: Snapshot,
                     paths: list[str], commit_counts: dict[str, int], serve: bool,
                     labels: tuple[str, str], pip: bool = False) -> Differences:
    """GOOD against the host now (`live`: checkouts, sitecustomize, packages) and BAD's
    workers (a worker's env is only known from a snapshot taken while it ran)."""
    found = Differences()
    good_repos, live_repos = snap.repos(good), snap.repos(live)
    for path in paths:
        was, now = good_repos.get(path, {}), live_repos.get(path, {})
        good_head, live_head = was.get("head"), now.get("head")
        if good_head is None or live_head is None:
            raise UsageError(f"{path}: no HEAD recorded in {labels[0]!r} or on the host now")
        ends = RepoEnds(path, good_head, live_head, repo_patch(was, labels[0], path),
                        repo_patch(now, "the checkout now", path))
        found.repos.append(ends)
        if ends.good_head != ends.current_head:
            found.items.append(Difference("commits", path, ends.good_head, ends.current_head,
                                          commits=commit_counts.get(path, 0)))
        digests = [p.sha256 if p else None for p in (ends.good_patch, ends.current_patch)]
        if digests[0] != digests[1]:
            found.items.append(Difference("patch", path, digests[0], digests[1]))
        if snap.untracked_digests(was) != snap.untracked_digests(now):
            found.not_searched.append(f"{path}: untracked files differ (explain does not "
                                      "write them: `envsnap restore` does)")
    target: EnvTarget = "server" if serve else "benchmark"
    found.env_source, env, skipped = env_differences(good, bad, target, labels)
    found.items += env
    found.not_searched += skipped
    if interpreter(good) != interpreter(live):
        found.not_searched.append(f"sitecustomize, .pth lines and packages: {labels[0]!r} "
                                  f"recorded the python at {interpreter(good)}, the host's "
                                  f"now is {interpreter(live)}: not compared")
        return found
    if snap.customize_digest(good) != snap.customize_digest(live):
        site = site_ends(good, live)
        if isinstance(site, str):
            found.not_searched.append(site)
        else:
            found.site = site
            found.items.append(Difference("sitecustomize", site.path, digest(good),
                                          digest(live)))
    pth, skipped = pth_differences(good, live)
    for startup, item in pth:
        found.pth[startup.path] = startup
        found.items.append(item)
    found.not_searched += skipped
    searched, left = package_differences(good, live) if pip else ([], snap.package_pins(good, live))
    found.items += searched
    if left:
        how = ("installed or removed since, not pinned by explain" if pip else
               "searched with --pip, which pins them with pip and back at the end")
        found.not_searched.append(f"{plural(len(left), 'package')} differ ({how}): "
                                  + ", ".join(left))
    return found


def pth_differences(good: Snapshot, live: Snapshot
                    ) -> tuple[list[tuple[PthEnds, Difference]], list[str]]:
    """Each .pth file of the host python's site folders whose startup lines differ; the
    snapshot records only those lines (and the file's digest), so that is what is put back."""
    was, now = recorded_pth(good), recorded_pth(live)
    folders = snap.python_env(live).get("site_dirs", [])
    searched, skipped = [], []
    for path in sorted(set(was) | set(now)):
        before, after = was.get(path, {}), now.get(path, {})
        if before == after:
            continue
        if "error" in before or "error" in after:
            skipped.append(f"{path}: startup lines differ, but the file could not be read")
            continue
        lines = tuple(before.get("code_lines", []))
        current = tuple(after.get("code_lines", []))
        if lines == current:
            skipped.append(f"{path}: its sys.path lines differ (explain puts back only the "
                           "lines site.py runs)")
            continue
        if posixpath.dirname(path) not in folders:
            skipped.append(f"{path}: startup lines differ, but it is not in a site folder of "
                           "the host's python now: not put back")
            continue
        if any(holds_marker(line) for line in lines):
            skipped.append(f"{path}: startup lines differ, but a secret in them was masked "
                           "in the snapshot: explain cannot put them back")
            continue
        if any(startup_lines(line) != [line] for line in lines):
            skipped.append(f"{path}: the snapshot's startup lines for it are not lines site.py "
                           "runs: not put back")
            continue
        changed = sum(((Counter(lines) - Counter(current)) +
                       (Counter(current) - Counter(lines))).values())
        searched.append((PthEnds(path, lines, current),
                         Difference("pth", path, before.get("sha256"), after.get("sha256"),
                                    lines=changed)))
    return searched, skipped


def recorded_pth(document: Snapshot) -> dict[str, StartupPth]:
    return snap.python_env(document).get("startup_pth", {})


def package_differences(good: Snapshot,
                        live: Snapshot) -> tuple[list[Difference], list[str]]:
    """Each package both have in another version (pip pins either way); and the ones only
    one side has (uninstalling is not explain's call, nor restore's)."""
    was, now = snap.packages(good), snap.packages(live)
    searched, left = [], []
    for name in sorted(set(was) | set(now)):
        if was.get(name) == now.get(name):
            continue
        if isinstance(was.get(name), str) and isinstance(now.get(name), str):
            searched.append(Difference("package", name, was[name], now[name]))
        else:
            left.append(name)
    return searched, left

