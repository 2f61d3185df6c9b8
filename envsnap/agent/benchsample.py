"""GPU telemetry during a benchmark run: NVML read in a daemon thread into columns per GPU.

Measured on an H200 (driver 580): each reading in READINGS costs ~3 us; PCIe throughput
comes from byte counters (benchpcie.py); only where those are unsupported is the blocking
nvmlDeviceGetPcieThroughput used, for one GPU per tick. The thread measures its own CPU
time, so every run says what sampling cost it. No NVML (no driver, sampling off) is a
normal state: no samples, a reason.

Polling every 0.2 s misses a GPU phase shorter than that (an all-reduce, a burst of
matmuls): both utilization readings around it read 0. The driver itself buffers total
power every ~20 ms (nvmlDeviceGetSamples; on the H200, utilization only every ~200 ms and
no processor-clock samples), so each tick also drains that buffer. A GPU whose power stands
well above the run's floor is busy: such samples mark busy phases, polled readings inside
them count as busy, and while a phase lasts the sampler ticks every BUSY_INTERVAL to read
its clocks.
"""
from __future__ import annotations

import statistics
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

from . import benchpcie, nvidia, nvml_reader

DEFAULT_INTERVAL = 0.2
DEFAULT_MAX_SAMPLES = 600   # raw samples kept per GPU per run; summaries use all of them
BUSY_INTERVAL = 0.05        # ticks while a GPU's buffered power says it is busy
# Busy: power this far above the run's lowest reading. An idle H200 holding a CUDA context
# draws ~80-125 W, an all-reduce ~270 W, a matmul burst 500 W and more; the margin is 10% of
# the power limit, at least BUSY_MARGIN_MIN_W, so a context coming up is not a busy phase.
BUSY_MARGIN_MIN_W = 50.0
BUSY_MARGIN_SHARE = 0.10

# column -> (pynvml function(s), constant args); "|" lists older pynvml names.
READINGS: List[Tuple[str, str, Tuple[str, ...]]] = [
    ("sm_mhz", "nvmlDeviceGetClockInfo", ("NVML_CLOCK_SM",)),
    ("mem_mhz", "nvmlDeviceGetClockInfo", ("NVML_CLOCK_MEM",)),
    ("reasons_mask",
     "nvmlDeviceGetCurrentClocksEventReasons|nvmlDeviceGetCurrentClocksThrottleReasons", ()),
    ("power_w", "nvmlDeviceGetPowerUsage", ()),
    ("temp_c", "nvmlDeviceGetTemperature", ("NVML_TEMPERATURE_GPU",)),
    ("utilization", "nvmlDeviceGetUtilizationRates", ()),
]
COLUMNS = ("t", "sm_mhz", "mem_mhz", "power_w", "temp_c", "util_gpu_pct", "util_mem_pct",
           "pcie_rx_kbs", "pcie_tx_kbs", "reasons_mask")
SUMMARISED = ("sm_mhz", "mem_mhz", "power_w", "temp_c", "util_gpu_pct", "pcie_rx_kbs",
              "pcie_tx_kbs")
PCIE_THROUGHPUT = ("NVML_PCIE_UTIL_RX_BYTES", "NVML_PCIE_UTIL_TX_BYTES")


def convert(name: str, value: Any) -> Any:
    if name == "power_w":
        return round(value / 1000.0, 1)
    if name == "utilization":
        return value["gpu"], value["memory"]
    return value


class Gpu:
    """One GPU's columns for the current run, and its PCIe byte counter."""

    def __init__(self, handle: Any, index: int, counters: bool,
                 power_limit_w: Optional[float] = None) -> None:
        self.handle, self.index, self.counters = handle, index, counters
        self.columns: Dict[str, List[Any]] = {}
        self.errors: Dict[str, str] = {}
        self.pcie = benchpcie.Counter()
        self.power = PowerBuffer(power_limit_w)

    def reset(self) -> None:
        self.columns = {name: [] for name in COLUMNS}
        self.errors = {}
        self.pcie.reset()
        self.power.reset()

    def add(self, name: str, value: Any) -> None:
        if nvml_reader.failed(value):
            self.errors.setdefault(name, value["error"])  # the first is enough to say why
            value = None
        self.columns[name].append(value)


