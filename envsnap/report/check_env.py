"""A snapshot as SGLang's `python3 -m sglang.check_env` prints it (sglang/check_env.py:
`key: value` lines in its order, GPUs of one name grouped by index, then the packages it
names, nvidia-smi's topology, the open-files limit), for a maintainer who asks for it.

What a snapshot lacks is printed as the script prints what it cannot read: "Module Not
Found" for a package, "Not Available" for NVCC and the driver, None for CUDA_HOME; a
topology it does not hold is left out, as the script leaves it out when nvidia-smi fails.
The topology is the GPUs' part of the matrix (links and affinity); the NICs' rows are not
kept in a snapshot by their matrix names. `imports/sglang.py` reads all of it back."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from envsnap.report.collect_env import index_of
from envsnap.snapshot.document import cuda_nccl, env, nvidia, packages, python_env, system

if TYPE_CHECKING:
    from envsnap.snapshot.records import Gpu, Snapshot

NOT_FOUND = "Module Not Found"
NOT_AVAILABLE = "Not Available"
# the distributions the script names, in its order (SGLang 0.5)
PACKAGES = ("sglang", "sgl_kernel", "flashinfer_python", "flashinfer_cubin",
            "flashinfer_jit_cache", "triton", "transformers", "torchao", "numpy", "aiohttp",
            "fastapi", "hf_transfer", "huggingface_hub", "interegular", "modelscope",
            "orjson", "outlines", "packaging", "psutil", "pydantic", "python-multipart",
            "pyzmq", "uvicorn", "uvloop", "vllm", "xgrammar", "openai", "tiktoken",
            "anthropic", "litellm", "decord2")
LEGEND = """Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
"""   # noqa: E501 (nvidia-smi's own lines)


def ordered_gpus(document: Snapshot) -> list[tuple[str, Gpu]]:
    return sorted(nvidia(document).get("gpus", {}).items(), key=lambda item: index_of(item[1]))


def gpu_lines(document: Snapshot) -> list[str]:
    by_name: dict[str, list[str]] = {}
    capability: dict[str, Any] = {}
    for _, gpu in ordered_gpus(document):
        name = gpu.get("name")
        if isinstance(name, str):
            by_name.setdefault(name, []).append(str(index_of(gpu)))
            capability.setdefault(name, gpu.get("compute_capability"))
    lines = [f"GPU {','.join(ids)}: {name}" for name, ids in by_name.items()]
    lines += [f"GPU {','.join(ids)} Compute Capability: {capability[name]}"
              for name, ids in by_name.items() if capability[name]]
    return lines


def cuda_lines(document: Snapshot) -> list[str]:
    toolkit = cuda_nccl(document).get("cuda_toolkit") or {}
    version = toolkit.get("version")
    source = str(toolkit.get("source") or "")
    home = env(document).get("shell", {}).get("CUDA_HOME") or \
        (source.split("/bin/nvcc")[0] if "/bin/nvcc" in source else None)
    release = ".".join(str(version).split(".")[:2]) if version else None
    nvcc = f"Cuda compilation tools, release {release}, V{version}" if version \
        else NOT_AVAILABLE
    return [f"CUDA_HOME: {home}", f"NVCC: {nvcc}",
            f"CUDA Driver Version: {nvidia(document).get('driver') or NOT_AVAILABLE}"]


def topology_lines(document: Snapshot) -> list[str]:
    gpus = ordered_gpus(document)
    if not gpus or not any(gpu.get("cpu_affinity") for _, gpu in gpus):
        return []
    names = {bus: f"GPU{index_of(gpu)}" for bus, gpu in gpus}
    links = nvidia(document).get("topology", {})
    header = "\t" + "\t".join(names.values()) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"
    rows = []
    for bus, gpu in gpus:
        cells = [" X " if peer == bus else str(links.get(bus, {}).get(peer) or "SYS")
                 for peer in names]
        numa = gpu.get("numa_node")
        rows.append("\t".join([names[bus], *cells, str(gpu.get("cpu_affinity") or ""),
                               str(gpu.get("numa_affinity") or ""), "",
                               str(numa) if isinstance(numa, int) else "N/A"]))
    return ["NVIDIA Topology: ", header, *rows, "", LEGEND]


def check_env_text(document: Snapshot) -> str:
    interpreter = python_env(document).get("interpreter", {})
    torch = cuda_nccl(document).get("torch") or {}
    gpus = gpu_lines(document)
    installed = {name: version for name, version in packages(document).items() if version}
    lines = [f"Python: {interpreter.get('build') or interpreter.get('version') or 'N/A'}",
             f"CUDA available: {bool(gpus) if gpus or nvidia(document) else 'N/A'}",
             *gpus, *(cuda_lines(document) if gpus else []),
             f"PyTorch: {torch.get('version') or 'N/A'}"]
    lines += [f"{name}: {installed.get(name.replace('_', '-'), NOT_FOUND)}"
              for name in PACKAGES]
    lines += topology_lines(document)
    soft = system(document).get("limits", {}).get("nofile", {}).get("soft")
    if soft is not None:
        lines.append(f"ulimit soft: {soft}")
    return "\n".join(lines) + "\n"
