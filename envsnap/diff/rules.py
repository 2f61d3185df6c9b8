"""Ranking rules: each takes one finding and says how much it matters and why, or passes.

The first rule that answers wins, so the order of RULES is the order of precedence. Ranks
run 0-100, higher first; PERFORMANCE is the line the verdict draws: at or above it a change
may affect performance (docs/STORY.md: a pull touching the NCCL path outranks a temperature).
Every rule is a pure function of (finding, context), tested on its own.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, NamedTuple, cast

from envsnap.diff import hotpaths, patch_summary
from envsnap.diff.findings import (
    ADDED,
    MISSING,
    NOT_CAPTURED,
    REMOVED,
    Finding,
    GitMove,
    MovedCommit,
    Rating,
    change,
    git_move,
    human_bytes,
    path_text,
    short,
)
from envsnap.diff.gitexplain import verb_of
from envsnap.diff.hotpaths import CONFIGURED
from envsnap.snapshot import customize as customize_words
from envsnap.snapshot import document as snapshot_doc
from envsnap.snapshot.spec import is_object
from envsnap.text import plural

if TYPE_CHECKING:
    from envsnap.snapshot.records import (
        CustomizeFile,
        Gpu,
        InProgress,
        Snapshot,
        Stash,
        Submodule,
        Uncommitted,
    )

HOT_CONFIGURED, HOT, CODE_MOVED = 100, 97, 90
WORKER_ENV, ENV, PATCH, STARTUP_CODE = 85, 80, 78, 75
VERSIONS, PCIE_WIDTH, PCIE_GEN, THROTTLED, GPU_SETTINGS = 70, 68, 65, 60, 55
NOT_CAPTURED_RANK, KERNEL, SYSTEM, WORKERS, OTHER_ENV, PCIE_OTHER = 50, 50, 45, 40, 40, 40
GPU_PACKAGES, PACKAGES, OTHER, VOLATILE = 35, 30, 10, 5
PERFORMANCE = PACKAGES
HOT_NAMED = 3           # hot commits the verdict names, by score; the rest are counted

# Variables that steer NCCL, CUDA and torch, and the loader paths that pick their libraries.
PERF_ENV_PREFIXES = ("NCCL_", "CUDA_", "TORCH_", "PYTORCH_", "NVSHMEM_", "CUBLAS_", "CUDNN_")
PERF_ENV_NAMES = ("LD_PRELOAD", "LD_LIBRARY_PATH")
GPU_PACKAGE_PREFIXES = ("torch", "nvidia-", "triton", "flashinfer", "sglang", "vllm",
                        "xformers", "deepspeed", "cupy", "cuda-", "transformers", "sgl-")
# conda's names of the GPU stack where pip's differ (its pytorch is pip's torch)
CONDA_GPU_PREFIXES = ("pytorch", "cudatoolkit", "cudnn", "nccl", "magma")
GPU_SETTING_PREFIXES = ("persistence_mode", "ecc_mode", "mig_mode", "power_", "compute_mode",
                        "clock_app_", "clock_default_app_", "clock_max_")
BENIGN_CLOCK_REASONS = frozenset(["gpu_idle"])


class Context(NamedTuple):
    """What rules may know beyond the finding: the two names, and the newer snapshot's
    shell env and GPUs (to say "still set in the shell", "below its max"). Rules only read
    it, so the empty defaults may be shared."""

    names: tuple[str, str] = ("A", "B")
    same_host: bool = True
    shell_after: dict[str, str | None] = {}
    gpus_after: dict[str, Gpu] = {}
    documents: tuple[Snapshot, Snapshot] | None = None   # to name a customize file's place


Rule = Callable[[Finding, Context], "Rating | None"]


def moved(f: Finding, what: str) -> str:
    """"what a -> b", "what added: b", "what removed (was a)"."""
    if f.kind == ADDED:
        return f"{what} added: {short(f.after)}"
    if f.kind == REMOVED:
        return f"{what} removed (was {short(f.before)})"
    return f"{what} {change(f.before, f.after)}"


# ---- capture problems and code --------------------------------------------------------------

def not_captured(f: Finding, ctx: Context) -> Rating | None:
    if f.kind != NOT_CAPTURED:
        return None
    what = f.section if not f.path else f"{f.section} {f.where}"
    sides = [f"{name} ({error})" for name, error in zip(ctx.names, (f.before, f.after))
             if error]
    return Rating(NOT_CAPTURED_RANK, f"{what} not captured in {' and '.join(sides)}: "
                                     "not compared")


def code_moved(f: Finding, ctx: Context) -> Rating | None:
    move = git_move(f.detail)
    if f.section != "git" or f.path[-1:] != ("head",) or move is None:
        return None
    repo = f.path[1]
    copied = {pair["old"] for pair in move.get("rebased", [])}
    # A rebased commit is there twice, as it was and as its copy: it counts once.
    commits = move["added"] + [c for c in move["dropped"] if c["sha"] not in copied]
    hot = [c for c in commits if c["hot"]]
    rank = HOT_CONFIGURED if any(CONFIGURED in c["hot"] for c in hot) else \
        HOT if hot else CODE_MOVED
    return Rating(rank, "code moved: " + move_text(repo, move) + edge_text(move)
                  + hot_text(hot))


def move_text(repo: str, detail: GitMove) -> str:
    moves = detail["moves"]
    how = f" ({moves[-1]['message']})" if len(moves) == 1 else \
        f" ({plural(len(moves), 'reflog move')}, latest: {moves[0]['message']})" if moves else ""
    least = "" if detail["complete"] else "at least "
    added, dropped = len(detail["added"]), len(detail["dropped"])
    if detail["relation"] == "forward":
        return f"{least}{plural(added, 'commit')} {verb_of(moves)} {repo}{how}"
    if detail["relation"] == "backward":
        return f"HEAD of {repo} moved back, {least}{plural(dropped, 'commit')} left{how}"
    if detail.get("rebased"):
        ours = len(detail["rebased"])
        return (f"rebased {plural(ours, 'local commit')} onto {least}{added - ours} pulled in "
                f"{repo}{how}")
    if detail["relation"] == "diverged":
        return (f"history of {repo} rewritten: {least}{plural(dropped, 'commit')} replaced "
                f"by {added}{how}")
    return (f"HEAD of {repo} {short(detail['old'])} -> {short(detail['new'])}{how}; "
            f"{detail.get('note', 'commits between unknown')}")


def edge_text(detail: GitMove) -> str:
    """Where a shallow clone's history stops: the count before it is only a lower bound."""
    edge = detail.get("shallow_boundary", [])
    if not edge:
        return ""
    commits = {c["sha"]: c for c in detail["added"] + detail["dropped"]}
    named = ", ".join(f"{short(sha)} ({commits[sha]['subject']})" for sha in edge[:3])
    more = f" and {len(edge) - 3} more" if len(edge) > 3 else ""
    where = "boundary" if len(edge) == 1 else "boundaries"
    return (f", history cut at the shallow {where} {named}{more} "
            "(git fetch --unshallow fetches the rest)")


