"""Two snapshots -> findings, ranked by what matters for performance.

Fast by design: the per-section digests recorded at capture time are compared first and only
sections that differ are walked. Sections are maps keyed by natural ids (bus id, package,
env var, repo path), so the walk is a plain key-by-key descent that stops at every equal
subtree (one C-level `==`), never a positional list diff; lists are compared whole. The few
things whose natural id is not their key (workers, stashes) are re-keyed by keys.py first.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, cast

from envsnap.agent.lscpu import cpu_set
from envsnap.agent.sections import SECTIONS
from envsnap.diff import rules
from envsnap.diff.findings import (
    ADDED,
    CHANGED,
    MISSING,
    NOT_CAPTURED,
    REMOVED,
    Detail,
    Finding,
    FindingKind,
)
from envsnap.diff.gitexplain import explain, moves_since
from envsnap.diff.gpumerge import merge_alike
from envsnap.diff.hotpaths import HotPattern, glob_matches, hot_patterns
from envsnap.diff.keys import (
    Atom,
    View,
    env_view,
    python_env_view,
    recorded_by_both,
    repo_view,
)
from envsnap.diff.partial import (
    Known,
    any_partial,
    comparable_nvidia,
    known_of,
    knows,
    uncompared_notes,
)
from envsnap.errors import UsageError
from envsnap.snapshot.document import bench as bench_of
from envsnap.snapshot.document import (
    capture_config,
    captured_at,
    collector_error,
    cuda_nccl,
    env,
    git,
    held_checkouts,
    held_text,
    hostname,
    imported,
    nvidia,
    python_env,
    section,
    section_digest,
    section_names,
)
from envsnap.snapshot.document import host as host_of
from envsnap.snapshot.document import label as label_of
from envsnap.snapshot.spec import is_object

if TYPE_CHECKING:
    from envsnap.diff.benchmark import Benchmark
    from envsnap.snapshot.records import Env, Git, Process, ReflogEntry, Repo, Snapshot

# The fields that hold a kernel CPU list, compared as the sets of CPUs they name.
CPU_LISTS = frozenset(["online", "cpulist", "cpu_affinity"])
# Raw bit masks beside their decoded name lists: one change, reported once.
SKIP_KEYS = frozenset(["clock_event_reasons_mask", "clock_event_reasons_supported_mask"])
Path = tuple[str, ...]


class DiffOptions(NamedTuple):
    include_volatile: bool = False
    sections: tuple[str, ...] = ()  # empty: every section


class Side(NamedTuple):
    """One snapshot as a report names it."""

    label: str
    host: str
    hostname: str | None
    captured_at: str
    source: str

    def as_json(self) -> dict[str, object]:
        return {"label": self.label, "host": self.host, "hostname": self.hostname,
                "captured_at": self.captured_at, "source": self.source}

    @property
    def name(self) -> str:
        return self.hostname or self.host


class DiffReport(NamedTuple):
    a: Side
    b: Side
    findings: list[Finding]
    unchanged: list[str]
    notes: list[str]
    same_host: bool
    sections: list[str]
    include_volatile: bool
    # Both sides' benchmark runs compared (None unless both hold runs): no fact, never drift,
    # but what a reader came for, so every rendering leads with it.
    benchmark: Benchmark | None
    # Sections either snapshot holds that --section left out, and those of them a comparison
    # would find something in: a verdict speaks only of what it compared, and names the rest.
    left_out: list[str]
    left_out_differ: list[str]

    @property
    def drift(self) -> bool:
        """A fact changed; readings shown by --all (clocks, load) are not drift."""
        return any(not f.volatile for f in self.findings)

    @property
    def regression(self) -> bool:
        """The benchmark's verdict is a regression (`diff --fail-on regression`)."""
        return self.benchmark is not None and self.benchmark.regression


# ---- the entry point -------------------------------------------------------------------------

