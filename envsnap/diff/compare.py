"""Two snapshots -> findings, ranked by what matters for performance.

Fast by design: the per-section digests recorded at capture time are compared first and only
sections that differ are walked. Sections are maps keyed by natural ids (bus id, package,
env var, repo path), so the walk is a plain key-by-key descent that stops at every equal
subtree (one C-level `==`), never a positional list diff; lists are compared whole. The few
things whose natural id is not their key (workers, stashes) are re-keyed by keys.py first.
"""
from __future__ import annotations

import fnmatch
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable

from envsnap.agent.sections import SECTIONS
from envsnap.diff import rules
from envsnap.diff.findings import (
    ADDED,
    CHANGED,
    MISSING,
    NOT_CAPTURED,
    REMOVED,
    Finding,
    FindingKind,
)
from envsnap.diff.gitexplain import explain, hot_patterns, moves_since
from envsnap.diff.gpumerge import merge_alike
from envsnap.diff.keys import Atom, env_view, repo_view
from envsnap.errors import UsageError
from envsnap.snapshot.document import bench as bench_of
from envsnap.snapshot.document import (
    capture_config,
    captured_at,
    collector_error,
    hostname,
    section,
    section_digest,
    section_names,
)
from envsnap.snapshot.document import host as host_of
from envsnap.snapshot.document import label as label_of

if TYPE_CHECKING:
    from envsnap.diff.benchmark import Benchmark

# Raw bit masks beside their decoded name lists: one change, reported once.
SKIP_KEYS = frozenset(["clock_event_reasons_mask", "clock_event_reasons_supported_mask"])
Path = tuple[str, ...]


@dataclass(frozen=True)
class DiffOptions:
    include_volatile: bool = False
    sections: tuple[str, ...] = ()  # empty: every section


@dataclass(frozen=True)
class Side:
    """One snapshot as a report names it."""

    label: str
    host: str
    hostname: str | None
    captured_at: str
    source: str

    def as_json(self) -> dict[str, Any]:
        return {"label": self.label, "host": self.host, "hostname": self.hostname,
                "captured_at": self.captured_at, "source": self.source}

    @property
    def name(self) -> str:
        return self.hostname or self.host


@dataclass
class DiffReport:
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
    benchmark: Benchmark | None = None

    @property
    def drift(self) -> bool:
        """A fact changed; readings shown by --all (clocks, load) are not drift."""
        return any(not f.volatile for f in self.findings)

    @property
    def regression(self) -> bool:
        """The benchmark's verdict is a regression (`diff --fail-on regression`)."""
        return self.benchmark is not None and self.benchmark.regression


# ---- the entry point -------------------------------------------------------------------------

def diff(a: dict[str, Any], b: dict[str, Any], options: DiffOptions | None = None,
         sources: tuple[str, str] = ("", "")) -> DiffReport:
    options = options or DiffOptions()
    side_a, side_b = side_of(a, sources[0]), side_of(b, sources[1])
    if side_a.label == side_b.label and sources[0] != sources[1]:
        # a copied or renamed file keeps its old label: name both by what was asked for
        side_a, side_b = replace(side_a, label=sources[0]), replace(side_b, label=sources[1])
    same_host = same_machine(side_a, side_b)
    sections = sections_of(a, b, options.sections)
    patterns = hot_patterns(configured_hot_paths(a, b))
    notes: list[str] = []
    raw: list[Finding] = []
    for name in sections:
        raw += compare_section(name, a, b, options, patterns, notes)
    context = rules.Context(names=(side_a.label, side_b.label), same_host=same_host,
                            shell_after=section(b, "env").get("shell") or {},
                            gpus_after=section(b, "nvidia").get("gpus") or {})
    findings = merge_alike(rules.rank_all(raw, context), context.gpus_after, how_it_moved)
    return DiffReport(side_a, side_b, findings, unchanged(a, b, sections, findings), notes,
                      same_host, sections, options.include_volatile,
                      benchmark_of(a, b, (side_a.label, side_b.label)))


def benchmark_of(a: dict[str, Any], b: dict[str, Any],
                 labels: tuple[str, str]) -> Benchmark | None:
    """Both sides' runs compared; the module loads only when both hold runs (start-up)."""
    if bench_of(a) is None or bench_of(b) is None:
        return None
    from envsnap.diff.benchmark import compare_benchmarks

    return compare_benchmarks(a, b, labels)


def how_it_moved(f: Finding) -> tuple[Any, ...]:
    return f.kind, repr(f.before), repr(f.after), f.volatile


def same_machine(a: Side, b: Side) -> bool:
    """By hostname when both snapshots recorded one; a failed system collector leaves only
    the name the host was reached by, which is compared with its own kind."""
    if a.hostname and b.hostname:
        return a.hostname == b.hostname
    return a.host == b.host


def side_of(document: dict[str, Any], source: str) -> Side:
    return Side(label=label_of(document, source or "?"), host=host_of(document),
                hostname=hostname(document), captured_at=captured_at(document) or "?",
                source=source)


