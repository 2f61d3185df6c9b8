"""PCIe throughput during a benchmark, from NVML's cumulative byte counters.

Measured on an H200 (driver 580): nvmlDeviceGetPcieThroughput blocks 21 ms per call (it
counts bytes over a 20 ms window), while the byte counters (field values
NVML_FI_DEV_PCIE_COUNT_RX/TX_BYTES) cost 0.6 ms. The counters wrap at 2^32 bytes: 4 GiB is
one 0.2 s interval at 20 GiB/s, so a GPU that moved more than HOT_BYTES since its last read
is read again every FAST_READ seconds (4 GiB per 50 ms = 80 GiB/s, above PCIe 5.0 x16),
and only while it is that busy: an idle or quiet GPU costs one read per tick. The limit that
remains: a burst of more than 4 GiB inside one tick after a quiet one (seen on the H200: 5 GiB
of pinned copies in under 0.2 s) is counted short by 4 GiB; sustained traffic, such as NCCL
over PCIe, is counted right from its second tick.
"""
from __future__ import annotations

from typing import Any, List, Optional, Tuple

COUNTERS = ("NVML_FI_DEV_PCIE_COUNT_RX_BYTES", "NVML_FI_DEV_PCIE_COUNT_TX_BYTES")
WRAP_32 = 1 << 32
WRAP_64 = 1 << 64
HOT_BYTES = 256 << 20   # 1.3 GB/s at 0.2 s ticks: early enough to catch a ramp
FAST_READ = 0.05


def read_counters(nvml: Any, handle: Any) -> Optional[Tuple[int, int]]:
    """Cumulative (rx, tx) PCIe bytes, or None where the driver does not count them."""
    try:
        ids = [getattr(nvml, name) for name in COUNTERS]
        values = nvml.nvmlDeviceGetFieldValues(handle, ids)
        if any(value.nvmlReturn != 0 for value in values):
            return None
        return int(values[0].value.ullVal), int(values[1].value.ullVal)
    except Exception:  # an older pynvml or driver: the caller falls back to the slow call
        return None


def unwrap(old: int, new: int) -> int:
    """Bytes between two readings of a counter that wraps at 2^32 (or, once past it, 2^64)."""
    modulus = WRAP_64 if max(old, new) >= WRAP_32 else WRAP_32
    return (new - old) % modulus


class Counter:
    """Wrap-corrected running totals of one GPU's PCIe bytes, and the rate between ticks."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.raw: Optional[Tuple[int, int]] = None
        self.total: List[int] = [0, 0]
        self.mark: Optional[Tuple[float, int, int]] = None
        self.hot = False

    def read(self, nvml: Any, handle: Any) -> bool:
        counted = read_counters(nvml, handle)
        if counted is None:
            return False
        if self.raw is not None:
            moved = [unwrap(old, new) for old, new in zip(self.raw, counted)]
            self.total = [total + bytes_ for total, bytes_ in zip(self.total, moved)]
            self.hot = max(moved) > HOT_BYTES
        self.raw = counted
        return True

    def rate(self, now: float) -> Tuple[Optional[float], Optional[float]]:
        """KB/s received and sent since the last tick (the unit nvmlDeviceGetPcieThroughput
        uses); None at the first tick of a run."""
        last, self.mark = self.mark, (now, self.total[0], self.total[1])
        if last is None or now <= last[0]:
            return None, None
        seconds = now - last[0]
        return (round((self.total[0] - last[1]) / 1024.0 / seconds, 1),
                round((self.total[1] - last[2]) / 1024.0 / seconds, 1))
