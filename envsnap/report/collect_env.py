"""A snapshot as torch's `python -m torch.utils.collect_env` prints it (torch 2.x layout,
the one tests/data/h200/collect_env.txt recorded), for a maintainer who asks for it.

Same keys, order and blank lines; a fact the snapshot lacks is printed as the script prints
what it cannot read ("Could not collect" where it ran a command, "N/A" where it asked torch
or read a setting). What only an imported torch knows (XNNPACK, XPU, the debug build of a
torch without version.py) is printed the same way, never guessed; docs/guide/reports.md lists
those lines and why. The CPU block is lscpu's, from the facts the agent read where lscpu reads
them (agent/lscpu.py). The libraries block lists the packages whose names hold one of the
script's words (`[pip3]`), as the script filters `pip list`; `imports/collect_env.py` reads
all of it back."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from envsnap.agent.lscpu import cpu_set
from envsnap.snapshot.document import (
    collector_error,
    cuda_nccl,
    env,
    nvidia,
    packages,
    python_env,
    system,
)

if TYPE_CHECKING:
    from envsnap.snapshot.records import Gpu, Snapshot

NOT_COLLECTED = "Could not collect"
NA = "N/A"
# the words torch's script keeps packages by (its get_pip_packages); the H200 recording's
# 31 [pip3] lines are exactly the packages of that host holding one
PIP_WORDS = ("torch", "numpy", "mypy", "flake8", "triton", "optree", "onnx", "nccl", "cudnn",
             "cublas", "cuda-runtime", "cusparse", "cufft", "curand", "cusolver",
             "nvjitlink", "nvtx", "cupti", "nvrtc")


def text(value: Any, missing: str = NA) -> str:
    if value is None or value == "":
        return missing
    return str(value)


def torch_lines(document: Snapshot) -> list[str]:
    torch = cuda_nccl(document).get("torch") or {}
    return [f"PyTorch version: {text(torch.get('version'))}",
            f"Is debug build: {text(torch.get('debug'))}",
            f"CUDA used to build PyTorch: {text(torch.get('cuda'))}",
            f"ROCM used to build PyTorch: {text(torch.get('hip'))}"]


def os_lines(document: Snapshot) -> list[str]:
    facts = system(document)
    name = facts.get("os_release", {}).get("PRETTY_NAME")
    machine = facts.get("kernel", {}).get("machine")
    os_text = f"{name} ({machine})" if name and machine else text(name, NOT_COLLECTED)
    tools = facts.get("toolchain", {})
    return [f"OS: {os_text}", f"GCC version: {text(tools.get('gcc'), NOT_COLLECTED)}",
            f"Clang version: {text(tools.get('clang'), NOT_COLLECTED)}",
            f"CMake version: {text(tools.get('cmake'), NOT_COLLECTED)}",
            f"Libc version: {text(tools.get('libc'))}"]


def platform(document: Snapshot) -> str:
    """platform.platform(): the kernel, then the libc it names when it is glibc."""
    facts = system(document)
    kernel = facts.get("kernel", {})
    release, machine = kernel.get("release"), kernel.get("machine")
    libc = facts.get("toolchain", {}).get("libc") or ""
    suffix = "-with-glibc" + libc[len("glibc-"):] if libc.startswith("glibc-") else ""
    return f"Linux-{release}-{machine}{suffix}" if release and machine else NA


def index_of(gpu: Gpu) -> int:
    index = gpu.get("index")
    return index if isinstance(index, int) else 0


def gpu_text(document: Snapshot) -> str:
    gpus = sorted(nvidia(document).get("gpus", {}).values(), key=index_of)
    lines = [f"GPU {gpu.get('index')}: {gpu.get('name')}" for gpu in gpus if gpu.get("name")]
    if not lines:
        return NOT_COLLECTED
    return lines[0] if len(lines) == 1 else "\n" + "\n".join(lines)


def cudnn_text(document: Snapshot) -> str:
    libraries = sorted(path for path in cuda_nccl(document).get("cudnn", {})
                       .get("libraries", {}) if path)
    if not libraries:
        return NOT_COLLECTED
    if len(libraries) == 1:
        return libraries[0]
    return "Probably one of the following:\n" + "\n".join(libraries)


def cuda_available(document: Snapshot) -> str:
    """torch.cuda.is_available() as the facts foretell it: a torch built with CUDA, a GPU
    NVML sees, and no CUDA_VISIBLE_DEVICES that hides them all (empty, or starting with an
    invalid index as "-1" does); N/A where torch or the GPUs are unknown."""
    torch = cuda_nccl(document).get("torch") or {}
    facts = nvidia(document)
    if not torch.get("version"):
        return NA
    if not torch.get("cuda"):
        return "False"
    visible = env(document).get("shell", {}).get("CUDA_VISIBLE_DEVICES")
    if visible is not None and not visible.split(",")[0].strip().isdigit() and \
            not visible.strip().startswith(("GPU-", "MIG-")):
        return "False"
    count = facts.get("gpu_count")
    if count is None and "present" not in facts:
        return NA
    return "True" if count or facts.get("gpus") else "False"


def cuda_lines(document: Snapshot) -> list[str]:
    interpreter = python_env(document).get("interpreter", {})
    build = interpreter.get("build") or interpreter.get("version")
    shell = env(document).get("shell", {})
    # the script prints an unset CUDA_MODULE_LOADING as nothing; N/A: the shell is unknown
    loading = NA if collector_error(document, "env") else shell.get("CUDA_MODULE_LOADING", "")
    toolkit = cuda_nccl(document).get("cuda_toolkit") or {}
    return [f"Python version: {build} (64-bit runtime)" if build else f"Python version: {NA}",
            f"Python platform: {platform(document)}",
            f"Is CUDA available: {cuda_available(document)}",
            f"CUDA runtime version: {text(toolkit.get('version'), NOT_COLLECTED)}",
            f"CUDA_MODULE_LOADING set to: {loading}",
            f"GPU models and configuration: {gpu_text(document)}",
            f"Nvidia driver version: {text(nvidia(document).get('driver'), NOT_COLLECTED)}",
            f"cuDNN version: {cudnn_text(document)}",
            f"Is XPU available: {NA}", f"HIP runtime version: {NA}",
            f"MIOpen runtime version: {NA}", f"Is XNNPACK available: {NA}",
            f"Caching allocator config: {text(shell.get('PYTORCH_CUDA_ALLOC_CONF'))}"]


def lscpu_list(text: str | None) -> str | None:
    """A kernel CPU list as lscpu prints it: a run of three or more as a range, of two as
    both ("0,1": the kernel's "0-1")."""
    cpus, parts = sorted(cpu_set(text)), []
    if not cpus:
        return text
    start = previous = cpus[0]
    for cpu in cpus[1:] + [-2]:
        if cpu == previous + 1:
            previous = cpu
            continue
        parts.append(str(start) if start == previous else
                     f"{start},{previous}" if previous == start + 1 else f"{start}-{previous}")
        start = previous = cpu
    return ",".join(parts)


def lscpu_vulnerability(word: str | None) -> str | None:
    """The kernel's "Mitigation: Retpolines; STIBP: disabled" as lscpu rewords it
    ("Mitigation; Retpolines; STIBP disabled"); other words as the kernel wrote them."""
    if word is None or not word.startswith("Mitigation: "):
        return word
    return "Mitigation; " + word[len("Mitigation: "):].replace(":", "")


def cpu_lines(document: Snapshot) -> list[str]:
    facts = system(document)
    cpu = facts.get("cpu", {})
    if not cpu:
        return ["CPU:", NOT_COLLECTED]
    threads, cores, sockets = cpu.get("logical_cpus"), cpu.get("physical_cores"), \
        cpu.get("sockets")
    fields: list[tuple[str, Any]] = [
        ("Architecture", facts.get("kernel", {}).get("machine")),
        ("CPU op-mode(s)", cpu.get("op_modes")), ("Address sizes", cpu.get("address_sizes")),
        ("Byte Order", cpu.get("byte_order")), ("CPU(s)", threads),
        ("On-line CPU(s) list", lscpu_list(cpu.get("online"))),
        ("Vendor ID", cpu.get("vendor_id")), ("Model name", cpu.get("model")),
        ("CPU family", cpu.get("family")), ("Model", cpu.get("model_id")),
        ("Thread(s) per core", threads // cores if threads and cores else None),
        ("Core(s) per socket", cores // sockets if cores and sockets else None),
        ("Socket(s)", sockets), ("Stepping", cpu.get("stepping")),
        ("BogoMIPS", document.get("volatile", {}).get("system", {}).get("bogomips")),
        ("Flags", cpu.get("flags"))]
    fields += [(f"{name} cache", size) for name, size in sorted(cpu.get("caches", {}).items())]
    numa = facts.get("numa", {})
    if numa:
        fields.append(("NUMA node(s)", len(numa)))
        fields += [(f"NUMA node{node} CPU(s)", lscpu_list(info.get("cpulist")))
                   for node, info in sorted(numa.items(), key=lambda item: int(item[0])
                                            if item[0].isdigit() else -1)]
    fields += [(f"Vulnerability {name}", lscpu_vulnerability(word))
               for name, word in sorted(cpu.get("vulnerabilities", {}).items())]
    return ["CPU:"] + [f"{name + ':':<41}{value}" for name, value in fields if value is not None]


def library_lines(document: Snapshot) -> list[str]:
    kept = [f"[pip3] {name}=={version}" for name, version in sorted(packages(document).items())
            if version and any(word in name for word in PIP_WORDS)]
    return ["Versions of relevant libraries:"] + (kept or [f"[pip3] {NOT_COLLECTED}"]) + \
        [f"[conda] {NOT_COLLECTED}"]


def collect_env_text(document: Snapshot) -> str:
    blocks = [["Collecting environment information..."] + torch_lines(document),
              os_lines(document), cuda_lines(document), cpu_lines(document),
              library_lines(document)]
    return "\n\n".join("\n".join(block) for block in blocks) + "\n"