def sections_of(a: dict[str, Any], b: dict[str, Any], wanted: tuple[str, ...]) -> list[str]:
    present = list(SECTIONS) + sorted((set(section_names(a)) | set(section_names(b))) -
                                           set(SECTIONS))
    unknown = [name for name in wanted if name not in present]
    if unknown:
        raise UsageError(f"unknown section {', '.join(unknown)}: choose from "
                         f"{', '.join(present)}")
    names = [n for n in present if n in section_names(a) or n in section_names(b)]
    return [n for n in names if not wanted or n in wanted]


def configured_hot_paths(*documents: dict[str, Any]) -> list[str]:
    found: list[str] = []
    for document in documents:
        config = capture_config(document)
        found += [str(p) for p in config.get("hot_paths") or [] if str(p) not in found]
    return found


# ---- one section -------------------------------------------------------------------------------

def digest(document: dict[str, Any], name: str) -> str:
    """The digest recorded at capture; computed only for a snapshot that lacks it."""
    recorded = (document.get("digests") or {}).get(name)
    return recorded if isinstance(recorded, str) else section_digest(section(document, name))


def compare_section(name: str, a: dict[str, Any], b: dict[str, Any], options: DiffOptions,
                    patterns: list[tuple[str, str]], notes: list[str]) -> list[Finding]:
    error_a, error_b = collector_error(a, name), collector_error(b, name)
    if error_a or error_b:
        # A failed collector recorded nothing: that is "not captured", never "all removed".
        if error_a == error_b:
            notes.append(f"{name} was not captured in either snapshot ({error_a})")
            return []
        return [Finding(name, (), error_a, error_b, NOT_CAPTURED)]
    found: list[Finding] = []
    before, after = section(a, name), section(b, name)
    if digest(a, name) != digest(b, name):
        found += section_changes(name, before, after, patterns)
    elif before != after:
        # Equal digests vouch for nothing once a snapshot was edited by hand (a redaction
        # before attaching it to a bug report, say): the values decide, at C speed.
        notes.append(f"{name} differs although both recorded digests match: a snapshot "
                     "was edited after capture")
        found += section_changes(name, before, after, patterns)
    if options.include_volatile:
        before = (a.get("volatile") or {}).get(name) or {}
        after = (b.get("volatile") or {}).get(name) or {}
        found += [replace(f, volatile=True) for f in walk_findings(name, before, after)]
    return found


def section_changes(name: str, before: Any, after: Any,
                    patterns: list[tuple[str, str]]) -> list[Finding]:
    if name == "env" and isinstance(before, dict) and isinstance(after, dict):
        return env_changes(before, after)
    if name == "git" and isinstance(before, dict) and isinstance(after, dict):
        return git_changes(before, after, patterns)
    return walk_findings(name, before, after)


# ---- the walk ----------------------------------------------------------------------------------

def is_mapping(value: Any) -> bool:
    """A dict to descend into; a dict with a sha256 is a recorded blob, compared whole."""
    return isinstance(value, dict) and "sha256" not in value


def unwrap(value: Any) -> Any:
    return value.value if isinstance(value, Atom) else value


def walk(before: Any, after: Any,
         path: Path = ()) -> Iterator[tuple[Path, Any, Any, FindingKind]]:
    if before == after:
        return
    if not (is_mapping(before) and is_mapping(after)):
        yield path, unwrap(before), unwrap(after), CHANGED
        return
    for key in list(before) + [k for k in after if k not in before]:
        if key in SKIP_KEYS:
            continue
        sub = path + (str(key),)
        if key not in after:
            yield sub, unwrap(before[key]), None, REMOVED
        elif key not in before:
            yield sub, None, unwrap(after[key]), ADDED
        else:
            yield from walk(before[key], after[key], sub)


def walk_findings(name: str, before: Any, after: Any, path: Path = (),
                  detail: dict[str, Any] | None = None) -> list[Finding]:
    return [Finding(name, where, old, new, kind, detail=dict(detail or {}))
            for where, old, new, kind in walk(before, after, path)]


# ---- env: workers matched by command line ------------------------------------------------------

def env_changes(before: dict[str, Any], after: dict[str, Any]) -> list[Finding]:
    view_a, known_a = env_view(before)
    view_b, known_b = env_view(after)
    workers_a, workers_b = view_a.pop("processes"), view_b.pop("processes")
    found = walk_findings("env", view_a, view_b)
    for key in list(workers_a) + [k for k in workers_b if k not in workers_a]:
        was, now = known_a.get(key), known_b.get(key)
        rank = known_a[key].rank if key in known_a else known_b[key].rank   # one rank per key
        detail = {"worker": key, "pid_before": was.pid if was else None,
                  "pid_after": now.pid if now else None, "rank": rank}
        found += worker_changes(key, workers_a.get(key), workers_b.get(key), detail)
        if key not in workers_a:
            found += missing_in_worker(key, workers_b[key], view_b.get("shell") or {}, detail)
    return found


