"""NVIDIA driver, kernel module and GPU facts.

NVML (through the vendored pynvml) first, `nvidia-smi` as the fallback; neither is the
normal state of a host without a driver, not an error. Reading (nvml_reader, smi.query_*)
is kept apart from the pure parsers here, which CI runs on readings recorded on an H200.
Both sources give per-GPU records with the same field names, keyed by PCI bus id.
"""
from __future__ import annotations

import re

from . import nvidia_driver, nvml_reader, util
from .nvml_reader import failed

TYPE_CHECKING = False   # typing's own, without its import: see runner.py
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, List, Optional, Tuple

    Convert = Callable[[Any], Any]

MIB = 1 << 20
NO_DRIVER = {"driver": None, "present": False, "reason": "no NVIDIA driver"}
DEFAULT_SMI_TIMEOUT = 10.0
NOT_SUPPORTED = "Not Supported"

# NVML "clock event reasons" (formerly "throttle reasons"), bit by bit, named as
# `nvidia-smi -q -x` names them.
CLOCK_EVENT_REASONS: List[Tuple[int, str]] = [
    (0x1, "gpu_idle"), (0x2, "applications_clocks_setting"), (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"), (0x10, "sync_boost"), (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"), (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clocks_setting"), (0x200, "board_limit"), (0x400, "reliability"),
]
COMPUTE_MODES = {0: "Default", 1: "Exclusive_Thread", 2: "Prohibited", 3: "Exclusive_Process"}
ARCHITECTURES = {2: "Kepler", 3: "Maxwell", 4: "Pascal", 5: "Volta", 6: "Turing",
                 7: "Ampere", 8: "Ada", 9: "Hopper", 10: "Blackwell", 13: "Rubin"}
# nvmlDeviceGetTopologyCommonAncestor levels, named as `nvidia-smi topo -m` names them.
TOPOLOGY_LEVELS = {0: "INTERNAL", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
VOLATILE_FIELDS = frozenset([
    "clock_graphics_mhz", "clock_sm_mhz", "clock_mem_mhz", "pstate", "temperature_c",
    "power_draw_w", "energy_j", "utilization_gpu_pct", "utilization_mem_pct",
    "memory_used_mib", "clock_event_reasons", "clock_event_reasons_mask",
    "pcie_replay_count", "ecc_corrected_volatile", "ecc_uncorrected_volatile",
    "ecc_corrected_aggregate", "ecc_uncorrected_aggregate", "remapped_rows", "fan_pct",
])


# ---- small pure helpers ----------------------------------------------------------------

def normalize_bus_id(bus_id: str) -> str:
    """"0000:19:00.0", "00000000:19:00.0", "00000000:19:00.0 " -> "00000000:19:00.0"."""
    match = re.match(r"\s*(?:([0-9a-fA-F]+):)?([0-9a-fA-F]+):([0-9a-fA-F]+)\.([0-7])\s*$",
                     bus_id)
    if not match:
        return bus_id.strip()
    domain, bus, device, function = match.groups()
    return "%08X:%02X:%02X.%s" % (int(domain or "0", 16), int(bus, 16), int(device, 16),
                                  function)


def decode_clock_event_reasons(mask: int) -> List[str]:
    names = [name for bit, name in CLOCK_EVENT_REASONS if mask & bit]
    unknown = mask & ~sum(bit for bit, _ in CLOCK_EVENT_REASONS)
    return names + (["unknown_0x%x" % unknown] if unknown else [])


def cuda_version_text(code: int) -> str:
    """NVML/CUDA encode 13.0 as 13000 and 12.8 as 12080."""
    return "%d.%d" % (code // 1000, (code % 1000) // 10)


def bitmask_ranges(words: List[int]) -> str:
    """NVML affinity masks (64-bit words) -> "0-47,96-143", the form topo -m prints."""
    bits = [w * 64 + b for w, word in enumerate(words) for b in range(64) if word >> b & 1]
    ranges: List[List[int]] = []
    for bit in bits:
        if ranges and ranges[-1][1] == bit - 1:
            ranges[-1][1] = bit
        else:
            ranges.append([bit, bit])
    return ",".join(str(a) if a == b else "%d-%d" % (a, b) for a, b in ranges)


def watts(milliwatts: int) -> float:
    return round(milliwatts / 1000.0, 2)


def on_off(mode: int) -> str:
    return "Enabled" if mode else "Disabled"


# ---- NVML raw readings -> records (pure) -------------------------------------------------

NVML_FIELDS: List[Tuple[str, str, Convert]] = [
    ("name", "name", str), ("uuid", "uuid", str),
    ("architecture", "architecture", lambda v: ARCHITECTURES.get(v, "unknown_%s" % v)),
    ("vbios", "vbios", str), ("inforom_image", "inforom_image", str),
    ("persistence_mode", "persistence_mode", on_off),
    ("compute_mode", "compute_mode", lambda v: COMPUTE_MODES.get(v, str(v))),
    ("ecc_mode_current", "ecc_mode", lambda v: on_off(v[0])),
    ("ecc_mode_pending", "ecc_mode", lambda v: on_off(v[1])),
    ("mig_mode_current", "mig_mode", lambda v: on_off(v[0])),
    ("mig_mode_pending", "mig_mode", lambda v: on_off(v[1])),
    ("compute_capability", "compute_capability", lambda v: "%d.%d" % (v[0], v[1])),
    ("memory_total_mib", "memory", lambda v: v["total"] // MIB),
    ("power_limit_w", "power_limit", watts),
    ("power_default_limit_w", "power_default_limit", watts),
    ("power_min_limit_w", "power_limit_constraints", lambda v: watts(v[0])),
    ("power_max_limit_w", "power_limit_constraints", lambda v: watts(v[1])),
    ("power_enforced_limit_w", "power_enforced_limit", watts),
    ("clock_max_graphics_mhz", "clock_max_graphics", int),
    ("clock_max_sm_mhz", "clock_max_sm", int), ("clock_max_mem_mhz", "clock_max_mem", int),
    ("clock_max_video_mhz", "clock_max_video", int),
    ("clock_app_graphics_mhz", "clock_app_graphics", int),
    ("clock_app_mem_mhz", "clock_app_mem", int),
    ("clock_default_app_graphics_mhz", "clock_default_app_graphics", int),
    ("clock_default_app_mem_mhz", "clock_default_app_mem", int),
    ("pcie_gen_current", "pcie_gen_current", int), ("pcie_gen_max", "pcie_gen_max", int),
    ("pcie_gen_gpu_max", "pcie_gen_gpu_max", int),
    ("pcie_width_current", "pcie_width_current", int),
    ("pcie_width_max", "pcie_width_max", int),
    ("temp_slowdown_c", "temp_slowdown", int), ("temp_shutdown_c", "temp_shutdown", int),
    ("clock_event_reasons_supported_mask", "clock_event_reasons_supported", int),
    ("numa_node", "numa_node", int),
    ("numa_affinity", "memory_affinity", bitmask_ranges),
    ("cpu_affinity", "cpu_affinity", bitmask_ranges),
    ("clock_graphics_mhz", "clock_graphics", int), ("clock_sm_mhz", "clock_sm", int),
    ("clock_mem_mhz", "clock_mem", int),
    ("pstate", "pstate", lambda v: "P%d" % v if 0 <= v < 16 else None),
    ("temperature_c", "temperature", int), ("power_draw_w", "power_usage", watts),
    ("energy_j", "energy", lambda v: round(v / 1000.0, 1)),
    ("utilization_gpu_pct", "utilization", lambda v: v["gpu"]),
    ("utilization_mem_pct", "utilization", lambda v: v["memory"]),
    ("memory_used_mib", "memory", lambda v: v["used"] // MIB),
    ("clock_event_reasons_mask", "clock_event_reasons", int),
    ("pcie_replay_count", "pcie_replay_count", int),
    ("ecc_corrected_volatile", "ecc_corrected_volatile", int),
    ("ecc_uncorrected_volatile", "ecc_uncorrected_volatile", int),
    ("ecc_corrected_aggregate", "ecc_corrected_aggregate", int),
    ("ecc_uncorrected_aggregate", "ecc_uncorrected_aggregate", int),
    ("remapped_rows", "remapped_rows", lambda v: dict(zip(
        ("correctable", "uncorrectable", "pending", "failure"), v))),
    ("fan_pct", "fan", int),
]


def convert_reading(value: Any, convert: Convert) -> Any:
    # "Not Supported" is a property of the board (no fan on an SXM module), shown as None
    # like nvidia-smi's "[N/A]", so both sources agree; any other failure stays visible.
    if failed(value) and value["error"] == NOT_SUPPORTED:
        return None
    if value is None or failed(value):
        return value
    try:
        return convert(value)
    except (TypeError, ValueError, KeyError, IndexError) as exc:
        return {"error": "unparsed %r: %s" % (value, exc)}


def nvlink_peers(readings: Dict[str, Any]) -> List[Tuple[str, int]]:
    """(remote bus id, remote kind) of every active NVLink of one GPU."""
    peers = []
    links = [k.rpartition(".")[2] for k, v in readings.items()
             if k.startswith("nvlink_state.") and v == 1]
    for link in links:
        remote = readings.get("nvlink_remote_pci." + link)
        kind = readings.get("nvlink_remote_type." + link)
        if isinstance(remote, dict) and "busId" in remote:
            peers.append((normalize_bus_id(remote["busId"]), kind if isinstance(kind, int)
                          else -1))
    return peers


def nvml_record(readings: Dict[str, Any]) -> Dict[str, Any]:
    record = {name: convert_reading(readings.get(key), convert)
              for name, key, convert in NVML_FIELDS}
    if "nvlink_state.0" in readings:
        record["nvlink_active"] = len(nvlink_peers(readings))
    return record


def bus_id_of(index: str, readings: Dict[str, Any]) -> str:
    pci = readings.get("pci")
    if isinstance(pci, dict) and pci.get("busId"):
        return normalize_bus_id(pci["busId"])
    return "index:%s" % index  # a GPU whose PCI info failed still keeps a stable key


def nvlink_between(first: Dict[str, Any], second: Dict[str, Any], second_bus: str) -> int:
    """Direct links to the peer, or, through NVSwitches, the fewer switch links of the two."""
    peers = nvlink_peers(first)
    direct = sum(1 for bus, _ in peers if bus == second_bus)
    if direct:
        return direct
    switched = [sum(1 for _, kind in nvlink_peers(gpu) if kind == nvml_reader.NVLINK_SWITCH)
                for gpu in (first, second)]
    return min(switched)


def nvml_topology(raw: Dict[str, Any], bus_of: Dict[str, str]) -> Dict[str, Dict[str, str]]:
    topology: Dict[str, Dict[str, str]] = {}
    gpus = raw.get("gpus", {})
    for pair, reading in raw.get("pairs", {}).items():
        first, second = pair.split(",")
        links = nvlink_between(gpus[first], gpus[second], bus_of[second])
        level = reading.get("common_ancestor")
        link = "NV%d" % links if links else \
            (TOPOLOGY_LEVELS.get(level, str(level)) if isinstance(level, int) else level)
        topology.setdefault(bus_of[first], {})[bus_of[second]] = link
        topology.setdefault(bus_of[second], {})[bus_of[first]] = link
    return topology


def system_facts(raw: Dict[str, Any]) -> Dict[str, Any]:
    system = raw.get("system", {})
    cuda = system.get("cuda_driver_version")
    library = raw.get("library")
    return {
        "present": True, "source": "nvml",
        "driver": convert_reading(system.get("driver_version"), str),
        "cuda_driver": convert_reading(cuda, cuda_version_text),
        "nvml_version": convert_reading(system.get("nvml_version"), str),
        "userspace_library": {"path": library, "version": library_version(library)},
    }


def library_version(path: Optional[str]) -> Optional[str]:
    match = re.search(r"\.so\.(\d+\.\d+(?:\.\d+)?)$", path or "")
    return match.group(1) if match else None


def parse_nvml(raw: Dict[str, Any]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """Raw NVML readings (nvml_reader.read_raw) -> (facts, volatile). Pure."""
    facts = system_facts(raw)
    records: Dict[str, Dict[str, Any]] = {}
    bus_of: Dict[str, str] = {}
    for index, readings in raw.get("gpus", {}).items():
        bus_of[index] = bus_id_of(index, readings)
        lost = readings.get("handle")  # no handle: a GPU fallen off the bus, say so
        records[bus_of[index]] = {"index": int(index), "error": lost["error"]} if failed(lost) \
            else dict(nvml_record(readings), index=int(index))
    facts["topology"] = nvml_topology(raw, bus_of)
    return split_records(facts, records)


# ---- records -> facts / volatile (pure, both sources) -------------------------------------

def finish_record(record: Dict[str, Any]) -> Dict[str, Any]:
    """Masks decoded to names; the raw mask stays beside them for exactness."""
    for field in ("clock_event_reasons", "clock_event_reasons_supported"):
        mask = record.get(field + "_mask")
        if isinstance(mask, int):
            record[field] = decode_clock_event_reasons(mask)
            record[field + "_mask"] = "0x%x" % mask
    return record


def split_records(facts: Dict[str, Any], records: Dict[str, Dict[str, Any]]
                  ) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    facts["gpus"], volatile = {}, {}
    for bus, record in records.items():
        finish_record(record)
        facts["gpus"][bus] = {k: v for k, v in record.items() if k not in VOLATILE_FIELDS}
        volatile[bus] = {k: v for k, v in record.items() if k in VOLATILE_FIELDS}
    facts["gpu_count"] = len(records)
    return facts, {"gpus": volatile}


# ---- nvidia-smi records -> facts (pure) --------------------------------------------------

def smi_topology(topo: Dict[str, Any], bus_of: Dict[str, str]) -> Dict[str, Dict[str, str]]:
    """topo -m names (GPU0, NIC0) -> bus ids and NIC device names (mlx5_0)."""
    names = dict(bus_of)
    names.update(topo.get("nics", {}))
    return {names.get(gpu, gpu): {names.get(peer, peer): link for peer, link in links.items()}
            for gpu, links in topo.get("links", {}).items() if links}


def add_smi_affinity(records: Dict[str, Dict[str, Any]], topo: Dict[str, Any],
                     bus_of: Dict[str, str]) -> None:
    for gpu, affinity in topo.get("affinity", {}).items():
        record = records.get(bus_of.get(gpu, ""))
        if record is not None:
            record["cpu_affinity"] = affinity.get("cpu")
            record["numa_affinity"] = affinity.get("numa")
            numa = affinity.get("gpu_numa_id", "N/A")
            record["numa_node"] = int(numa) if numa.isdigit() else None


def parse_smi(query: Dict[int, Dict[str, Any]], topo: Optional[Dict[str, Any]]
              ) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """Parsed `--query-gpu` records and `topo -m` (or None) -> (facts, volatile). Pure."""
    records: Dict[str, Dict[str, Any]] = {}
    bus_of: Dict[str, str] = {}
    driver = None
    for index, record in sorted(query.items()):
        record = dict(record, index=index)
        driver = record.pop("driver_version", None) or driver
        bus_of["GPU%d" % index] = normalize_bus_id(str(record.pop("bus_id", "")))
        records[bus_of["GPU%d" % index]] = record
    if topo is not None:
        add_smi_affinity(records, topo, bus_of)
    facts = {"present": True, "source": "nvidia-smi", "driver": driver, "cuda_driver": None,
             "topology": smi_topology(topo or {}, bus_of)}
    return split_records(facts, records)


# ---- collecting ------------------------------------------------------------------------

def collect_nvml(nvml: Any, errors: Dict[str, str]) -> Optional[Tuple[Dict[str, Any],
                                                                      Dict[str, Any]]]:
    raw = nvml_reader.read_raw(nvml)
    if "init_error" in raw:
        errors["nvml"] = raw["init_error"]
        return None
    return parse_nvml(raw)


def collect_smi(options: Dict[str, Any], errors: Dict[str, str]
                ) -> Optional[Tuple[Dict[str, Any], Dict[str, Any]]]:
    exe = util.which("nvidia-smi")
    if exe is None:
        return None
    from . import smi  # on use: a host without nvidia-smi never parses its output

    timeout = float(options.get("smi_timeout", DEFAULT_SMI_TIMEOUT))
    try:
        fields, text = smi.query_gpus(exe, timeout)
    except util.CollectorError as exc:  # a wedged GPU hangs nvidia-smi: record, go on
        errors["nvidia-smi"] = str(exc)
        return {"present": True, "source": "nvidia-smi", "driver": None}, {}
    topo = None
    try:
        topo = smi.parse_topology(smi.topology_text(exe, timeout))
    except util.CollectorError as exc:
        errors["nvidia-smi topo"] = str(exc)
    return parse_smi(smi.parse_query(text, fields), topo)


def collect_with(nvml: Any, options: Dict[str, Any], nvml_missing: Optional[str] = None
                 ) -> Dict[str, Any]:
    """collect() with the pynvml module given (None: none usable), so tests can fake it."""
    errors: Dict[str, str] = {}
    found = collect_nvml(nvml, errors) if nvml is not None else None
    found = found or collect_smi(options, errors)
    timeout = float(options.get("smi_timeout", DEFAULT_SMI_TIMEOUT))
    module = nvidia_driver.kernel_module_facts(timeout)
    if found is None and not module and not errors:
        return {"facts": dict(NO_DRIVER), "volatile": {}}
    facts, volatile = found or ({"driver": None, "present": bool(module),
                                 "reason": "neither NVML nor nvidia-smi usable"}, {})
    facts["kernel_module"] = module
    if nvml is None and nvml_missing and found:
        facts["nvml_unavailable"] = nvml_missing
    if errors:
        facts["errors"] = errors
    return {"facts": facts, "volatile": volatile}


def collect(config: Dict[str, Any]) -> Dict[str, Any]:
    options = config.get("nvidia") or {}
    if options.get("source") == "smi":
        return collect_with(None, options, "nvidia-smi asked for")
    nvml, why, early = nvml_reader.open_nvml(early=True)   # the driver's start beside
    try:                                                    # pynvml's import
        return collect_with(nvml, options, why)
    finally:
        if early is not None:
            early.end()