class PowerBuffer:
    """One GPU's buffered power samples of the current run, as (seconds since start, W)."""

    def __init__(self, power_limit_w: Optional[float]) -> None:
        self.margin_w = max(BUSY_MARGIN_MIN_W, BUSY_MARGIN_SHARE * (power_limit_w or 0.0))
        self.supported = True
        self.reset()

    def reset(self) -> None:
        self.t: List[float] = []
        self.watts: List[float] = []
        self.last_seen = 0          # the driver's timestamp (us) of the newest sample read

    def mark_start(self, nvml: Any, handle: Any) -> None:
        """Everything buffered so far is from before the run: skip past it."""
        if self.supported:
            self.last_seen = max((ts for ts, _ in self.fetch(nvml, handle, 0)), default=0)

    def fetch(self, nvml: Any, handle: Any, since: int) -> List[Tuple[int, float]]:
        """(driver timestamp in us, watts) newer than `since`; none when the buffer holds no
        newer sample or the driver keeps none (then never asked again)."""
        try:
            kind, samples = nvml.nvmlDeviceGetSamples(handle, nvml.NVML_TOTAL_POWER_SAMPLES,
                                                      since)
        except Exception as exc:
            if "Not Found" not in str(exc):   # NotFound: nothing newer yet
                self.supported = False
            return []
        return [(int(sample.timeStamp), sample_value(sample, kind) / 1000.0)
                for sample in samples if int(sample.timeStamp) > since]

    def read(self, nvml: Any, handle: Any, started_wall: float) -> None:
        if not self.supported:
            return
        for stamp, watts in self.fetch(nvml, handle, self.last_seen):
            self.last_seen = max(self.last_seen, stamp)
            self.t.append(round(stamp / 1e6 - started_wall, 3))
            self.watts.append(round(watts, 1))

    def busy_now(self) -> bool:
        """The newest sample stands above the run's floor by the margin."""
        return bool(self.watts) and self.watts[-1] >= min(self.watts) + self.margin_w


def sample_value(sample: Any, kind: int) -> float:
    """nvmlSample_t's value is a union; the call's value type says which member holds it."""
    member = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal",
              6: "usVal"}.get(kind, "uiVal")
    return float(getattr(sample.sampleValue, member))


