"""SGLang's `python3 -m sglang.check_env` -> facts.

Its layout, as pasted in sgl-project/sglang's threads (#645 where it was added, SGLang
0.1.21; #965, 0.2.10: the compute capability line; #2805, #5389, #14327, #18943 up to 0.5):

    Python: 3.12.3 (main, ...) [GCC 13.3.0]     sys.version
    CUDA available: True
    GPU 0,1,2,3: NVIDIA B200                     GPUs of one name grouped by their indices
    GPU 0,1,2,3 Compute Capability: 10.0
    CUDA_HOME: /usr/local/cuda
    NVCC: Cuda compilation tools, release 12.9, V12.9.86
    CUDA Driver Version: 580.95.05
    PyTorch: 2.9.1+cu129
    sglang: 0.5.5                                then one `module: version` a line, or
    vllm: Module Not Found                       `Module Not Found` (an import name, not
                                                 always the distribution's: zmq, PIL)
    NVIDIA Topology:                             nvidia-smi topo -m's matrix and legend
    Hypervisor vendor: KVM / ulimit soft: N      (later releases)

The GPU lines name the devices torch sees (`torch.cuda.device_count()`, which
CUDA_VISIBLE_DEVICES narrows), the matrix's header every GPU of the host, as NVML counts
them and a capture's `gpu_count` does: where the matrix is there, its header gives the count.

Warnings a library printed before the first line are passed over. The module lines become
packages (not given whole: the script names a fixed few), keyed by their names' PEP 503 form;
"Module Not Found" is unknown here, since an import name may not be a distribution's."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

from envsnap.imports import topology
from envsnap.imports.collect_env import canonical, gpu_names, known, package_facts
from envsnap.imports.reading import Reading, Unreadable, merge, quoted
from envsnap.imports.vllm import read_topology

if TYPE_CHECKING:
    from envsnap.snapshot.records import Facts, Gpu, Nvidia, Rocm

FIRST = re.compile(r"Python: \d+\.\d+")
KEY_VALUE = re.compile(r"([A-Za-z0-9_][A-Za-z0-9_ ,.()-]*?): ?(.*)$")
GPUS = re.compile(r"GPU ([\d,]+)(?: (Compute Capability))?$")
NOT_FOUND = "Module Not Found"
DRIVER_AGAIN = re.compile(r"\d+(?:\.\d+)+")
TOPOLOGIES = ("NVIDIA Topology", "AMD Topology")
HEAD_KEYS = {"Python", "CUDA available", "CUDA_HOME", "NVCC", "CUDA Driver Version",
             "PyTorch", "Hypervisor vendor", "ulimit soft", "ROCM available",
             "HIP_HOME", "HIPCC", "ROCM Driver Version"}


def start_of(lines: list[str]) -> int | None:
    for number, line in enumerate(lines[:80]):
        if FIRST.match(line):
            return number
    return None


# Modules of the script's fixed list in every release since it was added: one of them
# is printed whether it is found or not ("Module Not Found"), while `sglang: ` itself is
# missing when the module it imported has no __version__ (a checkout run in place).
LISTED = ("sglang: ", "sgl_kernel: ", "flashinfer: ", "triton: ")


def looks_like(text: str) -> bool:
    head = text[:20000]
    return ("CUDA available: " in head or "ROCM available: " in head) and \
        any(name in head for name in LISTED) and start_of(head.splitlines()) is not None


def read(text: str, source: str, cut: bool = False) -> Reading:
    lines = text.splitlines()
    at = start_of(lines) or 0
    facts: Facts = {}
    keys: dict[str, str] = {}
    gpus: dict[str, Gpu] = {}
    packages: dict[str, str | None] = {}
    hosted: int | None = None       # the GPUs the matrix's header names
    while at < len(lines):
        line = lines[at].rstrip()
        match = KEY_VALUE.match(line)
        if not line:
            at += 1
            continue
        if not match and DRIVER_AGAIN.fullmatch(line.strip()) and \
                any(k in keys for k in ("CUDA Driver Version", "ROCM Driver Version")):
            at += 1          # up to 0.2: the driver again, once a GPU after the first
            continue
        if not match:
            raise Unreadable(source, at + 1, f"cannot read {quoted(line)} as a check_env "
                             "line ('name: value')")
        key, value = match.group(1), match.group(2).strip()
        at += 1
        if key in TOPOLOGIES:
            hosted = header_gpus(lines, at) if key == "NVIDIA Topology" else None
            at = read_topology(lines, at, facts, source)
        elif grouped := GPUS.match(key):
            for index in grouped.group(1).split(","):
                gpu = gpus.setdefault(f"GPU{index}", {"index": int(index)})
                if grouped.group(2):
                    gpu["compute_capability"] = value
                else:
                    gpu["name"] = value
        elif key in HEAD_KEYS:
            keys[key] = value
        else:
            keys.setdefault(key, value)
            if value != NOT_FOUND:
                packages[canonical(key)] = value
    if not cut and ("PyTorch" not in keys or not any(name.rstrip(": ") in keys
                                                     for name in LISTED)):
        raise Unreadable(source, len(lines), "truncated check_env output: no 'PyTorch:' "
                         "line or no line of its module list ('sglang:', 'flashinfer:', ...)")
    merge(facts, facts_of(keys, gpus, packages))
    if hosted and "gpu_count" in facts.get("nvidia", {}):
        facts["nvidia"]["gpu_count"] = hosted
    return Reading("SGLang check_env", "module lines + NVIDIA topology", facts,
                   packages.get("sglang"))


def header_gpus(lines: list[str], at: int) -> int | None:
    """How many GPUs the topology matrix's header (its first line at or after `at`) names."""
    header = next((line for line in lines[at:] if line.strip()), "")
    cells = topology.header_cells(header)
    return sum(cell.startswith("GPU") and cell not in topology.AFFINITY for cell in cells) \
        if cells else None


