"""The NVIDIA kernel module: which one is loaded, how it was built, and whether the file on
disk is still the one that was loaded.

/proc/driver/nvidia/version says open or proprietary, version, build host and GCC; modinfo
and /sys/module say where the module file is and its srcversion. Pure parsers first,
reading after; the parsers are tested on a recorded H200 and on the lines of the incident
in docs/STORY.md.
"""
from __future__ import annotations

import os
import re
import time

from . import util

TYPE_CHECKING = False   # typing's own, without its import: see runner.py
if TYPE_CHECKING:
    from typing import Any, Dict, Optional

PROC_VERSION = "/proc/driver/nvidia/version"
PROC_PARAMS = "/proc/driver/nvidia/params"
SYS_MODULE = "/sys/module"
# Modules whose presence changes GPU performance paths (GPUDirect RDMA, GDS, UVM).
RELATED_MODULES = ("nvidia", "nvidia_uvm", "nvidia_modeset", "nvidia_drm", "nvidia_peermem",
                   "nvidia_fs", "nv_peer_mem", "gdrdrv")

# compiled where a driver's version is read (re's cache): a host without one never compiles it
NVRM = (r"NVRM version:\s*(?P<description>.*?Kernel Module(?: for \S+)?)\s+"
        r"(?P<version>\d+(?:\.\d+)+)\s*(?:(?P<build_type>\w+ Build)\s*)?"
        r"(?:\((?P<build>[^)]*)\)\s*)?(?P<build_date>.*?)\s*$")


def parse_nvrm_line(line: str) -> Dict[str, Any]:
    out: Dict[str, Any] = {"nvrm_line": line.strip()}
    match = re.match(NVRM, line.strip())
    if not match:
        return out
    out.update({k: v for k, v in match.groupdict().items() if v})
    arch = re.search(r"x86_64|aarch64|ppc64le|arm64", out["description"])
    out["flavor"] = "open" if "Open Kernel Module" in out["description"] else "proprietary"
    out["arch"] = arch.group(0) if arch else None
    return out


def parse_gcc_line(line: str) -> Dict[str, Any]:
    text = line.split(":", 1)[1].strip()
    match = re.search(r"gcc version (\d+(?:\.\d+)+)", text) or \
        re.search(r"(\d+\.\d+(?:\.\d+)?)(?!.*\d+\.\d+)", text)
    return {"gcc_line": text, "gcc": match.group(1) if match else None}


def parse_proc_version(text: str) -> Dict[str, Any]:
    """/proc/driver/nvidia/version -> flavor (open/proprietary), version, build, gcc."""
    out: Dict[str, Any] = {}
    for line in text.splitlines():
        if line.startswith("NVRM version:"):
            out.update(parse_nvrm_line(line))
        elif line.startswith("GCC version:"):
            out.update(parse_gcc_line(line))
    return out


MODINFO_KEYS = ("filename", "version", "srcversion", "vermagic", "license")


def parse_modinfo(text: str) -> Dict[str, str]:
    out: Dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in MODINFO_KEYS and key not in out:
            out[key] = value.strip()
    return out


def parse_params(text: Optional[str]) -> Dict[str, str]:
    """/proc/driver/nvidia/params: the NVreg_* options the module was loaded with."""
    pairs = (line.partition(":") for line in (text or "").splitlines())
    return {key.strip(): value.strip() for key, sep, value in pairs if sep and key.strip()}


def loaded_modules() -> Dict[str, Optional[str]]:
    return {name: util.read_first_line(os.path.join(SYS_MODULE, name, "version"))
            for name in RELATED_MODULES if os.path.isdir(os.path.join(SYS_MODULE, name))}


def find_program(name: str) -> Optional[str]:
    # modinfo and ldconfig live in /sbin, often missing from a non-root PATH
    found = util.which(name)
    candidates = [found] if found else ["/sbin/" + name, "/usr/sbin/" + name]
    return next((p for p in candidates if p and os.access(p, os.X_OK)), None)


def module_file_facts(timeout: float) -> Dict[str, Any]:
    """The module file on disk: a DKMS rebuild or an upgrade without reboot shows here as
    a srcversion that differs from the loaded module's."""
    modinfo = find_program("modinfo")
    text = util.run_text([modinfo, "nvidia"], timeout=timeout) if modinfo else None
    info = parse_modinfo(text or "")
    out: Dict[str, Any] = {"modinfo": info or None}
    path = info.get("filename")
    if path and os.path.isfile(path):
        stat = os.stat(path)
        out["file"] = {"path": path, "size": stat.st_size,
                       "mtime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stat.st_mtime))}
    return out


def kernel_module_facts(timeout: float) -> Dict[str, Any]:
    text = util.read_text(PROC_VERSION)
    loaded = loaded_modules()
    if text is None and not loaded:
        return {}
    facts = parse_proc_version(text or "")
    facts.update({"loaded": loaded, "params": parse_params(util.read_text(PROC_PARAMS)),
                  "srcversion": util.read_first_line(
                      os.path.join(SYS_MODULE, "nvidia", "srcversion"))})
    facts.update(module_file_facts(timeout))
    disk = (facts.get("modinfo") or {}).get("srcversion")
    if disk and facts["srcversion"]:
        facts["file_matches_loaded"] = disk == facts["srcversion"]
    return facts