def diff(a: Snapshot, b: Snapshot, options: DiffOptions | None = None,
         sources: tuple[str, str] = ("", "")) -> DiffReport:
    options = options or DiffOptions()
    side_a, side_b = side_of(a, sources[0]), side_of(b, sources[1])
    if side_a.label == side_b.label and sources[0] != sources[1]:
        # a copied or renamed file keeps its old label: name both by what was asked for
        side_a, side_b = side_a._replace(label=sources[0]), side_b._replace(label=sources[1])
    same_host = same_machine(side_a, side_b, imported(a) is not None or imported(b) is not None)
    sections = sections_of(a, b, options.sections)
    patterns = hot_patterns(configured_hot_paths(a, b))
    notes: list[str] = []
    raw: list[Finding] = []
    for name in sections:
        raw += compare_section(name, a, b, options, patterns, notes)
    if "git" in sections:   # a checkout envsnap held at capture: its state is not the user's
        notes += [f"{side.label}: {held_text(path, held)}" for side, document in
                  ((side_a, a), (side_b, b)) for path, held in held_checkouts(document).items()]
    notes += uncompared_notes(a, b, sections)
    context = rules.Context(names=(side_a.label, side_b.label), same_host=same_host,
                            shell_after=env(b).get("shell", {}),
                            gpus_after=nvidia(b).get("gpus", {}), documents=(a, b))
    findings = merge_alike(rules.rank_all(raw, context), context.gpus_after,
                           nvidia(b).get("gpu_count"), how_it_moved)
    left_out = [name for name in sections_of(a, b, ()) if name not in sections]
    # a left-out section "differs" when comparing it would find something, not when its raw
    # facts differ (a worker's new pid is no finding)
    differ = [name for name in left_out
              if compare_section(name, a, b, DiffOptions(), patterns, [])]
    return DiffReport(side_a, side_b, findings, unchanged(a, b, sections, findings), notes,
                      same_host, sections, options.include_volatile,
                      benchmark_of(a, b, (side_a.label, side_b.label)), left_out, differ)


def benchmark_of(a: Snapshot, b: Snapshot,
                 labels: tuple[str, str]) -> Benchmark | None:
    """Both sides' runs compared; the module loads only when both hold runs (start-up)."""
    if bench_of(a) is None or bench_of(b) is None:
        return None
    from envsnap.diff.benchmark import compare_benchmarks

    return compare_benchmarks(a, b, labels)


def how_it_moved(f: Finding) -> tuple[Any, ...]:
    return f.kind, repr(f.before), repr(f.after), f.volatile


def same_machine(a: Side, b: Side, imported: bool = False) -> bool:
    """By hostname when both snapshots recorded one; a failed system collector leaves only
    the name the host was reached by, which is compared with its own kind. A paste that
    names no hostname (`imported`: either is one) is never taken for the other's host:
    every import is "imported", whoever pasted it."""
    if a.hostname and b.hostname:
        return a.hostname == b.hostname
    return a.host == b.host and not imported


def side_of(document: Snapshot, source: str) -> Side:
    return Side(label=label_of(document, source or "?"), host=host_of(document),
                hostname=hostname(document), captured_at=captured_at(document) or "?",
                source=source)


def sections_of(a: Snapshot, b: Snapshot, wanted: tuple[str, ...]) -> list[str]:
    present = list(SECTIONS) + sorted((set(section_names(a)) | set(section_names(b))) -
                                           set(SECTIONS))
    unknown = [name for name in wanted if name not in present]
    if unknown:
        raise UsageError(f"unknown section {', '.join(unknown)}: choose from "
                         f"{', '.join(present)}")
    names = [n for n in present if n in section_names(a) or n in section_names(b)]
    return [n for n in names if not wanted or n in wanted]


def configured_hot_paths(*documents: Snapshot) -> list[str]:
    found: list[str] = []
    for document in documents:
        found += [p for p in capture_config(document).get("hot_paths", []) if p not in found]
    return found


# ---- one section -------------------------------------------------------------------------------

def digest(document: Snapshot, name: str) -> str:
    """The digest recorded at capture; computed only for a snapshot that lacks it."""
    recorded = document.get("digests", {}).get(name)
    return recorded if recorded is not None else section_digest(section(document, name))


