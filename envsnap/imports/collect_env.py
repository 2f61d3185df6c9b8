"""torch's `python -m torch.utils.collect_env` output -> facts.

The layout, as the script's history and the outputs pasted in public issue threads show it
(pytorch/pytorch #42887 and #44106, 2020: `ROCM used to build`, `HIP runtime`, `MIOpen`
added; #46973, torch 1.7; torch-points3d #66, torch 1.1: `Is debug build: No`, a CUDA
build version of three parts; the H200 recording in tests/data/h200, torch 2.11):

    Collecting environment information...      (the script's own first line)
    Key: value                                  one fact a line, blank lines between groups
    GPU models and configuration: GPU 0: X      one GPU on the line, or none on it and
    GPU 0: X / GPU 1: Y                         one a line below it (several GPUs)
    cuDNN version: /path/libcudnn.so.9          one library, or `Probably one of the
    /path/libcudnn_adv.so.9                     following:` and a path a line
    CPU:                                        lscpu's output, up to a blank line (2.x)
    Versions of relevant libraries:             `[pip3] name==version`, `[conda] ...`: the
                                                last block (older ones say `[pip]`)

Copies of the script keep its layout and add lines: ScaleLLM's (scalellm/utils/collect_env.py,
vectorch-ai/ScaleLLM #288) puts `ScaleLLM version:` first, `GPU topology:` with the output of
`nvidia-smi topo -mp` starting on the key's own line (its header) and its legend below, and
`NCCL version:` (`torch.cuda.nccl.version()`, the NCCL torch loads) under the driver line.

Keys a release added (`Is XPU available`, `Caching allocator config`, `Python platform`) or
dropped are read where present; a key this reader does not know is passed over (a later
release adds some), but a line that is no `Key: value` where one must be is an error: the
file is something else, or two things pasted together. "N/A", "None" and "Could not
collect" are the script's words for a fact it could not read: unknown here, never a value.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from envsnap.imports import topology
from envsnap.imports.reading import Reading, Unreadable, merge, nested, quoted

if TYPE_CHECKING:
    from envsnap.snapshot.records import Cpu, CudaNccl, Facts, Gpu, NumaNode, System, VersionSource

FIRST_LINE = "Collecting environment information..."
# what the script prints while it collects, before the report: vLLM's, run in a uv venv
PREAMBLE = {"uv is set"}
LIBRARIES = "Versions of relevant libraries:"
UNREAD = {"", "N/A", "None", "Could not collect", "No CUDA"}
KEY_VALUE = re.compile(r"([A-Za-z][A-Za-z0-9_ ()/.,'-]*?):(?: (.*)|)$")
LIBRARY_LINE = re.compile(r"\[(\w+)\] (.+)$")
GPU_LINE = re.compile(r"GPU (\d+): (.+)$")
# the machines Python names (platform.machine()): in the OS line and the platform's
MACHINES = "x86_64|aarch64|arm64|ppc64le|s390x|i686|armv7l|riscv64|AMD64"
PLATFORM = re.compile(rf"Linux-(.+)-({MACHINES})(?:-with-.*)?$")

# key -> the envsnap field it fills, for the plain one-line facts
FIELDS = {
    "PyTorch version": "cuda_nccl.torch.version",
    "CUDA used to build PyTorch": "cuda_nccl.torch.cuda",
    "ROCM used to build PyTorch": "cuda_nccl.torch.hip",
    "CUDA runtime version": "cuda_nccl.cuda_toolkit.version",   # the script runs nvcc
    "Nvidia driver version": "nvidia.driver",
    "HIP runtime version": "cuda_nccl.rocm.hip_runtime",
    "MIOpen runtime version": "cuda_nccl.rocm.miopen",
    "NCCL version": "cuda_nccl.nccl.torch.version",      # ScaleLLM's copy: torch's NCCL
}
LSCPU = {"Model name": "model", "CPU(s)": "logical_cpus", "Socket(s)": "sockets",
         "On-line CPU(s) list": "online"}


def known(value: str | None) -> str | None:
    value = (value or "").strip()
    return None if value in UNREAD else value


def versioned(value: str | None) -> str | None:
    """A version as the value states it, without what a project's copy of the script puts
    after it in parentheses (DocTR's `1.8.0 (torchvision: 0.9.0)`)."""
    value = known(value)
    return value.split(" (", 1)[0] if value and re.match(r"\d", value) else value


def canonical(name: str) -> str:
    """PEP 503, as the agent keys packages (agent/python_env.normalise_name)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def start_of(lines: list[str]) -> int | None:
    """Where the output starts: its first line, after what a launcher logged before it
    (vLLM's `INFO ... Automatically detected platform cuda.`, a RuntimeWarning)."""
    for number, line in enumerate(lines[:60]):
        if line.rstrip() == FIRST_LINE or line.startswith("PyTorch version:"):
            return number
    return None


def looks_like(text: str) -> bool:
    return start_of(text[:8000].splitlines()) is not None


# What may follow the libraries: a reader of a longer layout (vllm.py) reads it; torch's
# own output ends with them, so there anything after them is a second thing pasted.
Tail = Callable[[list[str], int, str, "Facts", dict[str, str]], None]


def read(text: str, source: str, cut: bool = False) -> Reading:
    """`cut`: the paste stops short (a comment's end, a copy cut off); what it holds is
    read and nothing is claimed of what it lacks."""
    lines = text.splitlines()
    facts, keys = read_lines(lines, source, None)
    return reading_of(lines, source, facts, keys, cut=cut)


def read_lines(lines: list[str], source: str, tail: Tail | None
               ) -> tuple[Facts, dict[str, str]]:
    facts: Facts = {}
    keys: dict[str, str] = {}
    at = start_of(lines) or 0
    while at < len(lines):
        at = read_line(lines, at, source, facts, keys)
        if LIBRARIES[:-1] in keys and at < len(lines):
            if tail is None:
                raise Unreadable(source, at + 1, f"cannot read {quoted(lines[at])} after the "
                                 "libraries, where a collect_env output ends")
            tail(lines, at, source, facts, keys)
            break
    return facts, keys


def reading_of(lines: list[str], source: str, facts: Facts, keys: dict[str, str],
               tool: str = "torch collect_env", version: str | None = None,
               cut: bool = False) -> Reading:
    if "PyTorch version" not in keys:
        raise Unreadable(source, 1, "not a collect_env output: no 'PyTorch version:' line")
    if LIBRARIES[:-1] not in keys and not cut:
        raise Unreadable(source, len(lines), f"truncated collect_env output: it ends before "
                         f"{LIBRARIES!r}, at {quoted(lines[-1] if lines else '')}")
    for key, path in FIELDS.items():
        if known(keys.get(key)) is not None:
            merge(facts, nested(path, versioned(keys[key])))
    merge(facts, build_facts(keys))
    if known(keys.get("ROCM used to build PyTorch")) and \
            not known(keys.get("CUDA used to build PyTorch")):
        amd_gpus(facts)
    return Reading(tool, variant(keys), facts, version or known(keys["PyTorch version"]))


CUT_SHORT = "truncated"    # how a reader's error begins where the text stops too soon


def variant(keys: dict[str, str]) -> str:
    """Which layout: the blocks and lines each era has (2.x added the CPU block)."""
    marks = [name for name, key in (("CPU block", "CPU"), ("Python platform", "Python platform"),
                                     ("XPU line", "Is XPU available"),
                                     ("ROCm lines", "ROCM used to build PyTorch"))
             if key in keys]
    return ", ".join(marks) or "oldest (no ROCm, CPU or platform lines)"


def read_line(lines: list[str], at: int, source: str, facts: Facts,
              keys: dict[str, str]) -> int:
    """Read the line at `at` (and a block it opens); the index of the next line to read."""
    line = lines[at].rstrip()
    if not line or line == FIRST_LINE or line.strip() in PREAMBLE:
        return at + 1
    match = KEY_VALUE.match(line)
    if not match:
        raise Unreadable(source, at + 1, f"cannot read {quoted(line)} as a collect_env "
                         "line ('Key: value')")
    key, value = match.group(1), match.group(2) or ""
    keys[key] = value
    if key == "GPU models and configuration":
        return read_gpus(lines, at, value, facts)
    if key == "cuDNN version":
        return read_cudnn(lines, at, value, facts)
    if key == "GPU topology":
        return read_pci_topology(lines, at, value, source, facts)
    if key == "CPU" and not value:
        return read_cpu(lines, at + 1, facts)
    if key == LIBRARIES[:-1]:
        return read_libraries(lines, at + 1, source, facts)
    return at + 1


def read_gpus(lines: list[str], at: int, value: str, facts: Facts) -> int:
    found: list[str] = [value] if known(value) else []
    at += 1
    while at < len(lines) and GPU_LINE.match(lines[at].strip()):
        found.append(lines[at].strip())
        at += 1
    gpus: dict[str, Gpu] = {}
    for number, text in enumerate(found):
        match = GPU_LINE.match(text)
        index = int(match.group(1)) if match else number
        name = match.group(2) if match else text
        # no bus id in this output: keyed by the topo matrix's name, re-keyed where a
        # nvidia-smi file of the same host gives the bus (build.py)
        gpus[f"GPU{index}"] = {"index": index, "name": name.split(" (UUID:")[0].strip()}
    if gpus:
        merge(facts, {"nvidia": {"gpus": gpus, "gpu_count": len(gpus)}})
    return at


def read_pci_topology(lines: list[str], at: int, value: str, source: str,
                      facts: Facts) -> int:
    """ScaleLLM's `GPU topology: ` and `nvidia-smi topo -mp` after it, the matrix's header on
    the key's line, then its rows and legend: each GPU's CPU and NUMA affinity. Its links are
    PCIe paths only (-mp): a pair joined by NVLink shows its PCIe path there, so they are
    not kept as the GPUs' links. The index of the line after the legend."""
    if not topology.is_header(value):
        return at + 1                # `N/A`, `Could not collect`: nothing stated
    block = [value] + lines[at + 1:]   # block[k] is lines[at + k]
    matrix = topology.read_smi(block, 0)
    if matrix.broken:
        row = at + matrix.broken[0]
        raise Unreadable(source, row + 1, f"cannot read {quoted(lines[row])} as a row of the "
                         "topology matrix: its cells do not fit the header")
    merge(facts, topology.matrix_facts(topology.Matrix(affinity=matrix.affinity)))
    return at + matrix.end


def amd_gpus(facts: Facts) -> None:
    """A ROCm build names AMD GPUs on the GPU line (`AMD Instinct MI100 (gfx908:...)`):
    they are no NVIDIA GPUs, so they move to cuda_nccl.rocm."""
    nvidia = facts.get("nvidia", {})
    gpus = nvidia.pop("gpus", {})
    nvidia.pop("gpu_count", None)
    if not nvidia:
        facts.pop("nvidia", None)
    names = gpu_names(gpus)
    if names:
        merge(facts, {"cuda_nccl": {"rocm": {"gpus": names}}})


def gpu_names(gpus: dict[str, Gpu]) -> dict[str, str | None]:
    """GPU0 -> the name a report gives it (for cuda_nccl.rocm.gpus)."""
    names: dict[str, str | None] = {}
    for key, gpu in gpus.items():
        name = gpu.get("name")
        if isinstance(name, str):
            names[key] = name
    return names


def library_version(path: str) -> str | None:
    match = re.search(r"\.so\.(\d+(?:\.\d+)*)$", path)
    return match.group(1) if match else None


def read_cudnn(lines: list[str], at: int, value: str, facts: Facts) -> int:
    paths = [value] if value.startswith("/") else []
    at += 1
    if value.startswith("Probably one of the following"):
        while at < len(lines) and lines[at].startswith("/"):
            paths.append(lines[at].strip())
            at += 1
    libraries = {path: library_version(path) for path in paths}
    if not paths and known(value):
        libraries = {"": known(value)}     # a bare version, as some releases print it
    if libraries:
        merge(facts, {"cuda_nccl": {"cudnn": {"libraries": libraries}}})
    return at


def read_cpu(lines: list[str], at: int, facts: Facts) -> int:
    """lscpu's `Name: value` lines up to the next blank line (Windows prints others)."""
    fields: dict[str, str] = {}
    while at < len(lines) and lines[at].strip():
        name, _, value = lines[at].partition(":")
        fields[name.strip()] = value.strip()
        at += 1
    cpu: dict[str, int | str] = {}
    for name, key in LSCPU.items():
        if name in fields:
            value = fields[name]
            cpu[key] = int(value) if value.isdigit() else value
    cores, sockets = fields.get("Core(s) per socket", ""), fields.get("Socket(s)", "")
    if cores.isdigit() and sockets.isdigit():
        cpu["physical_cores"] = int(cores) * int(sockets)
    numa: dict[str, NumaNode] = {m.group(1): {"cpulist": value} for name, value in fields.items()
                                 if (m := re.fullmatch(r"NUMA node(\d+) CPU\(s\)", name))}
    system: System = {"cpu": cast("Cpu", cpu)}     # LSCPU names Cpu's fields
    if numa:
        system["numa"] = numa
    merge(facts, {"system": system})
    return at


def read_libraries(lines: list[str], at: int, source: str, facts: Facts) -> int:
    """The `[pip3] ...` lines; the index of the first line after them."""
    packages: dict[str, str | None] = {}
    end = len(lines)
    for number in range(at, len(lines)):
        line = lines[number].rstrip()
        if not line:
            continue
        match = LIBRARY_LINE.match(line)
        if not match:
            end = number
            break
        manager, rest = match.groups()
        if manager.startswith("pip") and "==" in rest:
            name, _, version = rest.partition("==")
            packages[canonical(name.strip())] = version.strip()
    merge(facts, package_facts(packages))
    return end


def package_facts(packages: dict[str, str | None]) -> Facts:
    """Packages, and the NVIDIA wheels among them where cuda_nccl has their place."""
    cuda: CudaNccl = {}
    wheels = {name: v for name, v in packages.items() if name.startswith("nvidia-")}
    if wheels:
        cuda["nvidia_wheels"] = wheels
    nccl: dict[str, VersionSource] = {n: {"version": v} for n, v in wheels.items()
                                      if n.startswith("nvidia-nccl")}
    if nccl:
        cuda["nccl"] = {"wheels": nccl}
    cudnn: dict[str, VersionSource] = {n: {"version": v} for n, v in wheels.items()
                                       if n.startswith("nvidia-cudnn")}
    if cudnn:
        cuda["cudnn"] = {"wheels": cudnn}
    facts: Facts = {"python_env": {"packages": packages}} if packages else {}
    if cuda:
        facts["cuda_nccl"] = cuda
    return facts


def build_facts(keys: dict[str, str]) -> Facts:
    facts: Facts = {}
    debug = keys.get("Is debug build", "")
    if debug in ("True", "False", "Yes", "No"):
        merge(facts, nested("cuda_nccl.torch.debug", debug in ("True", "Yes")))
    os_line = known(keys.get("OS"))
    if os_line:
        # `Ubuntu 22.04.4 LTS (x86_64)`: the machine, where it is one (RHEL's `(Maipo)` and
        # CentOS's `(Core)` are the release's own name)
        match = re.fullmatch(rf"(.+?) \(({MACHINES})\)", os_line)
        # Windows: `Microsoft Windows 11 Enterprise (10.0.22631 64-bit)`, the build in it
        windows = re.fullmatch(r"(Microsoft Windows.*?) \(([\d.]+) (\d+)-bit\)", os_line)
        merge(facts, nested("system.os_release.PRETTY_NAME",
                            match.group(1) if match else windows.group(1) if windows
                            else os_line))
        if match:
            merge(facts, nested("system.kernel.machine", match.group(2)))
    python = known(keys.get("Python version"))
    if python:
        build = re.sub(r" \(\d+-bit runtime\)$", "", python)
        merge(facts, {"python_env": {"interpreter": {"version": build.split(" ")[0],
                                                     **({"build": build} if " " in build
                                                        else {})}}})
    platform = PLATFORM.match(keys.get("Python platform", ""))
    if platform:
        merge(facts, nested("system.kernel.release", platform.group(1)))
    return facts
