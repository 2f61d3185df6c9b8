"""A snapshot as torch's `python -m torch.utils.collect_env` prints it (torch 2.x layout,
the one tests/data/h200/collect_env.txt recorded), for a maintainer who asks for it.

Same keys, order and blank lines; a fact the snapshot lacks is printed as the script prints
what it cannot read ("Could not collect" where it ran a command, "N/A" where it asked torch
or read a setting). What envsnap never records (the GCC, Clang and CMake that happen to be
on PATH, whether CUDA initialises, XNNPACK) is printed the same way, never guessed. The
libraries block lists the packages whose names hold one of the script's words (`[pip3]`),
as the script filters `pip list`; `imports/collect_env.py` reads all of it back."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

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
    return [f"OS: {os_text}", f"GCC version: {NOT_COLLECTED}",
            f"Clang version: {NOT_COLLECTED}", f"CMake version: {NOT_COLLECTED}",
            f"Libc version: {NA}"]


def platform(document: Snapshot) -> str:
    kernel = system(document).get("kernel", {})
    release, machine = kernel.get("release"), kernel.get("machine")
    return f"Linux-{release}-{machine}" if release and machine else NA


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


def cuda_lines(document: Snapshot) -> list[str]:
    interpreter = python_env(document).get("interpreter", {})
    build = interpreter.get("build") or interpreter.get("version")
    shell = env(document).get("shell", {})
    # the script prints an unset CUDA_MODULE_LOADING as nothing; N/A: the shell is unknown
    loading = NA if collector_error(document, "env") else shell.get("CUDA_MODULE_LOADING", "")
    toolkit = cuda_nccl(document).get("cuda_toolkit") or {}
    return [f"Python version: {build} (64-bit runtime)" if build else f"Python version: {NA}",
            f"Python platform: {platform(document)}",
            f"Is CUDA available: {NA}",
            f"CUDA runtime version: {text(toolkit.get('version'), NOT_COLLECTED)}",
            f"CUDA_MODULE_LOADING set to: {loading}",
            f"GPU models and configuration: {gpu_text(document)}",
            f"Nvidia driver version: {text(nvidia(document).get('driver'), NOT_COLLECTED)}",
            f"cuDNN version: {cudnn_text(document)}",
            f"Is XPU available: {NA}", f"HIP runtime version: {NA}",
            f"MIOpen runtime version: {NA}", f"Is XNNPACK available: {NA}",
            f"Caching allocator config: {text(shell.get('PYTORCH_CUDA_ALLOC_CONF'))}"]


def cpu_lines(document: Snapshot) -> list[str]:
    facts = system(document)
    cpu = facts.get("cpu", {})
    if not cpu:
        return ["CPU:", NOT_COLLECTED]
    fields: list[tuple[str, Any]] = [("Architecture", facts.get("kernel", {}).get("machine")),
                                     ("CPU(s)", cpu.get("logical_cpus")),
                                     ("On-line CPU(s) list", cpu.get("online")),
                                     ("Model name", cpu.get("model"))]
    threads, cores, sockets = cpu.get("logical_cpus"), cpu.get("physical_cores"), \
        cpu.get("sockets")
    if threads and cores:
        fields.append(("Thread(s) per core", threads // cores))
    if cores and sockets:
        fields.append(("Core(s) per socket", cores // sockets))
    fields.append(("Socket(s)", sockets))
    numa = facts.get("numa", {})
    if numa:
        fields.append(("NUMA node(s)", len(numa)))
        fields += [(f"NUMA node{node} CPU(s)", info.get("cpulist"))
                   for node, info in sorted(numa.items())]
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