def compare_section(name: str, a: Snapshot, b: Snapshot, options: DiffOptions,
                    patterns: tuple[HotPattern, ...], notes: list[str]) -> list[Finding]:
    error_a, error_b = collector_error(a, name), collector_error(b, name)
    if (error_a or error_b) and any_partial(a, b):
        return []       # a section a paste does not carry: said once, by uncompared_notes
    if error_a or error_b:
        # A failed collector recorded nothing: that is "not captured", never "all removed".
        if error_a == error_b:
            notes.append(f"{name} was not captured in either snapshot ({error_a})")
            return []
        return [Finding(name, (), error_a, error_b, NOT_CAPTURED)]
    found: list[Finding] = []
    if digest(a, name) != digest(b, name):
        found += section_changes(name, a, b, patterns)
    elif section(a, name) != section(b, name):
        # Equal digests vouch for nothing once a snapshot was edited by hand (a redaction
        # before attaching it to a bug report, say): the values decide, at C speed.
        notes.append(f"{name} differs although both recorded digests match: a snapshot "
                     "was edited after capture")
        found += section_changes(name, a, b, patterns)
    if options.include_volatile:
        before, after = volatile_section(a, name), volatile_section(b, name)
        found += [f._replace(volatile=True) for f in walk_findings(name, before, after)]
    return found


def volatile_section(document: Snapshot, name: str) -> Mapping[str, object]:
    readings: Mapping[str, object] = document.get("volatile", {})
    found = readings.get(name, {})
    return cast("Mapping[str, object]", found)   # a section's readings: a record


def section_changes(name: str, a: Snapshot, b: Snapshot,
                    patterns: tuple[HotPattern, ...]) -> list[Finding]:
    known = known_of(name, a, b)
    if name == "env":
        before_env, after_env = recorded_by_both(env(a), env(b))
        if known is None:
            return env_changes(before_env, after_env)
        # a paste's env is its printed variables only: no workers to match by command line
        return walk_findings(name, before_env, after_env, known=known)
    if name == "git":
        return git_changes(git(a), git(b), patterns)
    before: Mapping[str, object]
    after: Mapping[str, object]
    if name == "python_env":   # the interpreter by its real path (keys.python_env_view)
        before, after = python_env_view(python_env(a)), python_env_view(python_env(b))
    else:
        before, after = section(a, name), section(b, name)
    if known and name == "nvidia":
        before, after = comparable_nvidia(before, after)
    return walk_findings(name, before, after, known=known)


# ---- the walk ----------------------------------------------------------------------------------

def is_mapping(value: Any) -> bool:
    """A dict to descend into; a dict with a sha256 is a recorded blob, compared whole."""
    return is_object(value) and "sha256" not in value


def unwrap(value: Any) -> Any:
    return value.value if isinstance(value, Atom) else value


def same_cpus(path: Path, before: Any, after: Any) -> bool:
    """Two writings of one CPU list: lscpu's `0,1` (a paste) is the kernel's `0-1`."""
    return bool(path) and path[-1] in CPU_LISTS and isinstance(before, str) and \
        isinstance(after, str) and bool(cpu_set(before)) and cpu_set(before) == cpu_set(after)


def walk(before: Any, after: Any, path: Path = (),
         known: Known | None = None) -> Iterator[tuple[Path, Any, Any, FindingKind]]:
    if before == after or same_cpus(path, before, after):
        return
    if not (is_mapping(before) and is_mapping(after)):
        yield path, unwrap(before), unwrap(after), CHANGED
        return
    for key in list(before) + [k for k in after if k not in before]:
        if key in SKIP_KEYS:
            continue
        sub = path + (str(key),)
        if key not in after:
            if not (known and known.unknown_in(1, sub)):
                yield sub, unwrap(before[key]), None, REMOVED
        elif key not in before:
            if not (known and known.unknown_in(0, sub)):
                yield sub, None, unwrap(after[key]), ADDED
        else:
            yield from walk(before[key], after[key], sub, known)


