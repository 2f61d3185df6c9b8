"""Read NVML through pynvml into a plain, JSON-able dict of raw readings.

Reading is kept apart from parsing (nvidia.parse_nvml): the raw dict recorded on real
hardware (tests/data/h200/) drives the parser in CI, where there is no GPU. Every query is
one entry; a query that fails is stored in place as {"error": "..."} and the others go on,
because one unsupported reading (a fan on an SXM board) must never cost the rest.

ctypes is imported where a library answered: a host without a driver asks the loader for
libnvidia-ml as ctypes.CDLL would, and pays neither its import nor pynvml's.
"""
from __future__ import annotations

import os

from .util import escaped

TYPE_CHECKING = False   # typing's own, without its import: see runner.py
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional, Tuple, Union

    Arg = Union[str, int]
    Query = Tuple[str, str, Tuple[Arg, ...]]

LIBRARY = "libnvidia-ml.so.1"
MAX_NVLINKS = 18  # NVLink 4 (Hopper) has 18 per GPU; the first failing link ends the scan
NVLINK_SWITCH = 2  # NVML_NVLINK_DEVICE_TYPE_SWITCH


# Several names separated by "|": the first one this pynvml has (NVML renamed the
# "throttle reasons" to "clock event reasons"; an older vendored pynvml has the old name).
SYSTEM_QUERIES: List[Query] = [
    ("driver_version", "nvmlSystemGetDriverVersion", ()),
    ("cuda_driver_version",
     "nvmlSystemGetCudaDriverVersion_v2|nvmlSystemGetCudaDriverVersion", ()),
    ("nvml_version", "nvmlSystemGetNVMLVersion", ()),
]

FACT_QUERIES: List[Query] = [
    ("name", "nvmlDeviceGetName", ()),
    ("uuid", "nvmlDeviceGetUUID", ()),
    ("pci", "nvmlDeviceGetPciInfo", ()),
    ("minor_number", "nvmlDeviceGetMinorNumber", ()),
    ("architecture", "nvmlDeviceGetArchitecture", ()),
    ("vbios", "nvmlDeviceGetVbiosVersion", ()),
    ("inforom_image", "nvmlDeviceGetInforomImageVersion", ()),
    ("persistence_mode", "nvmlDeviceGetPersistenceMode", ()),
    ("compute_mode", "nvmlDeviceGetComputeMode", ()),
    ("ecc_mode", "nvmlDeviceGetEccMode", ()),
    ("mig_mode", "nvmlDeviceGetMigMode", ()),
    ("compute_capability", "nvmlDeviceGetCudaComputeCapability", ()),
    ("power_limit", "nvmlDeviceGetPowerManagementLimit", ()),
    ("power_default_limit", "nvmlDeviceGetPowerManagementDefaultLimit", ()),
    ("power_limit_constraints", "nvmlDeviceGetPowerManagementLimitConstraints", ()),
    ("power_enforced_limit", "nvmlDeviceGetEnforcedPowerLimit", ()),
    ("clock_max_graphics", "nvmlDeviceGetMaxClockInfo", ("NVML_CLOCK_GRAPHICS",)),
    ("clock_max_sm", "nvmlDeviceGetMaxClockInfo", ("NVML_CLOCK_SM",)),
    ("clock_max_mem", "nvmlDeviceGetMaxClockInfo", ("NVML_CLOCK_MEM",)),
    ("clock_max_video", "nvmlDeviceGetMaxClockInfo", ("NVML_CLOCK_VIDEO",)),
    ("clock_app_graphics", "nvmlDeviceGetApplicationsClock", ("NVML_CLOCK_GRAPHICS",)),
    ("clock_app_mem", "nvmlDeviceGetApplicationsClock", ("NVML_CLOCK_MEM",)),
    ("clock_default_app_graphics", "nvmlDeviceGetDefaultApplicationsClock",
     ("NVML_CLOCK_GRAPHICS",)),
    ("clock_default_app_mem", "nvmlDeviceGetDefaultApplicationsClock", ("NVML_CLOCK_MEM",)),
    ("pcie_gen_max", "nvmlDeviceGetMaxPcieLinkGeneration", ()),
    ("pcie_gen_gpu_max", "nvmlDeviceGetGpuMaxPcieLinkGeneration", ()),
    ("pcie_width_max", "nvmlDeviceGetMaxPcieLinkWidth", ()),
    ("temp_slowdown", "nvmlDeviceGetTemperatureThreshold",
     ("NVML_TEMPERATURE_THRESHOLD_SLOWDOWN",)),
    ("temp_shutdown", "nvmlDeviceGetTemperatureThreshold",
     ("NVML_TEMPERATURE_THRESHOLD_SHUTDOWN",)),
    ("clock_event_reasons_supported",
     "nvmlDeviceGetSupportedClocksEventReasons|nvmlDeviceGetSupportedClocksThrottleReasons", ()),
    ("numa_node", "nvmlDeviceGetNumaNodeId", ()),
    ("memory_affinity", "nvmlDeviceGetMemoryAffinity", (1, "NVML_AFFINITY_SCOPE_NODE")),
]

