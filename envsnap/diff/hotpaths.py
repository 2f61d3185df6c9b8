"""Which files of a commit lie on a performance-hot path, and how hot: weighted evidence.

A pattern names whole path segments, never a substring of one ("attention" does not match
docs/attention_backend.md, "scheduler" does not match scheduler_metrics_mixin.py):

- `name` (no slash): one segment, a directory or the file name, as a glob (`*`, `?`, `[...]`
  stay inside the segment); a plain name also matches a file name less its extension, so
  `pynccl` matches pynccl.py but not pynccl_wrapper.py.
- `name/` (a trailing slash): a directory of that name anywhere in the path (`distributed/`).
- `a/b/...` (a slash inside): the path from the repository's root, as a glob whose `*`
  crosses slashes, or any directory above the file (`python/sglang/srt/distributed/*`,
  `python/sglang/srt/distributed`).

Each default pattern carries a weight by how specific it is to the performance of multi-GPU
inference (DEFAULT_HOT_PATHS, documented in docs/guide/diff.md): communication (NCCL, collectives,
the distributed layer) above kernel families (attention backends, MoE kernels) above generic
components (scheduler, model runner, CUDA graphs). A configured pattern (`capture --hot-path`,
the inventory's `hot_paths`) outranks every default. Docs, tests, benchmarks, examples and CI
configuration are never hot by default (NEVER_HOT), though a configured pattern may name them:
a pull's README edits must not stand before its all-reduce fix.

A commit is judged by what it changes on a hot path, not by the hottest name among its files:
each weight counts in full when at least 1/CONCENTRATED of the commit's code files (those
NEVER_HOT leaves out: its docs and tests are not what it changes in what runs) lie on a path
that hot, and in proportion below that; the commit scores the best of these, plus up to
SHARE_BONUS for the share of its code files that are hot. So a one-file fix in the
distributed layer stands before a reorganisation of dozens of files that moves one file
named for all-reduce, and a change concentrated on one kind still stands before one of a
lighter kind (the weights lie more than SHARE_BONUS apart). A pattern as broad as a package
of all the models (`model_executor/`) is no evidence at all: it would mark most of a big
pull hot.
"""
from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from functools import cache
from typing import Literal, NamedTuple

HotArea = Literal["configured", "communication", "kernel", "component"]
CONFIGURED: HotArea = "configured"
# How a verdict says why a commit is named: "touches <file>: communication".
AREA_WHY: dict[str, str] = {"configured": "configured hot path",
                                "communication": "communication", "kernel": "kernel family",
                                "component": "generic component"}
CONFIGURED_WEIGHT = 100
SHARE_BONUS = 9
CONCENTRATED = 10   # a weight counts in full from a tenth of the code files on its path


class HotPattern(NamedTuple):
    """One hot-path pattern: what it matches, how hot a match is, and of which kind."""

    pattern: str
    weight: int
    area: HotArea


def default(area: HotArea, weight: int, *patterns: str) -> list[HotPattern]:
    return [HotPattern(p, weight, area) for p in patterns]


DEFAULT_HOT_PATHS: tuple[HotPattern, ...] = (
    *default("communication", 90, "device_communicators/", "pynccl*", "*nccl*",
             "custom_all_reduce*", "*all_reduce*", "*allreduce*"),
    *default("communication", 80, "distributed/", "parallel_state.py",
             "communication_op.py", "*all_to_all*", "*all2all*"),
    *default("kernel", 60, "attention", "*attention*/", "*attention_backend*",
             "*attn_backend*", "fused_moe*", "*moe*/", "moe.py"),
    *default("kernel", 50, "kernels/", "csrc/"),
    *default("component", 30, "scheduler.py", "scheduler/", "model_runner*",
             "cuda_graph_runner*", "*cuda_graph*", "*cudagraph*"),
)
# Never hot by default, whatever default pattern they match: what they change is not what runs.
NEVER_HOT: tuple[str, ...] = (
    "*.md", "*.rst", "docs/", "doc/",                                 # docs
    "test/", "tests/", "test_*.py", "*_test.py", "conftest.py",       # tests
    "benchmark/", "benchmarks/", "examples/", "example/",             # benchmarks, examples
    ".github/", ".gitlab-ci.yml", ".gitlab/", ".buildkite/", ".circleci/", ".ci/",  # CI
)


