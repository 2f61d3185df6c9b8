"""The same change on several GPUs of a host is one finding, not eight.

A driver update that lowers every power limit, or a riser that trains every link at x8,
would otherwise fill the verdict with copies. Findings merge when they change the same GPU
fact the same way and their rules say the same about each GPU. The merged finding stands
at the first one's place, names the GPUs by nvidia-smi index in its path ("gpus",
"0-7 (all 8)", "power_limit_w") and lists their bus ids in detail["gpus"].
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from .findings import Finding, path_text


def per_gpu(f: Finding) -> bool:
    return f.section == "nvidia" and len(f.path) == 3 and f.path[0] == "gpus"


def alike_key(f: Finding) -> tuple[Any, ...]:
    bus = f.path[1]
    return (f.path[2], f.kind, repr(f.before), repr(f.after), f.rank, f.volatile,
            f.why.replace(bus, "*"))


def index_ranges(indexes: list[int]) -> str:
    """[0, 1, 2, 5] -> "0-2,5"."""
    runs: list[list[int]] = []
    for index in sorted(indexes):
        if runs and index == runs[-1][-1] + 1:
            runs[-1].append(index)
        else:
            runs.append([index])
    return ",".join(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]) for run in runs)


def gpus_key(buses: list[str], gpus: dict[str, Any]) -> str:
    """"0-7 (all 8)", "0,3 (2 of 8)": nvidia-smi's indexes where known, else bus ids."""
    indexes = [(gpus.get(bus) or {}).get("index") for bus in buses]
    known = [i for i in indexes if isinstance(i, int)]
    names = index_ranges(known) if len(known) == len(buses) else ", ".join(buses)
    share = f"all {len(gpus)}" if len(buses) == len(gpus) else f"{len(buses)} of {len(gpus)}"
    return f"{names} ({share})"


def merged(group: list[Finding], gpus: dict[str, Any]) -> Finding:
    first = group[0]
    buses = [f.path[1] for f in group]
    path = ("gpus", gpus_key(buses, gpus), first.path[2])
    why = first.why.replace(f"GPU {first.path[1]}", f"GPUs {path[1]}") \
                   .replace(first.where, path_text(path))
    return replace(first, path=path, why=why, detail={**first.detail, "gpus": buses})


def merge_alike(findings: list[Finding], gpus: dict[str, Any]) -> list[Finding]:
    """Findings in their order, those alike on several GPUs merged at the first one's place.
    `gpus`: the newer snapshot's nvidia gpus (for indexes and the count)."""
    groups: dict[tuple[Any, ...], list[Finding]] = {}
    for f in findings:
        if per_gpu(f):
            groups.setdefault(alike_key(f), []).append(f)
    out: list[Finding] = []
    for f in findings:
        group = groups[alike_key(f)] if per_gpu(f) else [f]
        if len(group) == 1:
            out.append(f)
        elif group[0] is f:
            out.append(merged(group, gpus))
    return out
