"""Host facts: identity, kernel, OS, boot, CPU, NUMA, memory, limits, kernel command line,
and the compilers and libc that torch's collect_env reports (agent/toolchain.py).

Everything but the compilers comes from /proc, /sys and the stdlib. Each reader
returns None (or an empty map) when its source is missing, as in containers and VMs.
Neither socket, glob nor shlex is imported (2 ms of every capture): the host name is uname's,
as socket.gethostname() reads it, /sys folders are listed by util.listed, and os-release's
usual values are unquoted here (shell_value).
"""
from __future__ import annotations

import os
import re
import resource

from . import lscpu, toolchain
from .redact import redact_text
from .util import listed, read_first_line, read_text

TYPE_CHECKING = False   # typing's own, without its import: see runner.py
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional, Tuple

OS_RELEASE_KEYS = ("NAME", "VERSION_ID", "PRETTY_NAME", "ID")
NODE_DIR = re.compile(r"node(\d+)$")


def collect(config: Dict[str, Any]) -> Dict[str, Any]:
    meminfo = parse_meminfo(read_text("/proc/meminfo") or "")
    cpuinfo = read_text("/proc/cpuinfo", limit=16 << 20) or ""
    cmdline = read_first_line("/proc/cmdline")
    numa = read_numa_nodes()
    facts = {
        "hostname": os.uname().nodename,
        "kernel": kernel_info(),
        "os_release": read_os_release(),
        "boot_id": read_first_line("/proc/sys/kernel/random/boot_id"),
        "cpu": read_cpu(cpuinfo),
        "governors": read_governors(),
        "numa": {node: {"cpulist": info["cpulist"]} for node, info in numa.items()},
        "memory": memory_facts(meminfo),
        "limits": read_limits(),
        "cmdline": redact_text(cmdline) if cmdline is not None else None,
        "iommu": read_iommu(cmdline or ""),
        "transparent_hugepage": read_thp(),
        "toolchain": toolchain.collect(config),
    }
    volatile = {
        "uptime_seconds": parse_uptime(read_text("/proc/uptime") or ""),
        "loadavg": parse_loadavg(read_text("/proc/loadavg") or ""),
        "mem_available_kib": meminfo.get("MemAvailable"),
        # A node's memory is a reading: VMs that hot-plug memory (the lent Firecracker H200s)
        # grow node0 from 6 to 7 GiB under load while MemTotal stays put.
        "numa_mem_total_kib": {node: info["mem_total_kib"] for node, info in numa.items()},
        "bogomips": lscpu.bogomips(first_block(cpuinfo)),
    }
    return {"facts": facts, "volatile": volatile}


def kernel_info() -> Dict[str, str]:
    uname = os.uname()
    return {"release": uname.release, "version": uname.version, "machine": uname.machine}


def read_os_release() -> Optional[Dict[str, str]]:
    # /usr/lib/os-release is the fallback the os-release(5) spec names.
    text = read_text("/etc/os-release") or read_text("/usr/lib/os-release")
    if text is None:
        return None
    fields = parse_os_release(text)
    return {key: fields[key] for key in OS_RELEASE_KEYS if key in fields}


def parse_os_release(text: str) -> Dict[str, str]:
    """KEY=value lines with shell quoting, as os-release(5) defines them."""
    fields: Dict[str, str] = {}
    for line in text.splitlines():
        key, eq, raw = line.strip().partition("=")
        if not eq or key.startswith("#"):
            continue
        fields[key] = shell_value(raw)
    return fields


SHELL_SPECIAL = frozenset(" \t\r\n\"'\\")   # shlex's whitespace, quotes and escape


def shell_value(raw: str) -> str:
    """The words shlex.split(raw) reads, joined by a space. The usual forms (bare, or quoted
    whole with no quote or backslash inside) read the same here without shlex's import."""
    quote = raw[:1]
    if quote in ("'", '"') and len(raw) >= 2 and raw.endswith(quote) and \
            quote not in raw[1:-1] and "\\" not in raw[1:-1]:
        return raw[1:-1]
    if not SHELL_SPECIAL.intersection(raw):
        return raw
    import shlex

    try:
        return " ".join(shlex.split(raw))
    except ValueError:  # an unbalanced quote: keep the raw text rather than lose the line
        return raw


def read_cpu(text: str) -> Dict[str, Any]:
    cpu = parse_cpuinfo(text)
    cpu["online"] = read_first_line("/sys/devices/system/cpu/online")
    cpu["smt"] = read_first_line("/sys/devices/system/cpu/smt/control")
    cpu.update(lscpu.lscpu_facts(first_block(text), os.uname().machine, cpu["online"]))
    return cpu


def first_block(cpuinfo: str) -> Dict[str, str]:
    """The first processor's fields: lscpu too reads the identity of one."""
    return parse_colon_block(cpuinfo.lstrip().split("\n\n", 1)[0])


def parse_cpuinfo(text: str) -> Dict[str, Any]:
    """Model, logical CPUs, sockets and physical cores from /proc/cpuinfo.

    Sockets and cores are None where the architecture does not report them (many ARM hosts).
    """
    blocks = [parse_colon_block(block) for block in text.strip().split("\n\n") if block.strip()]
    processors = [block for block in blocks if "processor" in block]
    model = next((b.get("model name") or b.get("Model") for b in processors
                  if b.get("model name") or b.get("Model")), None)
    sockets = {b["physical id"] for b in processors if "physical id" in b}
    cores = {(b["physical id"], b["core id"]) for b in processors
             if "physical id" in b and "core id" in b}
    return {"model": model, "logical_cpus": len(processors) or os.cpu_count(),
            "sockets": len(sockets) or None, "physical_cores": len(cores) or None}