def walk_findings(name: str, before: Any, after: Any, path: Path = (),
                  detail: Detail | None = None, known: Known | None = None) -> list[Finding]:
    return [Finding(name, where, old, new, kind, detail=detail.copy() if detail else Detail())
            for where, old, new, kind in walk(before, after, path, known)]


# ---- env: workers matched by command line ------------------------------------------------------

def env_changes(before: Env, after: Env) -> list[Finding]:
    view_a, known_a = env_view(before)
    view_b, known_b = env_view(after)
    # env_view keyed the workers by command line, each its process_view
    workers_a = cast("dict[str, Process]", view_a.pop("processes"))
    workers_b = cast("dict[str, Process]", view_b.pop("processes"))
    found = walk_findings("env", view_a, view_b)
    for key in list(workers_a) + [k for k in workers_b if k not in workers_a]:
        was, now = known_a.get(key), known_b.get(key)
        rank = known_a[key].rank if key in known_a else known_b[key].rank   # one rank per key
        detail = Detail(worker=key, pid_before=was.pid if was else None,
                        pid_after=now.pid if now else None, rank=rank)
        found += worker_changes(key, workers_a.get(key), workers_b.get(key), detail)
        if key not in workers_a:
            found += missing_in_worker(key, workers_b[key], after.get("shell", {}), detail)
    return found


def missing_in_worker(key: str, worker: Process, shell: dict[str, str | None],
                      detail: Detail) -> list[Finding]:
    """A worker with nothing to compare against is still checked against the shell: a
    tuning variable the shell has and the worker lacks is the first suspect in docs/STORY.md."""
    environ = worker.get("env")
    if environ is None or "error" in environ:
        return []
    return [Finding("env", ("processes", key, "env", name), value, None, MISSING,
                    detail=detail.copy())
            for name, value in shell.items() if rules.is_perf_var(name) and name not in environ]


def worker_changes(key: str, before: Process | None, after: Process | None,
                   detail: Detail) -> list[Finding]:
    path = ("processes", key)
    if before is None or after is None:
        kind: FindingKind = ADDED if before is None else REMOVED
        return [Finding("env", path, before, after, kind, detail=detail)]
    env_a, env_b = before.get("env"), after.get("env")
    unreadable = [e for e in (env_a, env_b) if e is not None and "error" in e]
    if unreadable and env_a != env_b:
        # An unreadable environ (another user's process) is not an emptied one.
        rest = walk_findings("env", drop(before, "env"), drop(after, "env"), path, detail)
        return rest + [Finding("env", path + ("env",), error_of(env_a), error_of(env_b),
                               NOT_CAPTURED, detail=detail)]
    return walk_findings("env", before, after, path, detail)


def drop(mapping: Mapping[str, object], key: str) -> View:
    return {k: v for k, v in mapping.items() if k != key}


def error_of(value: Mapping[str, object] | None) -> str | None:
    """The why of an {"error": why} in place of a repository or a process's environ."""
    return str(value["error"]) if value is not None and "error" in value else None


# ---- git: HEAD moves explained, stashes by sha, uncommitted work as one unit ------------------

def git_changes(before: Git, after: Git, patterns: tuple[HotPattern, ...]) -> list[Finding]:
    found = walk_findings("git", drop(before, "repos"), drop(after, "repos"))
    repos_a, repos_b = before.get("repos", {}), after.get("repos", {})
    for path in list(repos_a) + [p for p in repos_b if p not in repos_a]:
        found += repo_changes(path, repos_a.get(path), repos_b.get(path), patterns)
    return found