def by_score(hot: list[MovedCommit]) -> list[MovedCommit]:
    """Highest score first; equal scores keep history order (newest first)."""
    return sorted(hot, key=lambda c: -c.get("score", 0))


def named_why(commit: MovedCommit) -> str:
    """Why a commit is named: its hottest file and what kind of hot path that is."""
    path, area = next(iter(commit["hot_files"].items()))
    return f"touches {path}: {hotpaths.AREA_WHY.get(area, area)}"


def hot_text(hot: list[MovedCommit]) -> str:
    """", 6 on a hot path, hottest first: <sha> <subject> (touches <file>: communication),
    ... and 3 more": the commits named by score, each with its reason."""
    if not hot:
        return ""
    ranked = by_score(hot)
    named = ", ".join(f"{short(c['sha'])} {c['subject']} ({named_why(c)})"
                      for c in ranked[:HOT_NAMED])
    order = ", hottest first" if len(hot) > 1 else ""
    rest = f" and {len(hot) - HOT_NAMED} more" if len(hot) > HOT_NAMED else ""
    return f", {len(hot)} on a hot path{order}: {named}{rest}"


def uncommitted(f: Finding, ctx: Context) -> Rating | None:
    if f.section != "git" or len(f.path) < 3:
        return None
    repo = f.path[1]
    if f.path[2] == "uncommitted":
        return Rating(PATCH, f"uncommitted changes in {repo} changed: "
                             f"{work_text(f.before)} -> {work_text(f.after)}"
                             + untracked_text(f.before, f.after))
    if f.path[2] == "in_progress":
        return Rating(PATCH, operation_text(repo, f))
    if f.path[2] == "submodules" and len(f.path) == 4:
        return submodule_rating(repo, f)
    if f.path[2] == "reflog":
        moves = f.detail.get("moves", [])
        if f.detail.get("reflog_reaches") is False:
            return Rating(OTHER, f"HEAD of {repo} moved and came back; its reflog does not "
                                 f"reach back to {ctx.names[0]} (latest: {short(f.after)})")
        return Rating(OTHER, f"HEAD of {repo} moved and came back: "
                             f"{plural(len(moves), 'reflog move')} since ({short(f.after)})")
    if f.path[2] == "stashes" and len(f.path) == 4:
        stash: Stash = f.after if f.kind == ADDED else f.before
        message = stash.get("message")
        done = {ADDED: "added", REMOVED: "dropped or popped"}.get(f.kind, "changed")
        return Rating(PATCH, f"stash {done} in {repo}: {message or short(f.path[3])}")
    return None


