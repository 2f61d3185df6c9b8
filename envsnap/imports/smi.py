"""nvidia-smi's outputs -> nvidia facts, GPUs keyed by PCI bus id as the agent keys them.

- the default table (`nvidia-smi`): the `NVIDIA-SMI x  Driver Version: y  CUDA Version: z`
  banner, then three lines a GPU: index, name, persistence, bus id; power cap and memory;
  compute and MIG mode (driver 450 onwards; older tables lack the MIG line);
- `nvidia-smi -q`: `==============NVSMI LOG==============`, then `Key : Value` lines nested
  by four spaces, one `GPU <bus id>` block a GPU; a group is a key alone on its line;
- `nvidia-smi -q -x`: the same tree as XML (`<nvidia_smi_log>`, `<gpu id="bus">`), read with
  the standard library's expat parser (which expands no external entity);
- `nvidia-smi topo -m`: the matrix the agent reads too (agent/smi.parse_topology): links
  between GPUs and NICs, each GPU's CPU and NUMA affinity; GPUs are named GPU0.. there, so
  they take their bus ids from another nvidia-smi file of the host (build.py).

The GPUs in -q and the table come in PCI bus order, the order NVML numbers them by default,
so a GPU's position is its index. Readings that move (clocks now, temperature, use) stay out:
they are the volatile part of a capture, and a paste is one moment of it."""
from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Union, cast
from xml.etree import ElementTree

from envsnap.agent.nvidia import normalize_bus_id
from envsnap.agent.smi import ANSI
from envsnap.imports import topology
from envsnap.imports.reading import Reading, Unreadable, quoted

if TYPE_CHECKING:
    from envsnap.snapshot.records import Facts, Gpu, Nvidia

Q_BANNER = "==============NVSMI LOG=============="
UNREAD = {"N/A", "[N/A]", "Unknown Error", "[Unknown Error]", "Not Supported",
          "[Not Supported]", ""}

# envsnap field -> (where -q -x keeps it, where -q keeps it), how it reads
GPU_FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...], str]] = {
    "name": (("product_name",), ("Product Name",), "str"),
    "architecture": (("product_architecture",), ("Product Architecture",), "str"),
    "uuid": (("uuid",), ("GPU UUID",), "str"),
    "vbios": (("vbios_version",), ("VBIOS Version",), "str"),
    "inforom_image": (("inforom_version", "img_version"), ("Inforom Version", "Image Version"),
                      "str"),
    "persistence_mode": (("persistence_mode",), ("Persistence Mode",), "str"),
    "mig_mode_current": (("mig_mode", "current_mig"), ("MIG Mode", "Current"), "str"),
    "mig_mode_pending": (("mig_mode", "pending_mig"), ("MIG Mode", "Pending"), "str"),
    "compute_mode": (("compute_mode",), ("Compute Mode",), "str"),
    "ecc_mode_current": (("ecc_mode", "current_ecc"), ("ECC Mode", "Current"), "str"),
    "ecc_mode_pending": (("ecc_mode", "pending_ecc"), ("ECC Mode", "Pending"), "str"),
    "memory_total_mib": (("fb_memory_usage", "total"), ("FB Memory Usage", "Total"), "int"),
    "pcie_gen_max": (("pci", "pci_gpu_link_info", "pcie_gen", "max_link_gen"),
                     ("PCI", "GPU Link Info", "PCIe Generation", "Max"), "int"),
    "pcie_gen_current": (("pci", "pci_gpu_link_info", "pcie_gen", "current_link_gen"),
                         ("PCI", "GPU Link Info", "PCIe Generation", "Current"), "int"),
    "pcie_width_max": (("pci", "pci_gpu_link_info", "link_widths", "max_link_width"),
                       ("PCI", "GPU Link Info", "Link Width", "Max"), "int"),
    "pcie_width_current": (("pci", "pci_gpu_link_info", "link_widths", "current_link_width"),
                           ("PCI", "GPU Link Info", "Link Width", "Current"), "int"),
    "power_limit_w": (("gpu_power_readings", "requested_power_limit"),
                      ("GPU Power Readings", "Requested Power Limit"), "float"),
    "power_enforced_limit_w": (("gpu_power_readings", "current_power_limit"),
                               ("GPU Power Readings", "Current Power Limit"), "float"),
    "power_default_limit_w": (("gpu_power_readings", "default_power_limit"),
                              ("GPU Power Readings", "Default Power Limit"), "float"),
    "power_min_limit_w": (("gpu_power_readings", "min_power_limit"),
                          ("GPU Power Readings", "Min Power Limit"), "float"),
    "power_max_limit_w": (("gpu_power_readings", "max_power_limit"),
                          ("GPU Power Readings", "Max Power Limit"), "float"),
    "clock_max_graphics_mhz": (("max_clocks", "graphics_clock"), ("Max Clocks", "Graphics"),
                               "int"),
    "clock_max_sm_mhz": (("max_clocks", "sm_clock"), ("Max Clocks", "SM"), "int"),
    "clock_max_mem_mhz": (("max_clocks", "mem_clock"), ("Max Clocks", "Memory"), "int"),
    "clock_max_video_mhz": (("max_clocks", "video_clock"), ("Max Clocks", "Video"), "int"),
    "clock_app_graphics_mhz": (("applications_clocks", "graphics_clock"),
                               ("Applications Clocks", "Graphics"), "int"),
    "clock_app_mem_mhz": (("applications_clocks", "mem_clock"),
                          ("Applications Clocks", "Memory"), "int"),
    "clock_default_app_graphics_mhz": (("default_applications_clocks", "graphics_clock"),
                                       ("Default Applications Clocks", "Graphics"), "int"),
    "clock_default_app_mem_mhz": (("default_applications_clocks", "mem_clock"),
                                  ("Default Applications Clocks", "Memory"), "int"),
    "temp_shutdown_c": (("temperature", "gpu_temp_max_threshold"),
                        ("Temperature", "GPU Shutdown Temp"), "int"),
    "temp_slowdown_c": (("temperature", "gpu_temp_slow_threshold"),
                        ("Temperature", "GPU Slowdown Temp"), "int"),
}
Tree = dict[str, Union["Tree", str]]    # -q's text: a group's lines, or a line's value
Lookup = Callable[[tuple[str, ...]], Union[str, None]]   # a field's text where the file has it


