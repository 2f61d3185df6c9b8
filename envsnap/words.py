"""How numbers read in text, the same in every command and report: a count with its noun,
a measured value, a row of values at a glance. This module imports nothing of envsnap, so
the lowest floors (bench, hosts) write a count as diff and report do.
"""
from __future__ import annotations

from collections.abc import Sequence

BARS = "▁▂▃▄▅▆▇█"


def plural(count: int, word: str, suffix: str = "s") -> str:
    return f"{count} {word}{'' if count == 1 else suffix}"


def number(value: float) -> str:
    """A measured value in four significant digits: 285.7, 0.0123, 1.235e+04."""
    return f"{value:.4g}"


def sparkline(values: Sequence[float]) -> str:
    """One character per value, its height between the smallest and the largest."""
    if not values:
        return ""
    lo, hi = min(values), max(values)
    if hi == lo:
        return BARS[3] * len(values)
    top = len(BARS) - 1
    return "".join(BARS[round((v - lo) / (hi - lo) * top)] for v in values)


def values_at_a_glance(values: Sequence[float], what: str = "run") -> str:
    """"▃▁█▅ 285.7 .. 287 (4 runs)": the values in order, scaled between their extremes."""
    if not values:
        return "none"
    return (f"{sparkline(values)} {number(min(values))} .. {number(max(values))} "
            f"({len(values)} {what}{'s' if len(values) != 1 else ''})")