def missing_in_worker(key: str, worker: Any, shell: dict[str, Any],
                      detail: dict[str, Any]) -> list[Finding]:
    """A worker with nothing to compare against is still checked against the shell: a
    tuning variable the shell has and the worker lacks is the first suspect in docs/STORY.md."""
    env = worker.get("env") if isinstance(worker, dict) else None
    if not isinstance(env, dict) or "error" in env:
        return []
    return [Finding("env", ("processes", key, "env", name), value, None, MISSING,
                    detail=dict(detail))
            for name, value in shell.items() if rules.is_perf_var(name) and name not in env]


def worker_changes(key: str, before: Any, after: Any,
                   detail: dict[str, Any]) -> list[Finding]:
    path = ("processes", key)
    if before is None or after is None:
        kind: FindingKind = ADDED if before is None else REMOVED
        return [Finding("env", path, before, after, kind, detail=detail)]
    env_a, env_b = before.get("env"), after.get("env")
    unreadable = [e for e in (env_a, env_b) if isinstance(e, dict) and "error" in e]
    if unreadable and env_a != env_b:
        # An unreadable environ (another user's process) is not an emptied one.
        rest = walk_findings("env", drop(before, "env"), drop(after, "env"), path, detail)
        return rest + [Finding("env", path + ("env",), error_of(env_a), error_of(env_b),
                               NOT_CAPTURED, detail=detail)]
    return walk_findings("env", before, after, path, detail)


def drop(mapping: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in mapping.items() if k != key}


def error_of(value: Any) -> str | None:
    return str(value["error"]) if isinstance(value, dict) and "error" in value else None


# ---- git: HEAD moves explained, stashes by sha, uncommitted work as one unit ------------------

def git_changes(before: dict[str, Any], after: dict[str, Any],
                patterns: list[tuple[str, str]]) -> list[Finding]:
    found = walk_findings("git", drop(before, "repos"), drop(after, "repos"))
    repos_a, repos_b = before.get("repos") or {}, after.get("repos") or {}
    for path in list(repos_a) + [p for p in repos_b if p not in repos_a]:
        found += repo_changes(path, repos_a.get(path), repos_b.get(path), patterns)
    return found


def repo_changes(path: str, before: Any, after: Any,
                 patterns: list[tuple[str, str]]) -> list[Finding]:
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


def drop_keys(mapping: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in mapping.items() if k not in keys}


def reflog_top(repo: dict[str, Any]) -> Any:
    log = repo.get("reflog") or []
    return log[0] if log else None


def reflog_finding(where: Path, before: dict[str, Any], after: dict[str, Any]) -> Finding:
    """HEAD is back where it was, but it moved in between (a checkout and back, a reset)."""
    old_top = reflog_top(before)
    # Matched by what an entry says, not by its HEAD@{n} name, which shifts with every move.
    entries, reaches = moves_since(before, after)
    return Finding("git", where + ("reflog",), (old_top or {}).get("message"),
                   (reflog_top(after) or {}).get("message"),
                   detail={"moves": entries, "reflog_reaches": reaches})


# ---- what was checked and found equal -----------------------------------------------------------

Check = tuple[str, str, list[Path], Callable[[dict[str, Any]], bool]]
CHECKS: list[Check] = [
    ("driver", "nvidia", [("driver",), ("cuda_driver",), ("userspace_library",)],
     lambda s: bool(s.get("driver"))),
    ("kernel module", "nvidia", [("kernel_module",)], lambda s: bool(s.get("kernel_module"))),
    ("CUDA", "cuda_nccl", [("cuda_toolkit",)], lambda s: bool(s.get("cuda_toolkit"))),
    ("NCCL", "cuda_nccl", [("nccl",)], lambda s: any(
        (s.get("nccl") or {}).get(k) for k in ("libraries", "wheels"))),
    ("torch", "cuda_nccl", [("torch",)], lambda s: bool((s.get("torch") or {}).get("version"))),
    ("PCIe", "nvidia", [("gpus", "*", "pcie_*")], lambda s: bool(s.get("gpus"))),
    ("git HEAD", "git", [("repos", "*", "head")],
     lambda s: bool(s.get("repos"))),
    ("NCCL/CUDA env", "env", [("shell", "NCCL_*"), ("shell", "CUDA_*"),
                              ("processes", "*", "env")], lambda s: True),
    ("sitecustomize", "python_env", [("customize",)], lambda s: True),
]


def overlaps(pattern: Path, path: Path) -> bool:
    """A finding at `path` touches what `pattern` names; a shorter path (a whole GPU or
    repository added or removed) touches everything under it."""
    return all(fnmatch.fnmatchcase(key, part) for part, key in zip(pattern, path))


def unchanged(a: dict[str, Any], b: dict[str, Any], sections: list[str],
              findings: list[Finding]) -> list[str]:
    names = []
    for name, where, patterns, present in CHECKS:
        if where not in sections or collector_error(a, where) or collector_error(b, where):
            continue
        if not present(section(a, where)) and not present(section(b, where)):
            continue
        touched = any(f.section == where and not f.volatile and
                      any(overlaps(p, f.path) for p in patterns) for f in findings)
        if not touched:
            names.append(name)
    return names
