"""The nvidia-smi fallback, for hosts where NVML cannot be used through pynvml.

Running it and parsing its output are separate: the parsers are pure and are tested on
output recorded on a real H200. The records use the same field names as the NVML parser
(nvidia.parse_nvml) so that a snapshot taken either way diffs cleanly against the other.
"""
from __future__ import annotations

import csv
import re
from typing import Any, Dict, List, Optional, Tuple

from . import util

# (query field, record field, kind). Kinds: str, int, float (watts, rounded), hex (a mask).
QUERY_FIELDS: List[Tuple[str, str, str]] = [
    ("index", "index", "int"),
    ("pci.bus_id", "bus_id", "str"),
    ("driver_version", "driver_version", "str"),
    ("name", "name", "str"),
    ("uuid", "uuid", "str"),
    ("vbios_version", "vbios", "str"),
    ("inforom.img", "inforom_image", "str"),
    ("persistence_mode", "persistence_mode", "str"),
    ("compute_mode", "compute_mode", "str"),
    ("ecc.mode.current", "ecc_mode_current", "str"),
    ("ecc.mode.pending", "ecc_mode_pending", "str"),
    ("mig.mode.current", "mig_mode_current", "str"),
    ("mig.mode.pending", "mig_mode_pending", "str"),
    ("compute_cap", "compute_capability", "str"),
    ("memory.total", "memory_total_mib", "int"),
    ("power.limit", "power_limit_w", "float"),
    ("power.default_limit", "power_default_limit_w", "float"),
    ("power.min_limit", "power_min_limit_w", "float"),
    ("power.max_limit", "power_max_limit_w", "float"),
    ("enforced.power.limit", "power_enforced_limit_w", "float"),
    ("clocks.max.graphics", "clock_max_graphics_mhz", "int"),
    ("clocks.max.sm", "clock_max_sm_mhz", "int"),
    ("clocks.max.memory", "clock_max_mem_mhz", "int"),
    ("clocks.applications.graphics", "clock_app_graphics_mhz", "int"),
    ("clocks.applications.memory", "clock_app_mem_mhz", "int"),
    ("clocks.default_applications.graphics", "clock_default_app_graphics_mhz", "int"),
    ("clocks.default_applications.memory", "clock_default_app_mem_mhz", "int"),
    ("pcie.link.gen.current", "pcie_gen_current", "int"),
    ("pcie.link.gen.max", "pcie_gen_max", "int"),
    ("pcie.link.gen.gpumax", "pcie_gen_gpu_max", "int"),
    ("pcie.link.width.current", "pcie_width_current", "int"),
    ("pcie.link.width.max", "pcie_width_max", "int"),
    ("clocks.current.graphics", "clock_graphics_mhz", "int"),
    ("clocks.current.sm", "clock_sm_mhz", "int"),
    ("clocks.current.memory", "clock_mem_mhz", "int"),
    ("pstate", "pstate", "str"),
    ("temperature.gpu", "temperature_c", "int"),
    ("power.draw", "power_draw_w", "float"),
    ("utilization.gpu", "utilization_gpu_pct", "int"),
    ("utilization.memory", "utilization_mem_pct", "int"),
    ("memory.used", "memory_used_mib", "int"),
    # the old name first: where both exist they agree, where one is missing it is dropped
    ("clocks_throttle_reasons.active", "clock_event_reasons_mask", "hex"),
    ("clocks_event_reasons.active", "clock_event_reasons_mask", "hex"),
    ("clocks_event_reasons.supported", "clock_event_reasons_supported_mask", "hex"),
    ("ecc.errors.corrected.volatile.total", "ecc_corrected_volatile", "int"),
    ("ecc.errors.uncorrected.volatile.total", "ecc_uncorrected_volatile", "int"),
    ("ecc.errors.corrected.aggregate.total", "ecc_corrected_aggregate", "int"),
    ("ecc.errors.uncorrected.aggregate.total", "ecc_uncorrected_aggregate", "int"),
    ("fan.speed", "fan_pct", "int"),
]
FIELD_KINDS = {field: (name, kind) for field, name, kind in QUERY_FIELDS}
INVALID_FIELD = re.compile(r'Field "([^"]+)" is not a valid field')
ANSI = re.compile(r"\x1b\[[0-9;]*m")
MAX_RETRIES = 8  # each retry drops one field an older nvidia-smi does not know


# ---- running ----------------------------------------------------------------------------

def query_argv(exe: str, fields: List[str]) -> List[str]:
    return [exe, "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"]


def failure_text(out: bytes, err: bytes) -> str:
    # nvidia-smi prints its own failures ("couldn't communicate with the driver") on stdout
    text = util.escaped(err or out).strip()
    return text.splitlines()[0] if text else "no output"