def submodule_rating(repo: str, f: Finding) -> Rating:
    """A submodule (a vendored kernel library, say) checked out at another commit is code
    that moved, though the superproject's own patch shows only a pointer."""
    what = f"submodule {f.path[3]} of {repo}"
    if f.kind in (ADDED, REMOVED):
        return Rating(CODE_MOVED, f"{what} {'added' if f.kind == ADDED else 'removed'}")
    before: Submodule = f.before   # changed: a submodule on both sides (keys.repo_view)
    after: Submodule = f.after
    moved = before.get("checked_out") != after.get("checked_out")
    return Rating(CODE_MOVED if moved else PATCH,
                  f"{what}: {submodule_state(before)} -> {submodule_state(after)}")


def submodule_state(sub: Submodule) -> str:
    """"at 0b4ec65 (recorded 0eef18a), modified, untracked files"."""
    if not sub.get("initialized"):
        return f"not checked out (recorded {short(sub.get('recorded'))})"
    text = f"at {short(sub.get('checked_out'))}"
    if sub.get("recorded") != sub.get("checked_out"):
        text += f" (recorded {short(sub.get('recorded'))})"
    return text + "".join(f", {label}" for key, label in (("modified", "modified"),
                                                           ("untracked", "untracked files"))
                          if sub.get(key))


def operation_text(repo: str, f: Finding) -> str:
    """A stopped rebase (merge, cherry-pick...) leaves the tree half-way, conflicts and all."""
    before: InProgress | None = f.before    # null: no operation stopped half-way
    after: InProgress | None = f.after
    if f.kind == REMOVED or after is None:
        was = before.get("operation") if before is not None else None
        return f"the {was or 'operation'} in progress in {repo} was finished or aborted"
    return f"{in_progress_text(after)} in {repo}"


def in_progress_text(state: InProgress) -> str:
    """"rebase in progress, stopped with 1 conflicted file: README.md"."""
    text = f"{state.get('operation')} in progress"
    conflicted = state.get("conflicted", [])
    if conflicted:
        shown = ", ".join(conflicted[:5]) + (f" and {len(conflicted) - 5} more"
                                             if len(conflicted) > 5 else "")
        text += f", stopped with {plural(len(conflicted), 'conflicted file')}: {shown}"
    return text


def untracked_text(before: Uncommitted | None, after: Uncommitted | None) -> str:
    """The untracked files that changed, by name: "2 untracked files" on both sides says
    nothing when one of them was rewritten."""
    old, new = (w.get("untracked", {}) if w is not None else {} for w in (before, after))
    parts = []
    for label, names in (("changed", [p for p in new if p in old and old[p] != new[p]]),
                         ("new", [p for p in new if p not in old]),
                         ("gone", [p for p in old if p not in new])):
        if names:
            more = f" and {len(names) - 5} more" if len(names) > 5 else ""
            parts.append(f"{label} {', '.join(str(n) for n in names[:5])}{more}")
    return f"; untracked files {'; '.join(parts)}" if parts else ""