# Readings that change from moment to moment, read once per capture (benchsample.py has its
# own table for sampling them under load during a benchmark).
VOLATILE_QUERIES: List[Query] = [
    ("memory", "nvmlDeviceGetMemoryInfo", ()),
    ("pcie_gen_current", "nvmlDeviceGetCurrPcieLinkGeneration", ()),
    ("pcie_width_current", "nvmlDeviceGetCurrPcieLinkWidth", ()),
    ("clock_graphics", "nvmlDeviceGetClockInfo", ("NVML_CLOCK_GRAPHICS",)),
    ("clock_sm", "nvmlDeviceGetClockInfo", ("NVML_CLOCK_SM",)),
    ("clock_mem", "nvmlDeviceGetClockInfo", ("NVML_CLOCK_MEM",)),
    ("pstate", "nvmlDeviceGetPerformanceState", ()),
    ("temperature", "nvmlDeviceGetTemperature", ("NVML_TEMPERATURE_GPU",)),
    ("power_usage", "nvmlDeviceGetPowerUsage", ()),
    ("energy", "nvmlDeviceGetTotalEnergyConsumption", ()),
    ("utilization", "nvmlDeviceGetUtilizationRates", ()),
    ("clock_event_reasons",
     "nvmlDeviceGetCurrentClocksEventReasons|nvmlDeviceGetCurrentClocksThrottleReasons", ()),
    ("pcie_replay_count", "nvmlDeviceGetPcieReplayCounter", ()),
    ("ecc_corrected_volatile", "nvmlDeviceGetTotalEccErrors",
     ("NVML_MEMORY_ERROR_TYPE_CORRECTED", "NVML_VOLATILE_ECC")),
    ("ecc_uncorrected_volatile", "nvmlDeviceGetTotalEccErrors",
     ("NVML_MEMORY_ERROR_TYPE_UNCORRECTED", "NVML_VOLATILE_ECC")),
    ("ecc_corrected_aggregate", "nvmlDeviceGetTotalEccErrors",
     ("NVML_MEMORY_ERROR_TYPE_CORRECTED", "NVML_AGGREGATE_ECC")),
    ("ecc_uncorrected_aggregate", "nvmlDeviceGetTotalEccErrors",
     ("NVML_MEMORY_ERROR_TYPE_UNCORRECTED", "NVML_AGGREGATE_ECC")),
    ("remapped_rows", "nvmlDeviceGetRemappedRows", ()),
    ("fan", "nvmlDeviceGetFanSpeed", ()),
]


