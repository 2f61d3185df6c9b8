"""The same change on several GPUs of a host is one finding, not eight; every GPU is named
by its nvidia-smi index.

A driver update that lowers every power limit, or a riser that trains every link at x8,
would otherwise fill the verdict with copies. Rows merge when they change the same GPU fact
the same way and their rules say the same about each GPU. The merged row stands at the
first one's place and names the GPUs by nvidia-smi index in its path ("gpus",
"0-7 (all 8)", "power_limit_w"); a row of one GPU is named the same way ("gpus", "3",
"power_draw_w"), so one diff never names a GPU by index in one row and by bus id in the
next. A pairwise finding keeps the bus ids in detail["gpus"]. Used for diff findings and
for fleet disagreements alike.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Protocol, TypeVar

from envsnap.diff.findings import Finding, path_text

if TYPE_CHECKING:
    from envsnap.snapshot.records import Gpu


class Row(Protocol):
    """A diff finding or a fleet disagreement: what merging reads of either."""

    @property
    def section(self) -> str: ...

    @property
    def path(self) -> tuple[str, ...]: ...

    @property
    def rank(self) -> int: ...

    @property
    def why(self) -> str: ...


R = TypeVar("R", bound=Row)


def per_gpu(row: Row) -> bool:
    return row.section == "nvidia" and len(row.path) == 3 and row.path[0] == "gpus"


def names_a_gpu(row: Row) -> bool:
    """A per-GPU fact, or a whole GPU that appeared or went missing ("gpus", bus id)."""
    return row.section == "nvidia" and len(row.path) in (2, 3) and row.path[0] == "gpus"


def index_ranges(indexes: list[int]) -> str:
    """[0, 1, 2, 5] -> "0-2,5"."""
    runs: list[list[int]] = []
    for index in sorted(indexes):
        if runs and index == runs[-1][-1] + 1:
            runs[-1].append(index)
        else:
            runs.append([index])
    return ",".join(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]) for run in runs)


def gpus_key(buses: list[str], gpus: dict[str, Gpu], count: int | None) -> str:
    """"0-7 (all 8)", "0,3 (2 of 8)", "3" for one GPU: nvidia-smi's indexes where known,
    else bus ids. `count`: the host's GPUs, None where not known (a paste that shows a part
    of a table): then the share is of the GPUs listed, never "all" of the host's."""
    indexes = [gpus.get(bus, {}).get("index") for bus in buses]
    known = [i for i in indexes if isinstance(i, int)]
    if len(buses) == 1:
        return str(known[0]) if known else buses[0]
    names = index_ranges(known) if len(known) == len(buses) else ", ".join(buses)
    total, listed = (count, "") if count is not None else (len(gpus), " listed")
    share = f"all {total}" if len(buses) == total else f"{len(buses)} of {total}"
    return f"{names} ({share}{listed})"


def merged(group: list[R], gpus: dict[str, Gpu], count: int | None) -> R:
    first = group[0]
    buses = [row.path[1] for row in group]
    path = ("gpus", gpus_key(buses, gpus, count), *first.path[2:])
    old_where = path_text(first.path)
    named = f"GPUs {path[1]}" if len(group) > 1 else f"GPU {path[1]}"
    why = first.why.replace(f"GPU {first.path[1]}", named) \
                   .replace(old_where, path_text(path))
    if isinstance(first, Finding):
        return first._replace(path=path, why=why, detail={**first.detail, "gpus": buses})
    # A fleet's Disagreement, a dataclass: imported here, as the diff of two snapshots
    # (Findings alone) loads no dataclasses (docs/ARCHITECTURE.md, "Start-up").
    from dataclasses import replace

    return replace(first, path=path, why=why)  # type: ignore[type-var]


def merge_alike(rows: list[R], gpus: dict[str, Gpu], count: int | None,
                moved: Callable[[R], Any]) -> list[R]:
    """Rows in their order, those alike on several GPUs merged at the first one's place.
    `gpus`: a snapshot's nvidia gpus (for indexes); `count`: its gpu_count (None: not known);
    `moved`: what says how a row changed (before and after, or the values and their hosts),
    comparable with ==."""
    def alike(row: R) -> tuple[Any, ...]:
        return (row.path[2], row.rank, moved(row), row.why.replace(row.path[1], "*"))

    groups: dict[tuple[Any, ...], list[R]] = {}
    for row in rows:
        if per_gpu(row):
            groups.setdefault(alike(row), []).append(row)
    out: list[R] = []
    for row in rows:
        group = groups[alike(row)] if per_gpu(row) else [row]
        if len(group) == 1:
            out.append(merged(group, gpus, count) if names_a_gpu(row) else row)
        elif group[0] is row:
            out.append(merged(group, gpus, count))
    return out
