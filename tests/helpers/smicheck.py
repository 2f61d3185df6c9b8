"""Check a snapshot's per-GPU facts against nvidia-smi, taken on the same machine.

The agent reads GPUs through NVML; `nvidia-smi -q -x`, `--query-gpu` and `topo -m` are the
tool a user trusts, reached by another path. Used on a lent GPU machine by
tests/data/record_allreduce.py and in CI on what it recorded
(tests/unit/agent/test_multigpu.py), for
any number of GPUs. Every fact of a GPU is either checked against one source, or listed in
NOT_IN_SMI with the reason nvidia-smi cannot confirm it.
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from typing import Any

# fact -> path under <gpu> in `nvidia-smi -q -x`
XML_PATHS = {
    "name": "product_name", "uuid": "uuid", "architecture": "product_architecture",
    "vbios": "vbios_version", "inforom_image": "inforom_version/img_version",
    "persistence_mode": "persistence_mode", "compute_mode": "compute_mode",
    "ecc_mode_current": "ecc_mode/current_ecc", "ecc_mode_pending": "ecc_mode/pending_ecc",
    "mig_mode_current": "mig_mode/current_mig", "mig_mode_pending": "mig_mode/pending_mig",
    "pcie_gen_max": "pci/pci_gpu_link_info/pcie_gen/max_link_gen",
    "pcie_gen_current": "pci/pci_gpu_link_info/pcie_gen/current_link_gen",
    "pcie_gen_gpu_max": "pci/pci_gpu_link_info/pcie_gen/max_device_link_gen",
    "pcie_width_max": "pci/pci_gpu_link_info/link_widths/max_link_width",
    "pcie_width_current": "pci/pci_gpu_link_info/link_widths/current_link_width",
    "memory_total_mib": "fb_memory_usage/total",
    "power_limit_w": "gpu_power_readings/requested_power_limit",
    "power_enforced_limit_w": "gpu_power_readings/current_power_limit",
    "power_default_limit_w": "gpu_power_readings/default_power_limit",
    "power_min_limit_w": "gpu_power_readings/min_power_limit",
    "power_max_limit_w": "gpu_power_readings/max_power_limit",
    "clock_max_graphics_mhz": "max_clocks/graphics_clock",
    "clock_max_sm_mhz": "max_clocks/sm_clock", "clock_max_mem_mhz": "max_clocks/mem_clock",
    "clock_max_video_mhz": "max_clocks/video_clock",
    "clock_app_graphics_mhz": "applications_clocks/graphics_clock",
    "clock_app_mem_mhz": "applications_clocks/mem_clock",
    "clock_default_app_graphics_mhz": "default_applications_clocks/graphics_clock",
    "clock_default_app_mem_mhz": "default_applications_clocks/mem_clock",
}
# facts the XML leaves out, read from `--query-gpu` (as smi.parse_query names its columns)
QUERY_FACTS = ("compute_capability", "clock_event_reasons_supported_mask")
# fact -> `topo -m` affinity column (as smi.parse_topology names them)
TOPO_AFFINITY = {"cpu_affinity": "cpu", "numa_affinity": "numa", "numa_node": "gpu_numa_id"}
NOT_IN_SMI = {
    "temp_shutdown_c": "this driver prints shutdown/slowdown temperatures relative to T.Limit",
    "temp_slowdown_c": "this driver prints shutdown/slowdown temperatures relative to T.Limit",
    "clock_event_reasons_supported": "decoded from the mask, which is checked",
    "nvlink_active": "counted from `nvidia-smi nvlink -s`, which lists no GPU where NVLink is off",
}


def comparable(value: Any) -> Any:
    """"700.00 W", "16x", "1980 MHz", "0x1FF", "N/A" and 700.0, 16, 1980, "0x1ff", None
    compare alike."""
    if value is None or str(value).strip() in ("N/A", "[N/A]", ""):
        return None
    text = str(value).strip()
    if re.fullmatch(r"0x[0-9a-fA-F]+", text):
        return int(text, 16)
    match = re.fullmatch(r"(-?[\d.]+)\s*(W|MHz|MiB|x|C)?", text)
    return float(match.group(1)) if match else text


def smi_gpus(xml_text: str) -> tuple[dict[str, Any], list[ElementTree.Element]]:
    """(the log's top-level fields, its <gpu> elements in nvidia-smi's index order)."""
    root = ElementTree.fromstring(xml_text)
    top = {"driver": root.findtext("driver_version"), "cuda_driver": root.findtext("cuda_version"),
           "gpu_count": int(root.findtext("attached_gpus") or 0)}
    return top, root.findall("gpu")


def normal_bus(bus: str) -> str:
    domain, rest = bus.split(":", 1)
    return f"{int(domain, 16):08X}:{rest.upper()}"


def mismatch(where: str, ours: Any, theirs: Any) -> str:
    return f"{where}: snapshot {ours!r}, nvidia-smi {theirs!r}"


def check_xml(bus: str, gpu: dict[str, Any], element: ElementTree.Element,
              report: dict[str, Any]) -> None:
    for fact, path in XML_PATHS.items():
        if fact in gpu:
            report["checked"][fact] = "nvidia-smi -q -x"
            if comparable(gpu[fact]) != comparable(element.findtext(path)):
                report["mismatches"].append(mismatch(f"{bus} {fact}", gpu[fact],
                                                     element.findtext(path)))


def check_query(bus: str, gpu: dict[str, Any], row: dict[str, Any],
                report: dict[str, Any]) -> None:
    for fact in QUERY_FACTS:
        if fact in gpu and fact in row:
            report["checked"][fact] = "nvidia-smi --query-gpu"
            if comparable(gpu[fact]) != comparable(row[fact]):
                report["mismatches"].append(mismatch(f"{bus} {fact}", gpu[fact], row[fact]))


def check_affinity(bus: str, gpu: dict[str, Any], affinity: dict[str, str],
                   report: dict[str, Any]) -> None:
    for fact, column in TOPO_AFFINITY.items():
        if fact in gpu and column in affinity:
            report["checked"][fact] = "nvidia-smi topo -m"
            if comparable(gpu[fact]) != comparable(affinity[column]):
                report["mismatches"].append(mismatch(f"{bus} {fact}", gpu[fact],
                                                     affinity[column]))


def active_nvlinks(nvlink_status: str) -> dict[int, int]:
    """`nvidia-smi nvlink -s` -> {GPU index: links up}; a link is up when it has a speed."""
    active: dict[int, int] = {}
    index = None
    for line in nvlink_status.splitlines():
        header = re.match(r"GPU (\d+):", line)
        if header:
            index = int(header.group(1))
            active[index] = 0
        elif index is not None and re.match(r"\s*Link \d+: [\d.]+ GB/s", line):
            active[index] += 1
    return active


def check_links(buses: list[str], topology: dict[str, Any], links: dict[str, dict[str, str]],
                report: dict[str, Any]) -> None:
    """Every GPU pair of the matrix (NV#, PIX, PXB, PHB, NODE, SYS) against the snapshot's,
    and no GPU pair in the snapshot that the matrix lacks."""
    names = {f"GPU{index}": bus for index, bus in enumerate(buses)}
    theirs = {(names[gpu], names[peer]): link for gpu, peers in links.items()
              for peer, link in peers.items() if gpu in names and peer in names}
    ours = {(bus, peer): link for bus, peers in topology.items() for peer, link in peers.items()
            if peer in buses}
    report["pairs"] += len(theirs)
    for pair in sorted(set(theirs) | set(ours)):
        if ours.get(pair) != theirs.get(pair):
            report["mismatches"].append(mismatch(f"link {pair[0]} -> {pair[1]}",
                                                 ours.get(pair), theirs.get(pair)))


def check_nvlinks(bus: str, gpu: dict[str, Any], active: int | None,
                  report: dict[str, Any]) -> None:
    if "nvlink_active" in gpu and active is not None:
        report["checked"]["nvlink_active"] = "nvidia-smi nvlink -s"
        if gpu["nvlink_active"] != active:
            report["mismatches"].append(mismatch(f"{bus} nvlink_active",
                                                 gpu["nvlink_active"], active))


def crosscheck(nvidia_facts: dict[str, Any], xml_text: str, topo: dict[str, Any],
               query: dict[int, dict[str, Any]], nvlink_status: str) -> dict[str, Any]:
    """{"mismatches": [...], "checked": {fact: source}, "unchecked": {fact: why},
    "gpus": n, "pairs": n} for a snapshot's nvidia facts against nvidia-smi's outputs
    (topo as smi.parse_topology gives it, query as smi.parse_query gives it, and the text
    of `nvidia-smi nvlink -s`)."""
    report: dict[str, Any] = {"mismatches": [], "checked": {}, "unchecked": {}, "pairs": 0}
    top, elements = smi_gpus(xml_text)
    for fact, theirs in top.items():
        report["checked"][fact] = "nvidia-smi -q -x"
        if nvidia_facts.get(fact) != theirs:
            report["mismatches"].append(mismatch(fact, nvidia_facts.get(fact), theirs))
    buses = [normal_bus(element.get("id", "")) for element in elements]
    gpus = nvidia_facts.get("gpus") or {}
    if sorted(gpus) != sorted(buses):
        report["mismatches"].append(mismatch("GPU keys", sorted(gpus), sorted(buses)))
    for index, (bus, element) in enumerate(zip(buses, elements)):
        gpu = gpus.get(bus) or {}
        if gpu.get("index") != index:
            report["mismatches"].append(mismatch(f"{bus} index", gpu.get("index"), index))
        report["checked"]["index"] = "nvidia-smi -q -x order"
        check_xml(bus, gpu, element, report)
        check_query(bus, gpu, query.get(index) or {}, report)
        check_affinity(bus, gpu, topo.get("affinity", {}).get(f"GPU{index}") or {}, report)
        check_nvlinks(bus, gpu, active_nvlinks(nvlink_status).get(index), report)
        for fact in gpu:
            if fact not in report["checked"]:
                report["unchecked"][fact] = NOT_IN_SMI.get(fact, "no nvidia-smi source known")
    check_links(buses, nvidia_facts.get("topology") or {}, topo.get("links", {}), report)
    report["gpus"] = len(buses)
    return report