def gpu_queries() -> List[Query]:
    # The CPU mask has one 64-bit word per 64 CPUs; its size depends on this host.
    words = max(1, ((os.cpu_count() or 1) + 63) // 64)
    return FACT_QUERIES + [("cpu_affinity", "nvmlDeviceGetCpuAffinity", (words,))] \
        + VOLATILE_QUERIES


def load_nvml() -> Tuple[Any, Optional[str]]:
    """(the pynvml module, None), or (None, why not)."""
    nvml, why, _ = open_nvml(early=False)
    return nvml, why


def open_nvml(early: bool) -> Tuple[Any, Optional[str], Optional[EarlyStart]]:
    """load_nvml's answer, and with `early` NVML's own start begun beside pynvml's import
    (an EarlyStart, for the caller to end() once it has read; None where nothing started).
    Cheap on a host without a driver: _ctypes.dlopen is the call ctypes.CDLL(LIBRARY) makes
    (RTLD_NOW | RTLD_LOCAL, the same error), without ctypes' own import (1.4 ms)."""
    import _ctypes

    try:
        handle = _ctypes.dlopen(LIBRARY)
    except OSError as exc:
        return None, "%s not loadable: %s" % (LIBRARY, exc), None
    started = None
    if early:
        import ctypes

        started = EarlyStart(ctypes.CDLL(LIBRARY, handle=handle))
    try:
        import pynvml  # vendored beside the agent in the payload
    except ImportError as exc:
        if started is not None:
            started.end()
        return None, "pynvml not importable: %s" % exc, None
    return pynvml, None, started


class EarlyStart:
    """NVML's own start begun in a thread of its own while pynvml's module is imported.

    nvmlInit is the driver's work (13 ms on an H200 host) in C, run with the interpreter
    lock released; importing pynvml is Python's (~20 ms). Side by side, pynvml's nvmlInit
    that follows only counts one more user of a started NVML (NVML counts its starts and
    stops at the last nvmlShutdown), and end() gives this start's count back. `library`:
    libnvidia-ml as ctypes loads it (tests pass a stand-in)."""

    def __init__(self, library: Any) -> None:
        import threading

        self.library, self.status = library, None
        self.thread = threading.Thread(target=self.start, daemon=True)
        self.thread.start()

    def start(self) -> None:
        try:
            self.status = self.library.nvmlInit_v2()
        except Exception:   # no such symbol: pynvml's own nvmlInit starts NVML, and says why
            pass

    def end(self) -> None:
        self.thread.join()   # a start that hangs hangs the reading too: the runner's timeout
        if self.status == 0:
            self.library.nvmlShutdown()


def library_path() -> Optional[str]:
    """Where the loaded libnvidia-ml lives: its file name carries the user-space version."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                if "libnvidia-ml.so" in line:
                    return line.split(None, 5)[-1].strip()
    except OSError:
        pass
    return None


def plain(value: Any) -> Any:
    """ctypes structs and arrays -> dicts and lists, bytes -> str: JSON-able."""
    import ctypes  # imported already, by pynvml

    if isinstance(value, bytes):
        return escaped(value)
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, ctypes.Structure):
        return {field[0]: plain(getattr(value, field[0])) for field in value._fields_}
    if isinstance(value, dict):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, ctypes.Array)):
        return [plain(item) for item in value]
    return repr(value)


def error_text(nvml: Any, exc: Exception) -> str:
    if isinstance(exc, getattr(nvml, "NVMLError", ())):
        return str(exc)
    return "%s: %s" % (type(exc).__name__, exc)


def is_constant(arg: Any) -> bool:
    # query tables name pynvml's constants, so a pynvml lacking one fails only that query
    return isinstance(arg, str) and arg.startswith("NVML_")


def call(nvml: Any, names: str, *args: Any) -> Any:
    """One query as its plain value, or {"error": ...} in its place."""
    function = next((getattr(nvml, n) for n in names.split("|") if hasattr(nvml, n)), None)
    if function is None:
        return {"error": "not in this pynvml: %s" % names}
    try:
        resolved = [getattr(nvml, a) if is_constant(a) else a for a in args]
        return plain(function(*resolved))
    except Exception as exc:  # one failing query must not cost the others
        return {"error": error_text(nvml, exc)}


def failed(value: Any) -> bool:
    return isinstance(value, dict) and "error" in value


def read_queries(nvml: Any, queries: List[Query], *lead: Any) -> Dict[str, Any]:
    return {key: call(nvml, names, *(lead + args)) for key, names, args in queries}


def read_nvlinks(nvml: Any, handle: Any) -> Dict[str, Any]:
    """State, peer and peer kind of each NVLink, up to the first link that does not exist."""
    out: Dict[str, Any] = {}
    for link in range(MAX_NVLINKS):
        state = out["nvlink_state.%d" % link] = call(nvml, "nvmlDeviceGetNvLinkState",
                                                     handle, link)
        if failed(state):
            break
        if state:
            out["nvlink_remote_pci.%d" % link] = call(
                nvml, "nvmlDeviceGetNvLinkRemotePciInfo", handle, link)
            out["nvlink_remote_type.%d" % link] = call(
                nvml, "nvmlDeviceGetNvLinkRemoteDeviceType", handle, link)
    return out


def read_gpu(nvml: Any, handle: Any, queries: List[Query]) -> Dict[str, Any]:
    readings = read_queries(nvml, queries, handle)
    readings.update(read_nvlinks(nvml, handle))
    return readings


def read_pairs(nvml: Any, handles: Dict[int, Any]) -> Dict[str, Any]:
    """How each pair of GPUs is connected (PCIe switch, host bridge, CPU socket...)."""
    pairs: Dict[str, Any] = {}
    for first in handles:
        for second in handles:
            if first < second:
                pairs["%d,%d" % (first, second)] = {"common_ancestor": call(
                    nvml, "nvmlDeviceGetTopologyCommonAncestor",
                    handles[first], handles[second])}
    return pairs


def device_handle(nvml: Any, index: int) -> Tuple[Any, Optional[str]]:
    # The handle is an opaque pointer: used here, never stored in the raw dict.
    try:
        return nvml.nvmlDeviceGetHandleByIndex(index), None
    except Exception as exc:  # a GPU that fell off the bus must not hide the others
        return None, error_text(nvml, exc)


def read_devices(nvml: Any, count: int, queries: List[Query]) -> Dict[str, Any]:
    handles: Dict[int, Any] = {}
    gpus: Dict[str, Any] = {}
    for index in range(count):
        handle, error = device_handle(nvml, index)
        if error is not None:
            gpus[str(index)] = {"handle": {"error": error}}
            continue
        handles[index] = handle
        gpus[str(index)] = read_gpu(nvml, handle, queries)
    return {"gpus": gpus, "pairs": read_pairs(nvml, handles)}


def read_raw(nvml: Any, queries: Optional[List[Query]] = None) -> Dict[str, Any]:
    """Every raw reading of this host, or {"init_error": ...} when NVML will not start
    (e.g. "RM has detected an NVML/RM version mismatch" after a driver upgrade)."""
    try:
        nvml.nvmlInit()
    except Exception as exc:
        return {"init_error": error_text(nvml, exc)}
    try:
        raw: Dict[str, Any] = {"library": library_path(),
                               "system": read_queries(nvml, SYSTEM_QUERIES)}
        count = raw["system"]["device_count"] = call(nvml, "nvmlDeviceGetCount")
        raw.update(read_devices(nvml, 0 if failed(count) else count,
                                gpu_queries() if queries is None else queries))
        return raw
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # nothing left to save; the readings are already taken
            pass