def facts_of(keys: dict[str, str], gpus: dict[str, Gpu],
             packages: dict[str, str | None]) -> Facts:
    facts = package_facts(packages)
    if known(keys.get("PyTorch")):
        merge(facts, {"cuda_nccl": {"torch": {"version": known(keys.get("PyTorch"))}}})
    nvcc = re.search(r"V(\d+\.\d+\.\d+)", keys.get("NVCC", ""))
    if nvcc:
        merge(facts, {"cuda_nccl": {"cuda_toolkit": {"version": nvcc.group(1)}}})
    nvidia: Nvidia = {}
    amd = "ROCM available" in keys and "CUDA available" not in keys
    if gpus and amd:
        merge(facts, {"cuda_nccl": {"rocm": {"gpus": gpu_names(gpus)}}})
    elif gpus:
        nvidia["gpus"] = gpus
        nvidia["gpu_count"] = len(gpus)
    rocm: Rocm = {}
    if known(keys.get("ROCM Driver Version")):
        rocm["driver"] = known(keys.get("ROCM Driver Version"))
    if known(keys.get("HIPCC")) and keys["HIPCC"] != "Not Available":
        rocm["hipcc"] = known(keys.get("HIPCC"))
    if rocm:
        merge(facts, {"cuda_nccl": {"rocm": rocm}})
    if keys.get("CUDA Driver Version"):
        nvidia["driver"] = keys["CUDA Driver Version"]
    if nvidia:
        merge(facts, {"nvidia": nvidia})
    soft = keys.get("ulimit soft", "")
    if soft.isdigit():
        merge(facts, {"system": {"limits": {"nofile": {"soft": int(soft)}}}})
    python = keys.get("Python")
    if python:
        merge(facts, {"python_env": {"interpreter": {"version": python.split(" ")[0],
                                                     "build": python}}})
    return facts