def repo_changes(path: str, before: Repo | None, after: Repo | None,
                 patterns: tuple[HotPattern, ...]) -> list[Finding]:
    where = ("repos", path)
    if before is None or after is None:
        return [Finding("git", where, before, after, ADDED if before is None else REMOVED)]
    if "error" in before or "error" in after:
        if before == after:
            return []
        return [Finding("git", where, error_of(before), error_of(after), NOT_CAPTURED)]
    found: list[Finding] = []
    view_a, view_b = repo_view(before), repo_view(after)
    if before.get("head") != after.get("head"):
        found.append(Finding("git", where + ("head",), before.get("head"), after.get("head"),
                             detail=explain(before, after, patterns)))
        # ahead/behind of the upstream follow the move: the HEAD finding says it all.
        view_a, view_b = (drop_keys(v, ("head", "ahead", "behind")) for v in (view_a, view_b))
    elif reflog_top(before) != reflog_top(after):
        found.append(reflog_finding(where, before, after))
    return found + walk_findings("git", view_a, view_b, where)


def drop_keys(mapping: View, keys: tuple[str, ...]) -> View:
    return {k: v for k, v in mapping.items() if k not in keys}


def reflog_top(repo: Repo) -> ReflogEntry | None:
    log = repo.get("reflog", [])
    return log[0] if log else None


def reflog_message(repo: Repo) -> str | None:
    top = reflog_top(repo)
    return top.get("message") if top is not None else None


def reflog_finding(where: Path, before: Repo, after: Repo) -> Finding:
    """HEAD is back where it was, but it moved in between (a checkout and back, a reset)."""
    # Matched by what an entry says, not by its HEAD@{n} name, which shifts with every move.
    entries, reaches = moves_since(before, after)
    return Finding("git", where + ("reflog",), reflog_message(before), reflog_message(after),
                   detail=Detail(moves=entries, reflog_reaches=reaches))


# ---- what was checked and found equal -----------------------------------------------------------

def torch_version(document: Snapshot) -> str | None:
    torch = cuda_nccl(document).get("torch")   # null: no torch found
    return torch.get("version") if torch is not None else None


def has_nccl(document: Snapshot) -> bool:
    nccl = cuda_nccl(document).get("nccl", {})
    return bool(nccl.get("libraries") or nccl.get("wheels"))


# (what, its section, the paths it covers, whether a snapshot holds it at all)
Check = tuple[str, str, list[Path], Callable[["Snapshot"], bool]]
CHECKS: list[Check] = [
    ("driver", "nvidia", [("driver",), ("cuda_driver",), ("userspace_library",)],
     lambda d: bool(nvidia(d).get("driver"))),
    ("kernel module", "nvidia", [("kernel_module",)],
     lambda d: bool(nvidia(d).get("kernel_module"))),
    ("CUDA", "cuda_nccl", [("cuda_toolkit",)], lambda d: bool(cuda_nccl(d).get("cuda_toolkit"))),
    ("NCCL", "cuda_nccl", [("nccl",)], has_nccl),
    ("torch", "cuda_nccl", [("torch",)], lambda d: bool(torch_version(d))),
    ("PCIe", "nvidia", [("gpus", "*", "pcie_*")], lambda d: bool(nvidia(d).get("gpus"))),
    ("git HEAD", "git", [("repos", "*", "head")], lambda d: bool(git(d).get("repos"))),
    ("NCCL/CUDA env", "env", [("shell", "NCCL_*"), ("shell", "CUDA_*"),
                              ("processes", "*", "env")], lambda d: True),
    ("sitecustomize", "python_env", [("customize",)], lambda d: True),
]


def overlaps(pattern: Path, path: Path) -> bool:
    """A finding at `path` touches what `pattern` names; a shorter path (a whole GPU or
    repository added or removed) touches everything under it."""
    return all(glob_matches(key, part) for part, key in zip(pattern, path))


def unchanged(a: Snapshot, b: Snapshot, sections: list[str],
              findings: list[Finding]) -> list[str]:
    names = []
    for name, where, patterns, present in CHECKS:
        if where not in sections or collector_error(a, where) or collector_error(b, where):
            continue
        if not present(a) and not present(b):
            continue
        if not (knows(a, where, patterns) and knows(b, where, patterns)):
            continue
        touched = any(f.section == where and not f.volatile and
                      any(overlaps(p, f.path) for p in patterns) for f in findings)
        if not touched:
            names.append(name)
    return names