def parse_colon_block(block: str) -> Dict[str, str]:
    fields: Dict[str, str] = {}
    for line in block.splitlines():
        key, colon, value = line.partition(":")
        if colon:
            fields[key.strip()] = value.strip()
    return fields


def read_governors() -> Dict[str, int]:
    """{governor: number of CPUs}: one line per distinct setting instead of one per CPU."""
    cpus = listed("/sys/devices/system/cpu", lambda name: numbered(name, "cpu"))
    paths = [path for path in (os.path.join(cpu, "cpufreq", "scaling_governor") for cpu in cpus)
             if os.path.lexists(path)]
    return count_values(read_first_line(path) for path in paths)


def numbered(name: str, prefix: str) -> bool:
    """The names glob's `cpu[0-9]*` takes: the prefix, then an ASCII digit."""
    return name.startswith(prefix) and "0" <= name[len(prefix):len(prefix) + 1] <= "9"


def count_values(values: Any) -> Dict[str, int]:
    counts: Dict[str, int] = {}
    for value in values:
        key = value if value is not None else "unreadable"
        counts[key] = counts.get(key, 0) + 1
    return counts


def read_numa_nodes() -> Dict[str, Dict[str, Any]]:
    nodes: Dict[str, Dict[str, Any]] = {}
    for path in listed("/sys/devices/system/node", lambda name: numbered(name, "node")):
        match = NODE_DIR.search(path)
        if match:
            meminfo = parse_meminfo(read_text(os.path.join(path, "meminfo")) or "")
            nodes[match.group(1)] = {"cpulist": read_first_line(os.path.join(path, "cpulist")),
                                     "mem_total_kib": meminfo.get("MemTotal")}
    return nodes


def parse_meminfo(text: str) -> Dict[str, int]:
    """/proc/meminfo or a NUMA node's meminfo ("Node 0 MemTotal: 123 kB") -> {key: number}.

    Values are kB where the kernel says kB, plain counts otherwise (HugePages_Total).
    """
    values: Dict[str, int] = {}
    for line in text.splitlines():
        key, colon, rest = line.partition(":")
        words = rest.split()
        if colon and words and words[0].isdigit():
            values[key.split()[-1]] = int(words[0])
    return values


def memory_facts(meminfo: Dict[str, int]) -> Dict[str, Optional[int]]:
    return {"total_kib": meminfo.get("MemTotal"), "swap_total_kib": meminfo.get("SwapTotal"),
            "hugepages_total": meminfo.get("HugePages_Total"),
            "hugepage_size_kib": meminfo.get("Hugepagesize")}


def read_limits() -> Dict[str, Dict[str, Any]]:
    """This process's limits: the agent runs in the same kind of session that starts jobs."""
    return {"nofile": rlimit_pair(resource.getrlimit(resource.RLIMIT_NOFILE)),
            "memlock": rlimit_pair(resource.getrlimit(resource.RLIMIT_MEMLOCK))}


def rlimit_pair(pair: Tuple[int, int]) -> Dict[str, Any]:
    soft, hard = pair
    return {"soft": rlimit_value(soft), "hard": rlimit_value(hard)}


def rlimit_value(value: int) -> Any:
    return "unlimited" if value == resource.RLIM_INFINITY else value


def read_iommu(cmdline: str) -> Dict[str, Any]:
    groups_dir = "/sys/kernel/iommu_groups"
    # Groups exist only when an IOMMU is really active, whatever the cmdline asked for.
    groups = len(os.listdir(groups_dir)) if os.path.isdir(groups_dir) else None
    return {"cmdline": iommu_params(cmdline), "groups": groups}


def iommu_params(cmdline: str) -> Dict[str, Any]:
    """intel_iommu=on iommu=pt -> {"intel_iommu": "on", "iommu": "pt"}; a bare flag is True."""
    params: Dict[str, Any] = {}
    for word in kernel_params(cmdline):
        key, eq, value = word.partition("=")
        if "iommu" in key.lower():
            params[key] = value if eq else True
    return params


def kernel_params(cmdline: str) -> List[str]:
    # Words after a lone "--" belong to init, not to the kernel.
    words = cmdline.split()
    return words[:words.index("--")] if "--" in words else words


def read_thp() -> Dict[str, Optional[str]]:
    base = "/sys/kernel/mm/transparent_hugepage/"
    return {name: parse_bracketed(read_first_line(base + name)) for name in ("enabled", "defrag")}


def parse_bracketed(line: Optional[str]) -> Optional[str]:
    """'always [madvise] never' -> 'madvise' (sysfs marks the active choice with brackets)."""
    if line is None:
        return None
    match = re.search(r"\[([^\]]+)\]", line)
    return match.group(1) if match else line.strip()


def parse_uptime(text: str) -> Optional[float]:
    words = text.split()
    try:
        return float(words[0]) if words else None
    except ValueError:
        return None


def parse_loadavg(text: str) -> Optional[Dict[str, float]]:
    words = text.split()
    try:
        return {"1m": float(words[0]), "5m": float(words[1]), "15m": float(words[2])}
    except (IndexError, ValueError):
        return None