def known(text: str | None) -> str | None:
    value = (text or "").strip()
    return None if value in UNREAD else value


def convert(text: str | None, kind: str) -> str | int | float | None:
    """"143771 MiB" -> 143771, "16x" -> 16, "700.00 W" -> 700.0; N/A -> None (unknown)."""
    value = known(text)
    if value is None or kind == "str":
        return value
    number = re.match(r"[-+]?\d+(?:\.\d+)?", value)
    if not number:
        return None
    return float(number.group()) if kind == "float" else int(float(number.group()))


def looks_like(text: str) -> str | None:
    head = ANSI.sub("", text.lstrip()[:600])
    if head.startswith("<?xml") and "<nvidia_smi_log" in text[:2000] or \
            head.startswith("<nvidia_smi_log"):
        return "nvidia-smi -q -x"
    if Q_BANNER in head:
        return "nvidia-smi -q"
    if "NVIDIA-SMI" in head and "Driver Version:" in head:
        return "nvidia-smi"
    first = head.splitlines()[0] if head else ""
    if topology.is_header(first):
        return "nvidia-smi topo -m"
    if topology.is_rocm_start(first):
        return "rocm-smi --showtopo"
    return None


def gpu_record(lookup: Lookup, index: int, which: int) -> Gpu:
    record: dict[str, str | int | float] = {"index": index}
    for field, (*paths, kind) in GPU_FIELDS.items():
        value = convert(lookup(paths[which]), kind)
        if value is not None:
            record[field] = value
    return cast("Gpu", record)     # GPU_FIELDS names Gpu's fields, each read as its kind


def nvidia_facts(driver: str | None, cuda: str | None, gpus: dict[str, Gpu]) -> Nvidia:
    facts: Nvidia = {"present": True, "gpus": gpus, "gpu_count": len(gpus)}
    if known(driver):
        facts["driver"] = known(driver)
    if known(cuda):
        facts["cuda_driver"] = known(cuda)
    return facts


# ---- -q -x ---------------------------------------------------------------------------------

def read_xml(text: str, source: str) -> Reading:
    try:
        root = ElementTree.fromstring(text)
    except ElementTree.ParseError as bad:
        raise Unreadable(source, bad.position[0], f"cannot read it as nvidia-smi XML ({bad}):"
                         " malformed or truncated") from None
    if root.tag != "nvidia_smi_log":
        raise Unreadable(source, 1, f"not an nvidia-smi log: its root is <{root.tag}>")
    gpus: dict[str, Gpu] = {}
    for index, gpu in enumerate(root.findall("gpu")):
        def lookup(path: tuple[str, ...], gpu: ElementTree.Element = gpu) -> str | None:
            found = gpu.find("/".join(path))
            if found is None and path[0] == "gpu_power_readings":   # before driver 530
                found = gpu.find("/".join(("power_readings",) + path[1:]))
            return found.text if found is not None else None
        gpus[normalize_bus_id(gpu.get("id", ""))] = gpu_record(lookup, index, 0)
    facts = nvidia_facts(root.findtext("driver_version"), root.findtext("cuda_version"), gpus)
    return Reading("nvidia-smi -q -x", "XML", {"nvidia": facts}, facts.get("driver"),
                   complete=["nvidia.gpus"])