def work_text(work: Uncommitted | None) -> str:
    if work is None:    # not a repository with a work tree (or an older capture)
        return short(work)
    if not work.get("dirty"):
        return "clean"
    patch = work.get("patch")
    if patch is None or not patch_summary.is_blob(patch):
        return "dirty"
    files = patch_summary.files_in(patch)
    binary = ", binary" if patch_summary.is_binary(patch) else ""
    untracked = work.get("untracked_count") or 0
    extra = f", {plural(untracked, 'untracked file')}" if untracked else ""
    return (f"patch {human_bytes(patch.get('bytes'))} sha256 {str(patch.get('sha256'))[:12]} "
            f"({plural(files, 'file')}{binary}){extra}")


# ---- environment ------------------------------------------------------------------------------

def is_perf_var(name: str) -> bool:
    """CUDA_VERSION, NCCL_VERSION and the like describe a container image; they steer nothing."""
    return (name.startswith(PERF_ENV_PREFIXES) or name in PERF_ENV_NAMES) and \
        not name.endswith("_VERSION")


def worker_env(f: Finding, ctx: Context) -> Rating | None:
    if f.section != "env" or f.path[:1] != ("processes",) or len(f.path) < 2:
        return None
    worker = f"worker {f.detail.get('pid_after') or f.detail.get('pid_before') or f.path[1]}"
    launcher_rank = f.detail.get("rank")
    if launcher_rank is not None:  # which of eight alike workers: the launcher's RANK
        worker += f" (rank {launcher_rank})"
    if len(f.path) == 2:
        gone = f"{worker} ({short(f.path[1], 60)})"
        return Rating(WORKERS, f"{gone} not running in {ctx.names[1]}: its env is not compared"
                      if f.kind == REMOVED else f"new {gone}")
    if len(f.path) < 4 or f.path[2] != "env":
        return Rating(WORKERS, moved(f, f"{worker} {path_text(f.path[2:])}"))
    name = f.path[3]
    rank = WORKER_ENV if is_perf_var(name) else OTHER_ENV
    if f.kind == MISSING:
        return Rating(rank, f"{name}={short(f.before)} set in the shell but missing in new "
                            f"{worker}")
    if f.kind == REMOVED:
        still = " (still set in the shell)" if name in ctx.shell_after else ""
        return Rating(rank, f"{name}={short(f.before)} missing in {worker}{still}")
    if f.kind == ADDED:
        return Rating(rank, f"{name}={short(f.after)} new in {worker}")
    return Rating(rank, f"{name} {change(f.before, f.after)} in {worker}")


def shell_env(f: Finding, ctx: Context) -> Rating | None:
    if f.section != "env" or f.path[:1] != ("shell",) or len(f.path) != 2:
        return None
    rank = ENV if is_perf_var(f.path[1]) else OTHER_ENV
    return Rating(rank, moved(f, f"{f.path[1]} in the shell"))


def startup_code(f: Finding, ctx: Context) -> Rating | None:
    if f.section != "python_env" or f.path[:1] not in (("customize",), ("startup_pth",)):
        return None
    what = f.path[1] if f.path[0] == "customize" and len(f.path) > 1 else \
        f"startup .pth {f.path[1] if len(f.path) > 1 else ''}".strip()
    # the file that runs is another one: said first, it is what the user looks for
    was, now = (customize_path(side) for side in (f.before, f.after))
    move = f"the {what} that runs moved from {was} to {now}; " \
        if f.path[0] == "customize" and was and now and was != now else ""
    return Rating(STARTUP_CODE, f"{move}{what} changed: it runs in every python process and "
                                f"can set NCCL/CUDA env ({change(f.before, f.after)})")


def customize_path(value: Any) -> str | None:
    """A customize record's path and where its link leads; None for anything else."""
    if not is_object(value) or not value.get("path"):
        return None
    file = cast("CustomizeFile", value)
    return customize_words.linked(file.get("path"), file.get("real_path"))