def query_gpus(exe: str, timeout: float,
               fields: Optional[List[str]] = None) -> Tuple[List[str], str]:
    """(the fields this nvidia-smi accepted, its csv output). Raises CollectorError."""
    wanted = list(fields or [field for field, _, _ in QUERY_FIELDS])
    for _ in range(MAX_RETRIES):
        code, out, err = util.run(query_argv(exe, wanted), timeout=timeout)
        if code == 0:
            return wanted, util.escaped(out)
        unknown = INVALID_FIELD.search(util.escaped(out + err))
        if not unknown or unknown.group(1) not in wanted:
            raise util.CollectorError("nvidia-smi exit %d: %s" % (code, failure_text(out, err)))
        wanted.remove(unknown.group(1))
    raise util.CollectorError("nvidia-smi rejected too many query fields")


def topology_text(exe: str, timeout: float) -> str:
    code, out, err = util.run([exe, "topo", "-m"], timeout=timeout)
    if code != 0:
        raise util.CollectorError("nvidia-smi topo exit %d: %s" % (code, failure_text(out, err)))
    return util.escaped(out)


# ---- parsing (pure) ---------------------------------------------------------------------

def convert(text: str, kind: str) -> Any:
    """One csv cell -> a value; "[Unknown Error]" is an error in place, like NVML's."""
    text = text.strip()
    if text in ("[N/A]", "N/A", "", "[Not Supported]"):
        return None
    if text.startswith("[") and text.endswith("]"):
        return {"error": text[1:-1]}
    try:
        if kind == "int":
            return int(float(text))
        if kind == "float":
            return round(float(text), 2)
        if kind == "hex":
            return int(text, 16)
    except ValueError:
        return {"error": "unparsed: %s" % text}
    return text


def parse_query_row(row: List[str], fields: List[str]) -> Dict[str, Any]:
    record: Dict[str, Any] = {}
    for field, cell in zip(fields, row):
        name, kind = FIELD_KINDS.get(field, (field, "str"))
        value = convert(cell, kind)
        if value is not None or name not in record:
            record[name] = value
    return record


def parse_query(text: str, fields: List[str]) -> Dict[int, Dict[str, Any]]:
    """csv,noheader,nounits output -> {gpu index: record}."""
    records: Dict[int, Dict[str, Any]] = {}
    for row in csv.reader(text.splitlines(), skipinitialspace=True):
        if row:
            record = parse_query_row(row, fields)
            records[int(record.get("index", len(records)))] = record
    return records


def split_cells(line: str) -> List[str]:
    # columns are tab-separated, with doubled tabs for alignment: no cell is ever empty
    return [cell.strip() for cell in re.split(r"\t+", ANSI.sub("", line).rstrip("\n"))]


AFFINITY_COLUMNS = {"CPU Affinity": "cpu", "NUMA Affinity": "numa", "GPU NUMA ID": "gpu_numa_id"}


def parse_topology_row(header: List[str], cells: List[str]) -> Tuple[Dict[str, str],
                                                                        Dict[str, str]]:
    links: Dict[str, str] = {}
    affinity: Dict[str, str] = {}
    for column, cell in zip(header[1:], cells[1:]):
        if column in AFFINITY_COLUMNS:
            affinity[AFFINITY_COLUMNS[column]] = cell
        elif cell != "X":
            links[column] = cell
    return links, affinity


def parse_nic_legend(lines: List[str]) -> Dict[str, str]:
    nics: Dict[str, str] = {}
    for line in lines:
        match = re.match(r"\s*(NIC\d+):\s*(\S+)\s*$", ANSI.sub("", line))
        if match:
            nics[match.group(1)] = match.group(2)
    return nics


def parse_topology(text: str) -> Dict[str, Any]:
    """`nvidia-smi topo -m` -> {"links": {gpu: {peer: link}}, "affinity": {gpu: {...}},
    "nics": {NIC0: mlx5_0}}; names are the matrix's own (GPU0, NIC0)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip()), len(lines))
    header = split_cells(lines[start]) if start < len(lines) else []
    links: Dict[str, Dict[str, str]] = {}
    affinity: Dict[str, Dict[str, str]] = {}
    for line in lines[start + 1:]:
        cells = split_cells(line)
        if not cells or not cells[0] or cells[0].startswith("Legend"):
            break
        if cells[0].startswith("GPU"):
            links[cells[0]], affinity[cells[0]] = parse_topology_row(header, cells)
    return {"links": links, "affinity": affinity, "nics": parse_nic_legend(lines)}