class Sampler:
    """Per run: start() before the command, stop() after; telemetry comes back as data."""

    def __init__(self, nvml: Any, gpus: Dict[str, Gpu], interval: float, max_samples: int,
                 info: Dict[str, Any]) -> None:
        self.nvml, self.gpus, self.interval, self.max_samples = nvml, gpus, interval, max_samples
        self.info = info
        self.tick = 0
        self.started = 0.0
        self.started_wall = 0.0
        self.cpu_seconds = 0.0
        self.done = threading.Event()
        self.thread: Optional[threading.Thread] = None

    @classmethod
    def open(cls, interval: Optional[float], max_samples: int) -> "Sampler":
        if not interval or interval <= 0:
            return cls(None, {}, 0.0, max_samples, {"available": False,
                                                    "reason": "sampling disabled"})
        nvml, why = nvml_reader.load_nvml()
        if nvml is None:
            return cls(None, {}, 0.0, max_samples, {"available": False, "reason": why})
        try:
            nvml.nvmlInit()
        except Exception as exc:
            return cls(None, {}, 0.0, max_samples,
                       {"available": False, "reason": nvml_reader.error_text(nvml, exc)})
        gpus, info = discover(nvml)
        info["sample_interval"] = interval
        return cls(nvml, gpus, float(interval), max_samples, info)

    def start(self) -> None:
        if not self.gpus:
            return
        for gpu in self.gpus.values():
            gpu.reset()
        self.tick = 0
        self.started = time.perf_counter()
        self.started_wall = time.time()   # the driver stamps its buffered samples in epoch us
        for gpu in self.gpus.values():
            gpu.power.mark_start(self.nvml, gpu.handle)
        self.done.clear()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        cpu = time.thread_time()
        try:
            self._ticks()
        finally:
            self.cpu_seconds = time.thread_time() - cpu

    def _ticks(self) -> None:
        # Ticks keep to a fixed schedule, so slow readings do not stretch the interval;
        # between ticks, only GPUs moving a lot over PCIe have their counters read again.
        tick_at = self.started
        while True:
            now = time.perf_counter()
            if now >= tick_at:
                self.sample()
                step = self.interval
                if any(gpu.power.busy_now() for gpu in self.gpus.values()):
                    step = min(step, BUSY_INTERVAL)   # a busy phase: read its clocks often
                while tick_at <= now:   # behind schedule: skip ticks rather than burst
                    tick_at += step
            else:
                self.read_hot()
            wake = tick_at
            if any(gpu.pcie.hot for gpu in self.gpus.values()):
                wake = min(wake, time.perf_counter() + benchpcie.FAST_READ)
            if self.done.wait(max(0.0, wake - time.perf_counter())):
                return

    def read_hot(self) -> None:
        for gpu in self.gpus.values():
            if gpu.pcie.hot:
                gpu.pcie.read(self.nvml, gpu.handle)

    def sample(self) -> None:
        self.tick += 1
        for position, gpu in enumerate(self.gpus.values()):
            now = time.perf_counter()
            gpu.add("t", round(now - self.started, 3))
            for name, functions, args in READINGS:
                value = nvml_reader.call(self.nvml, functions, gpu.handle, *args)
                self.add_reading(gpu, name, value)
            rx, tx = self.pcie(gpu, position, now)
            gpu.add("pcie_rx_kbs", rx)
            gpu.add("pcie_tx_kbs", tx)
            gpu.power.read(self.nvml, gpu.handle, self.started_wall)

    def add_reading(self, gpu: Gpu, name: str, value: Any) -> None:
        if not nvml_reader.failed(value):
            value = convert(name, value)
        if name != "utilization":
            gpu.add(name, value)
            return
        failed = nvml_reader.failed(value)
        gpu.add("util_gpu_pct", value if failed else value[0])
        gpu.add("util_mem_pct", value if failed else value[1])

    def pcie(self, gpu: Gpu, position: int, now: float) -> Tuple[Any, Any]:
        """KB/s received and sent (the unit nvmlDeviceGetPcieThroughput uses)."""
        if not gpu.counters:
            if self.tick % len(self.gpus) != position % len(self.gpus):
                return None, None   # one blocking 2x20 ms read per tick, GPUs in turn
            return tuple(nvml_reader.call(self.nvml, "nvmlDeviceGetPcieThroughput", gpu.handle,
                                          counter) for counter in PCIE_THROUGHPUT)
        if not gpu.pcie.read(self.nvml, gpu.handle):
            return None, None
        return gpu.pcie.rate(now)

    def stop(self) -> Dict[str, Any]:
        """{"gpus": {bus: summary}, "samples": {bus: columns, thinned},
        "sampler": {ticks, cpu_seconds}}, or {} when nothing was sampled."""
        if self.thread is None:
            return {}
        self.done.set()
        self.thread.join()
        self.thread = None
        for gpu in self.gpus.values():
            gpu.power.read(self.nvml, gpu.handle, self.started_wall)
        out = {"gpus": {bus: summarise(gpu.columns, gpu.errors, gpu.power)
                        for bus, gpu in self.gpus.items()},
               "samples": {bus: thin(gpu.columns, self.max_samples)
                           for bus, gpu in self.gpus.items()},
               "sampler": {"ticks": self.tick, "cpu_seconds": round(self.cpu_seconds, 6)}}
        buffered = {bus: thin({"t": gpu.power.t, "power_w": gpu.power.watts}, self.max_samples)
                    for bus, gpu in self.gpus.items() if gpu.power.t}
        if buffered:
            out["buffered"] = buffered
        return out

    def close(self) -> None:
        if self.thread is not None:
            self.stop()
        if self.nvml is not None:
            try:
                self.nvml.nvmlShutdown()
            except Exception:  # nothing left to save
                pass


def discover(nvml: Any) -> Tuple[Dict[str, Gpu], Dict[str, Any]]:
    """GPUs by bus id, and what the record says about them."""
    gpus: Dict[str, Gpu] = {}
    described: Dict[str, Any] = {}
    count = nvml_reader.call(nvml, "nvmlDeviceGetCount")
    for index in range(0 if nvml_reader.failed(count) else count):
        handle, error = nvml_reader.device_handle(nvml, index)
        if error is not None:
            described["index:%d" % index] = {"index": index, "error": error}
            continue
        pci = nvml_reader.call(nvml, "nvmlDeviceGetPciInfo", handle)
        bus = nvidia.bus_id_of(str(index), {"pci": pci})
        name = nvml_reader.call(nvml, "nvmlDeviceGetName", handle)
        counters = benchpcie.read_counters(nvml, handle) is not None
        limit = nvml_reader.call(nvml, "nvmlDeviceGetEnforcedPowerLimit", handle)
        gpus[bus] = Gpu(handle, index, counters,
                        None if nvml_reader.failed(limit) else limit / 1000.0)
        described[bus] = {"index": index, "name": None if nvml_reader.failed(name) else name,
                          "pcie_source": "counters" if counters else "throughput"}
    available = bool(gpus)
    return gpus, {"available": available, "reason": None if available else "no GPU visible",
                  "gpus": described}