def shadowed_code(f: Finding, ctx: Context) -> Rating | None:
    """A sitecustomize.py/usercustomize.py that never runs (an earlier one on sys.path is
    imported): a change to it has no effect, unless it started or stopped running."""
    if f.section != "python_env" or f.path[:1] != ("customize_shadowed",) or len(f.path) != 2:
        return None
    path = f.path[1]
    record = f.before if f.kind == REMOVED else f.after
    if ctx.documents is None or not is_object(record):
        return None
    before, after = ctx.documents
    name = customize_words.place(after if f.kind != REMOVED else before, path)
    by = customize_words.linked(record.get("shadowed_by"), record.get("shadowed_by_real"))
    if f.kind == REMOVED and runs(after, path):
        return Rating(PACKAGES, f"{name} is no longer shadowed: it now runs")
    if f.kind == ADDED and runs(before, path):
        return Rating(PACKAGES, f"{name} no longer runs: it is now shadowed by {by}")
    if f.kind == REMOVED:
        return Rating(OTHER, f"{name} removed: it was shadowed by {by} and never ran, "
                             "so that has no effect")
    verb = "added" if f.kind == ADDED else "changed"
    return Rating(OTHER, f"{name} {verb}, but it is shadowed by {by}: it never runs, so the "
                         "change has no effect")


def runs(document: Snapshot, path: str) -> bool:
    """`path` is the file of a customize hook this snapshot's python imports."""
    hooks = snapshot_doc.python_env(document).get("customize", {})
    return any(hook and hook.get("path") == path for hook in hooks.values())


# ---- versions and hardware ------------------------------------------------------------------

VERSION_PATHS: list[tuple[str, str, str]] = [
    ("nvidia", "driver", "NVIDIA driver"), ("nvidia", "cuda_driver", "CUDA driver API"),
    ("nvidia", "kernel_module", "NVIDIA kernel module"),
    ("nvidia", "userspace_library", "NVML library"), ("nvidia", "nvml_version", "NVML"),
    ("cuda_nccl", "cuda_toolkit", "CUDA toolkit"), ("cuda_nccl", "nccl", "NCCL"),
    ("cuda_nccl", "torch", "torch"), ("cuda_nccl", "cudnn", "cuDNN"),
]


def versions(f: Finding, ctx: Context) -> Rating | None:
    if f.volatile or not f.path or f.path[:2] == ("kernel_module", "params"):
        return None
    for section, top, label in VERSION_PATHS:
        if f.section == section and f.path[0] == top:
            rest = ".".join(f.path[1:])
            return Rating(VERSIONS, moved(f, f"{label} {rest}".strip()))
    return None


def gpu_of(f: Finding) -> str:
    return f"GPU {f.path[1]}" if len(f.path) > 1 else "GPU"


def pcie(f: Finding, ctx: Context) -> Rating | None:
    if f.section != "nvidia" or len(f.path) != 3 or f.path[0] != "gpus" \
            or not f.path[2].startswith("pcie_"):
        return None
    gpu = ctx.gpus_after.get(f.path[1], {})
    width, width_max = gpu.get("pcie_width_current"), gpu.get("pcie_width_max")
    gen, gen_max = gpu.get("pcie_gen_current"), gpu.get("pcie_gen_max")
    link = f"{gpu_of(f)} PCIe link Gen{gen} x{width}"
    if "width" in f.path[2] and below(width, width_max):
        return Rating(PCIE_WIDTH, f"{link}: width below its max x{width_max} "
                                  f"({moved(f, f.path[2])})")
    if "gen" in f.path[2] and below(gen, gen_max):
        return Rating(PCIE_GEN, f"{link}: speed below its max Gen{gen_max} ({moved(f, f.path[2])};"
                                " an idle GPU may lower it to save power: check under load)")
    return Rating(PCIE_OTHER, moved(f, f"{gpu_of(f)} {f.path[2]}"))


def below(current: Any, maximum: Any) -> bool:
    return isinstance(current, int) and isinstance(maximum, int) and current < maximum


def throttled(f: Finding, ctx: Context) -> Rating | None:
    if f.section != "nvidia" or f.path[-1:] != ("clock_event_reasons",):
        return None
    before, after = set(f.before or []), set(f.after or [])
    new = sorted(after - before - BENIGN_CLOCK_REASONS)
    was = ", ".join(sorted(before)) or "none"
    if new:
        return Rating(THROTTLED, f"{gpu_of(f)} clocks held back by {', '.join(new)} (was: {was})")
    return Rating(OTHER, f"{gpu_of(f)} clock event reasons {was} -> "
                         f"{', '.join(sorted(after)) or 'none'}")