# ---- -q ------------------------------------------------------------------------------------

def q_lines(text: str, source: str) -> list[tuple[int, int, str, str | None]]:
    """(line number, depth, key, value or None for a group) of each line after the banner."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if Q_BANNER in line), None)
    if start is None:
        raise Unreadable(source, 1, f"not a nvidia-smi -q output: no {Q_BANNER!r} banner")
    start += 1
    found: list[tuple[int, int, str, str | None]] = []
    for number in range(start, len(lines)):
        line = lines[number].rstrip()
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        key, colon, value = line.strip().partition(" : ")
        if not colon and line.strip().endswith(":"):
            key, colon, value = line.strip()[:-1], ":", ""
        if indent % 4 or (indent == 0 and not colon and not key.startswith("GPU ")):
            raise Unreadable(source, number + 1, f"cannot read {quoted(line)} as a nvidia-smi "
                             "-q line ('Key : Value', nested by four spaces)")
        found.append((number + 1, indent // 4, key.strip(), value.strip() if colon else None))
    return found


def text_of(value: Tree | str | None) -> str | None:
    """A line's value; None for a group or nothing."""
    return value if isinstance(value, str) else None


def q_tree(rows: list[tuple[int, int, str, str | None]]) -> Tree:
    root: Tree = {}
    stack: list[Tree] = [root]
    for _, depth, key, value in rows:
        del stack[depth + 1:]
        parent = stack[min(depth, len(stack) - 1)]
        if value is None:
            group: Tree = {}
            parent[key] = group
            stack.append(group)
        else:
            parent.setdefault(key, value)
    return root


def read_q(text: str, source: str) -> Reading:
    rows = q_lines(text, source)
    tree = q_tree(rows)
    blocks = [(key, value) for key, value in tree.items()
              if key.startswith("GPU ") and not isinstance(value, str)]
    attached = convert(text_of(tree.get("Attached GPUs")), "int")
    if attached is not None and attached != len(blocks):
        last = rows[-1][0] if rows else 1
        raise Unreadable(source, last, f"truncated nvidia-smi -q output: {attached} GPUs "
                         f"attached, {len(blocks)} read")
    gpus: dict[str, Gpu] = {}
    for index, (key, block) in enumerate(blocks):
        def lookup(path: tuple[str, ...], block: Tree = block) -> str | None:
            here: Tree | str | None = block
            for part in path:
                here = None if here is None or isinstance(here, str) else here.get(part)
            if here is None and path[0] == "GPU Power Readings":    # before driver 530
                return lookup(("Power Readings",) + path[1:]) if path[0] != "Power Readings" \
                    else None
            return here if isinstance(here, str) else None
        gpus[normalize_bus_id(key[4:])] = gpu_record(lookup, index, 1)
    facts = nvidia_facts(text_of(tree.get("Driver Version")), text_of(tree.get("CUDA Version")),
                         gpus)
    return Reading("nvidia-smi -q", "text", {"nvidia": facts}, facts.get("driver"),
                   complete=["nvidia.gpus"])


# ---- the default table ------------------------------------------------------------------------

BANNER = re.compile(r"NVIDIA-SMI (\S+)\s+Driver Version: (\S+)(?:\s+CUDA Version: (\S+))?")
# the column is persistence mode on Linux, the driver model (TCC or WDDM) on Windows
ROW_1 = re.compile(r"\|\s+(\d+)\s+(.+?)\s+(On|Off|TCC|WDDM)\s*\|\s*"
                   r"([0-9A-Fa-f]+:[0-9A-Fa-f:.]+)\s")
# power draw and cap are `N/A` on many workstation cards and under MIG; GPU-Util too
ROW_2 = re.compile(r"\|.*?(?:\d+W|N/A)\s*/\s*(?:(\d+)W|N/A)\s*\|\s*(\d+)MiB\s*/\s*(\d+)MiB\s*\|"
                   r"\s*\S+\s+(\S+(?: \S+)?)\s*\|")     # `E. Process` is one mode
ROW_3 = re.compile(r"\|\s*\|\s*\|\s*(\S+)\s*\|")


