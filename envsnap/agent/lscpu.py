"""lscpu's CPU facts, read from /proc/cpuinfo and /sys as lscpu reads them, without lscpu.

torch's collect_env prints lscpu's output whole; these are its lines that a file states:
the first processor's identity and flags, the caches (one CPU's, counted over the online
CPUs: the instances lscpu prints assume every core has the same caches, which hybrid CPUs
break) and the kernel's vulnerability files. lscpu's hypervisor vendor comes from the
CPUID instruction, which no file shows, so it is not recorded.
"""
from __future__ import annotations

import os
import sys

from .util import listed, read_first_line

TYPE_CHECKING = False   # typing's own, without its import: see runner.py
if TYPE_CHECKING:
    from typing import Any, Dict, Optional, Set

CPU_DIR = "/sys/devices/system/cpu"
# /proc/cpuinfo's name (x86 first, then ARM's) -> the Cpu field
IDENTITY = (("vendor_id", ("vendor_id", "CPU implementer")),
            ("family", ("cpu family", "CPU architecture")),
            ("model_id", ("model", "CPU part")),
            ("stepping", ("stepping", "CPU revision")),
            ("flags", ("flags", "Features")),
            ("address_sizes", ("address sizes",)))
# measured at boot: it moves from one boot to the next, so a reading, not a fact
BOGOMIPS = ("bogomips", "BogoMIPS")
SIZE_LETTERS = "BKMGTPE"
SIZE_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def identity(block: Dict[str, str]) -> Dict[str, Optional[str]]:
    """The first processor's fields as lscpu prints them (it too reads one block)."""
    return {field: next((block[name] for name in names if name in block), None)
            for field, names in IDENTITY}


def bogomips(block: Dict[str, str]) -> Optional[str]:
    return next((block[name] for name in BOGOMIPS if name in block), None)


def op_modes(machine: str, flags: Optional[str]) -> Optional[str]:
    """lscpu's `CPU op-mode(s)` on x86: 64-bit where the flags say long mode (lm)."""
    if machine not in ("x86_64", "i686", "i386"):
        return None
    words = (flags or "").split()
    return "32-bit, 64-bit" if "lm" in words else "32-bit"


def byte_order() -> str:
    return "Little Endian" if sys.byteorder == "little" else "Big Endian"


def cpu_set(text: Optional[str]) -> Set[int]:
    """A kernel CPU list ("0-3,8,10-11") as the set of CPUs it names; an unreadable part
    names none."""
    cpus: Set[int] = set()
    for part in (text or "").split(","):
        first, dash, last = part.strip().partition("-")
        if first.isdigit() and (not dash or last.isdigit()):
            cpus.update(range(int(first), int(last if dash else first) + 1))
    return cpus


def size_bytes(text: Optional[str]) -> Optional[int]:
    """sysfs's cache size ("48K") in bytes."""
    text = (text or "").strip()
    unit = SIZE_UNITS.get(text[-1:], 1) if text[-1:].isalpha() else 1
    digits = text.rstrip("KMGB")
    return int(digits) * unit if digits.isdigit() else None


def human_size(size: int) -> str:
    """util-linux's size_to_human_string with a space and three letters: 768 KiB, 1.5 MiB."""
    exp = 0
    while exp < 60 and size >= 1 << (exp + 10):
        exp += 10
    whole, frac = (size >> exp, size & ((1 << exp) - 1)) if exp else (size, 0)
    tenth = (frac // (1 << (exp - 10)) + 50) // 100 if exp and frac else 0
    if tenth == 10:
        whole, tenth = whole + 1, 0
    unit = SIZE_LETTERS[exp // 10] + ("iB" if exp else "")
    return "%d.%d %s" % (whole, tenth, unit) if tenth else "%d %s" % (whole, unit)


def cache_name(folder: str) -> Optional[str]:
    level = read_first_line(os.path.join(folder, "level"))
    kind = read_first_line(os.path.join(folder, "type")) or ""
    if not level:
        return None
    return "L%s%s" % (level, {"Data": "d", "Instruction": "i"}.get(kind, ""))


def read_caches(online: Set[int]) -> Dict[str, str]:
    """{"L1d": "768 KiB (16 instances)"}: the first online CPU's caches, each counted once
    per group of CPUs sharing it."""
    if not online:
        return {}
    caches: Dict[str, str] = {}
    base = os.path.join(CPU_DIR, "cpu%d" % min(online), "cache")
    for folder in sorted(listed(base, lambda name: name.startswith("index"))):
        name = cache_name(folder)
        size = size_bytes(read_first_line(os.path.join(folder, "size")))
        sharing = len(cpu_set(read_first_line(os.path.join(folder, "shared_cpu_list"))))
        if name and size and sharing:
            instances = max(1, len(online) // sharing)
            caches[name] = "%s (%d instance%s)" % (human_size(size * instances), instances,
                                                   "" if instances == 1 else "s")
    return caches


def vulnerability_name(file_name: str) -> str:
    """spec_store_bypass -> "Spec store bypass", as lscpu names the kernel's files."""
    words = file_name.replace("_", " ")
    return words[:1].upper() + words[1:]


def read_vulnerabilities() -> Dict[str, Optional[str]]:
    folder = os.path.join(CPU_DIR, "vulnerabilities")
    return {vulnerability_name(os.path.basename(path)): read_first_line(path)
            for path in sorted(listed(folder, lambda name: True))}


def lscpu_facts(block: Dict[str, str], machine: str, online: Optional[str]) -> Dict[str, Any]:
    facts: Dict[str, Any] = identity(block)
    facts["op_modes"] = op_modes(machine, facts["flags"])
    facts["byte_order"] = byte_order()
    facts["caches"] = read_caches(cpu_set(online))
    facts["vulnerabilities"] = read_vulnerabilities()
    return facts
