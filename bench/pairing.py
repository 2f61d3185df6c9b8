"""Two measurements taken in pairs, the order alternating, so that neither always runs on the
warmer machine: the ratio a benchmark prints is of pairs measured side by side."""
from __future__ import annotations

import statistics
from collections.abc import Callable


def paired(repeat: int, first: Callable[[], float],
           second: Callable[[], float]) -> tuple[float, float, float]:
    """(median of first, median of second, median of second/first) over `repeat` pairs, the
    order alternating so that neither always runs on the warmer machine."""
    pairs = []
    for index in range(repeat):
        if index % 2:
            b = second()
            a = first()
        else:
            a = first()
            b = second()
        pairs.append((a, b))
    return (statistics.median(a for a, _ in pairs), statistics.median(b for _, b in pairs),
            statistics.median(b / a for a, b in pairs))