def gpu_settings(f: Finding, ctx: Context) -> Rating | None:
    if f.section != "nvidia" or f.volatile or not f.path:
        return None
    if f.path[:2] == ("kernel_module", "params"):
        return Rating(GPU_SETTINGS, moved(f, f"kernel module parameter {'.'.join(f.path[2:])}"))
    if f.path[0] == "gpus" and len(f.path) == 2:
        gone = "missing" if f.kind == REMOVED else "new" if f.kind == ADDED else "changed"
        return Rating(VERSIONS, f"{gpu_of(f)} {gone} in {ctx.names[1]}")
    if f.path[0] == "gpus" and len(f.path) >= 3 and f.path[2].startswith(GPU_SETTING_PREFIXES):
        return Rating(GPU_SETTINGS, moved(f, f"{gpu_of(f)} {'.'.join(f.path[2:])}"))
    return None


# ---- host, python, the rest ---------------------------------------------------------------

SYSTEM_PATHS: dict[str, tuple[int, str]] = {
    "kernel": (KERNEL, "kernel"), "cmdline": (SYSTEM, "kernel command line"),
    "governors": (SYSTEM, "CPU frequency governor"), "cpu": (SYSTEM, "CPU"),
    "iommu": (SYSTEM, "IOMMU"), "transparent_hugepage": (GPU_PACKAGES, "transparent hugepages"),
    "numa": (PACKAGES, "NUMA layout"), "limits": (PACKAGES, "resource limits"),
    "memory": (PACKAGES, "memory"), "os_release": (PACKAGES, "OS release"),
}


def system(f: Finding, ctx: Context) -> Rating | None:
    if f.section != "system" or f.volatile or not f.path:
        return None
    if f.path[0] == "boot_id":
        return Rating(SYSTEM, "host rebooted between the snapshots") if ctx.same_host \
            else Rating(VOLATILE, "boot id differs: different hosts")
    if f.path[0] == "hostname":
        return Rating(OTHER, moved(f, "hostname"))
    rank, label = SYSTEM_PATHS.get(f.path[0], (OTHER, f.path[0]))
    return Rating(rank, moved(f, f"{label} {'.'.join(f.path[1:])}".strip()))


def python_env(f: Finding, ctx: Context) -> Rating | None:
    if f.section != "python_env" or not f.path:
        return None
    if f.path[0] == "interpreter":
        return Rating(KERNEL, moved(f, f"python {'.'.join(f.path[1:])}".strip()))
    if f.path[0] == "packages" and len(f.path) == 2:
        gpu_stack = f.path[1].lower().startswith(GPU_PACKAGE_PREFIXES)
        return Rating(GPU_PACKAGES if gpu_stack else PACKAGES, moved(f, f"package {f.path[1]}"))
    if f.path[0] == "conda" and len(f.path) >= 2:     # an imported conda list's rows
        gpu_stack = f.path[1].lower().startswith(GPU_PACKAGE_PREFIXES + CONDA_GPU_PREFIXES)
        return Rating(GPU_PACKAGES if gpu_stack else PACKAGES,
                      moved(f, f"conda package {path_text(f.path[1:])}"))
    return Rating(PACKAGES, moved(f, f"python {f.where}"))


def volatile(f: Finding, ctx: Context) -> Rating | None:
    return Rating(VOLATILE, moved(f, f"{f.section} {f.where} (reading)"), restates=True) \
        if f.volatile else None


def anything(f: Finding, ctx: Context) -> Rating | None:
    return Rating(OTHER, moved(f, f"{f.section} {f.where}".strip()), restates=True)


RULES: list[Rule] = [not_captured, code_moved, uncommitted, worker_env, shell_env, startup_code,
                     shadowed_code,
                     throttled, versions, pcie, gpu_settings, system, python_env, volatile,
                     anything]


def rate(f: Finding, ctx: Context) -> Rating:
    for rule in RULES:
        rating = rule(f, ctx)
        if rating is not None:
            return rating
    raise AssertionError("the last rule always answers")


def rank_all(findings: list[Finding], ctx: Context) -> list[Finding]:
    """Rated, most important first; ties keep the walk's order (section, then key order)."""
    rated = [f._replace(rank=r.rank, why=r.why, why_restates_row=r.restates)
             for f in findings for r in [rate(f, ctx)]]
    return sorted(rated, key=lambda f: -f.rank)