class HotMatch(NamedTuple):
    """A file's hottest pattern."""

    path: str
    pattern: HotPattern


def hot_patterns(configured: Iterable[str] = ()) -> tuple[HotPattern, ...]:
    """Configured patterns first: they are what the user asked about, and outrank defaults."""
    return tuple(HotPattern(str(p), CONFIGURED_WEIGHT, CONFIGURED) for p in configured) + \
        DEFAULT_HOT_PATHS


def matches(pattern: str, path: str) -> bool:
    """Whether `pattern` names `path` (the module docstring's three forms); case-insensitive."""
    pattern, path = pattern.lower(), path.lower().strip("/")
    segments = path.split("/")
    if pattern.endswith("/"):
        name = pattern.rstrip("/")
        if "/" in name:
            return path.startswith(name + "/") or fnmatch.fnmatchcase(path, name + "/*")
        return any(glob_matches(d, name) for d in segments[:-1])
    if "/" in pattern:
        pattern = pattern.lstrip("/")
        parents = ["/".join(segments[:n]) for n in range(1, len(segments))]
        return any(glob_matches(p, pattern) for p in [path, *parents])
    stem = segments[-1].rsplit(".", 1)[0]
    return any(glob_matches(s, pattern) for s in segments) or \
        (is_plain(pattern) and stem == pattern)


@cache   # asked for each path segment of each file of a pull
def is_plain(pattern: str) -> bool:
    return not any(c in pattern for c in "*?[")


def glob_matches(name: str, pattern: str) -> bool:
    """fnmatch.fnmatchcase, without compiling a regex for a pattern with no wildcard (it
    matches only itself): most patterns a diff checks have none, and compiling each would
    be a large part of `envsnap diff`'s comparing."""
    return name == pattern if is_plain(pattern) else fnmatch.fnmatchcase(name, pattern)


def never_hot(path: str) -> bool:
    return any(matches(p, path) for p in NEVER_HOT)


def hottest(path: str, patterns: Iterable[HotPattern]) -> HotPattern | None:
    """The heaviest pattern that names the file (the first of equal weights), or None."""
    excluded = never_hot(path)
    found = [p for p in patterns
             if (p.area == CONFIGURED or not excluded) and matches(p.pattern, path)]
    return max(found, key=lambda p: p.weight) if found else None


def hot_files(files: Iterable[str], patterns: Iterable[HotPattern]) -> list[HotMatch]:
    """The commit's hot files, hottest first (ties keep the commit's own order)."""
    listed = tuple(patterns)
    found = [HotMatch(path, p) for path in files if (p := hottest(path, listed)) is not None]
    return sorted(found, key=lambda m: -m.pattern.weight)


def touches(match: HotMatch) -> str:
    """Why a file is hot, as a verdict says it: "touches <file>: communication"."""
    return f"touches {match.path}: {AREA_WHY.get(match.pattern.area, match.pattern.area)}"


def score(hot: list[HotMatch], files: list[str]) -> int:
    """What the commit changes on hot paths (the module docstring): for each weight among its
    hot files, that weight in proportion to the share of its code files on a path at least
    that hot (in full from 1/CONCENTRATED); the best of these, plus up to SHARE_BONUS for
    the share of its code files that are hot."""
    if not hot:
        return 0
    code = max(sum(1 for path in files if not never_hot(path)), len(hot))

    def reach(weight: int) -> float:
        at_least = sum(1 for m in hot if m.pattern.weight >= weight)
        return weight * min(1.0, CONCENTRATED * at_least / code)

    best = max(reach(weight) for weight in {m.pattern.weight for m in hot})
    return round(best + SHARE_BONUS * len(hot) / code)