def read_table(text: str, source: str, cut: bool = False) -> Reading:
    # indented as a whole (a paste under a prompt, in a list): the rows read from their `|`
    lines = [ANSI.sub("", line).lstrip() for line in text.splitlines()]
    banner = next((BANNER.search(line) for line in lines if BANNER.search(line)), None)
    if banner is None:
        raise Unreadable(source, 1, "not a nvidia-smi table: no 'NVIDIA-SMI ... Driver "
                         "Version:' banner")
    gpus: dict[str, Gpu] = {}
    last_row = 0
    for number, line in enumerate(lines):
        first = ROW_1.match(line)
        if not first:
            continue
        second = ROW_2.match(lines[number + 1]) if number + 1 < len(lines) else None
        stops = second is None and cut and number + 2 >= len(lines)
        if second is None and not stops:
            raise Unreadable(source, number + 2, "truncated or malformed nvidia-smi table: "
                             "no power and memory line under GPU " + first.group(1))
        record: Gpu = {"index": int(first.group(1))}
        if first.group(3) in ("On", "Off"):
            record["persistence_mode"] = "Enabled" if first.group(3) == "On" else "Disabled"
        if not first.group(2).endswith("..."):      # a long name is cut short there
            record["name"] = first.group(2)
        if second is None:          # the paste stops at this GPU's first line: what it says
            gpus[normalize_bus_id(first.group(4))] = record
            break
        record["memory_total_mib"] = int(second.group(3))
        record["compute_mode"] = second.group(4)
        if second.group(1):
            record["power_enforced_limit_w"] = float(second.group(1))
        third = ROW_3.match(lines[number + 2]) if number + 2 < len(lines) else None
        if third and third.group(1) in ("Enabled", "Disabled"):
            record["mig_mode_current"] = third.group(1)
        gpus[normalize_bus_id(first.group(4))] = record
        last_row = number + 2
    if not cut and not any(line.startswith("+") for line in lines[last_row + 1:]):
        raise Unreadable(source, len(lines), "truncated nvidia-smi table: it ends inside the "
                         "GPU table")
    facts = nvidia_facts(banner.group(2), banner.group(3), gpus)
    return Reading("nvidia-smi", "table", {"nvidia": facts}, banner.group(1),
                   complete=[] if cut else ["nvidia.gpus"])


# ---- topo -m ------------------------------------------------------------------------------------

def read_topology(text: str, source: str, cut: bool = False) -> Reading:
    lines = text.splitlines()
    at = next((i for i, line in enumerate(lines) if topology.is_header(line)), None)
    if at is None:
        raise Unreadable(source, 1, "not a nvidia-smi topo -m output: no 'GPU0 ... CPU "
                         "Affinity' header")
    matrix = topology.read_smi(lines, at)
    refuse_broken(matrix, lines, source, "a topo -m row")
    if not cut and not any(line.strip().startswith("Legend") for line in lines):
        raise Unreadable(source, len(lines), "truncated nvidia-smi topo -m output: no Legend")
    facts = topology.matrix_facts(matrix, numa_node=True).get("nvidia", {})
    # the header names every GPU, whether or not each row survived the copy
    count = sum(name.startswith("GPU") for name in matrix.columns)
    facts = {"present": True, "topology": {}, **facts, "gpu_count": count}
    return Reading("nvidia-smi topo -m", "matrix", {"nvidia": facts},
                   complete=[] if cut else ["nvidia.gpus", "nvidia.topology"])


def refuse_broken(matrix: topology.Matrix, lines: list[str], source: str, row_of: str) -> None:
    """The first row whose cells do not fit the header, refused with its line number."""
    if matrix.broken:
        row = matrix.broken[0]
        raise Unreadable(source, row + 1, f"cannot read {quoted(lines[row])} as {row_of}: its "
                         "cells do not fit the header")


# ---- rocm-smi --showtopo --------------------------------------------------------------------

def read_rocm_topology(text: str, source: str) -> Reading:
    """rocm-smi's weight, hops and link-type tables (AMD's topo -m): the link types."""
    lines = text.splitlines()
    at = next((i for i, line in enumerate(lines) if topology.is_rocm_start(line)), None)
    if at is None:
        raise Unreadable(source, 1, "not a rocm-smi --showtopo output: no 'between two GPUs' "
                         "table")
    matrix = topology.read_rocm(lines, at)
    refuse_broken(matrix, lines, source, "a row of rocm-smi's table")
    links = cast("dict[str, dict[str, str | None]]", matrix.links)
    facts: Facts = {"cuda_nccl": {"rocm": {"topology": links}}} if links else {}
    return Reading("rocm-smi --showtopo", "tables", facts)