# ---- pure: columns -> summary ----------------------------------------------------------

def spread_of(values: List[Any]) -> Optional[Dict[str, Any]]:
    present = [v for v in values if v is not None]
    if not present:
        return None
    return {"min": min(present), "median": statistics.median(present), "max": max(present)}


def reason_counts(masks: List[Any]) -> Dict[str, int]:
    """How many samples saw each clock-event (throttle) reason."""
    counts: Dict[str, int] = {}
    for mask in masks:
        if isinstance(mask, int):
            for name in nvidia.decode_clock_event_reasons(mask):
                counts[name] = counts.get(name, 0) + 1
    return counts


def summarise(columns: Dict[str, List[Any]], errors: Dict[str, str],
              power: Optional[PowerBuffer] = None) -> Dict[str, Any]:
    summary: Dict[str, Any] = {"samples": len(columns.get("t", []))}
    for name in SUMMARISED:
        summary[name] = spread_of(columns.get(name, []))
    summary["clock_event_reasons"] = reason_counts(columns.get("reasons_mask", []))
    phases = busy_phases(power.t, power.watts, power.margin_w) if power and power.t else []
    summary["busy"] = busy_summary(columns, phases)
    if power is not None and power.t:
        summary["power_busy"] = {"phases": len(phases),
                                 "seconds": round(sum(b - a for a, b in phases), 3),
                                 "threshold_w": round(min(power.watts) + power.margin_w, 1),
                                 "buffered": len(power.t)}
    if errors:
        summary["errors"] = dict(errors)
    return summary


BUSY_UTIL_PCT = 50
SAMPLE_SPACING_S = 0.02   # the driver buffers power about this often


def busy_phases(t: List[float], watts: List[float], margin_w: float
                ) -> List[Tuple[float, float]]:
    """(from, to) seconds where buffered power stood `margin_w` above the run's floor; each
    busy sample stands for the spacing around it, so one sample is a short phase, not none."""
    if not watts:
        return []
    threshold = min(watts) + margin_w
    phases: List[Tuple[float, float]] = []
    for when, value in zip(t, watts):
        if value < threshold:
            continue
        start, end = when - SAMPLE_SPACING_S / 2, when + SAMPLE_SPACING_S / 2
        if phases and start <= phases[-1][1] + SAMPLE_SPACING_S:
            phases[-1] = (phases[-1][0], end)
        else:
            phases.append((start, end))
    return phases


def in_phase(when: Any, phases: List[Tuple[float, float]]) -> bool:
    return isinstance(when, (int, float)) and any(a <= when <= b for a, b in phases)


def busy_summary(columns: Dict[str, List[Any]], phases: Optional[List[Tuple[float, float]]]
                 = None) -> Optional[Dict[str, Any]]:
    """The same readings over the samples where the GPU was busy: utilization high, or taken
    inside a busy phase of the buffered power. A benchmark spends much of its time starting
    up (imports, loading): its idle samples would hide the clocks and throttling of the part
    that is measured. None when no sample was busy."""
    util = columns.get("util_gpu_pct", [])
    times = columns.get("t", [])
    busy = [i for i, value in enumerate(util)
            if (isinstance(value, (int, float)) and value >= BUSY_UTIL_PCT)
            or (phases and i < len(times) and in_phase(times[i], phases))]
    if not busy:
        return None
    picked = {name: [values[i] for i in busy if i < len(values)]
              for name, values in columns.items()}
    summary: Dict[str, Any] = {"samples": len(busy)}
    for name in ("sm_mhz", "mem_mhz", "power_w", "temp_c"):
        summary[name] = spread_of(picked.get(name, []))
    summary["clock_event_reasons"] = reason_counts(picked.get("reasons_mask", []))
    return summary


def thin(columns: Dict[str, List[Any]], limit: int) -> Dict[str, List[Any]]:
    """Every k-th sample, so a long run keeps its whole timeline within `limit` samples."""
    count = len(columns.get("t", []))
    step = max(1, -(-count // max(1, limit)))
    return {name: values[::step] for name, values in columns.items()}
