"""The older layouts of torch's collect_env, as the script printed them over its history
(seen in public threads: torch-points3d/torch-points3d#66, torch 1.1: `Is debug build: No`,
no ROCm lines, `Python version: 3.6`; pytorch/pytorch#42887 and #44106, torch 1.7: the ROCm,
HIP and MIOpen lines, `(64-bit runtime)`, conda's columns; pytorch/pytorch#46973; a 4-GPU
paste of torch 1.7: the GPUs one a line under an empty value, then a blank line). The files
here are written in those layouts with values of our own; the torch 2.11 layout is the real
H200 recording (tests/data/h200/collect_env.txt)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from conftest import Cli

from envsnap.snapshot.store import Store

TORCH_1_1 = """Collecting environment information...
PyTorch version: 1.1.0
Is debug build: No
CUDA used to build PyTorch: 9.0.176

OS: Ubuntu 18.04.2 LTS
GCC version: (Ubuntu 7.4.0-1ubuntu1~18.04) 7.4.0
CMake version: version 3.10.2

Python version: 3.6
Is CUDA available: Yes
CUDA runtime version: 9.1.85
GPU models and configuration: GPU 0: GeForce GTX 1080
Nvidia driver version: 418.67
cuDNN version: Could not collect

Versions of relevant libraries:
[pip3] numpy==1.16.4
[pip3] torch==1.1.0
[pip3] torchvision==0.3.0
[conda] Could not collect
"""

TORCH_1_7_FOUR_GPUS = """Collecting environment information...
PyTorch version: 1.7.0
Is debug build: True
CUDA used to build PyTorch: 10.2
ROCM used to build PyTorch: N/A

OS: CentOS Linux 7 (Core) (x86_64)
GCC version: (GCC) 4.8.5 20150623 (Red Hat 4.8.5-44)
Clang version: Could not collect
CMake version: Could not collect

Python version: 3.8 (64-bit runtime)
Is CUDA available: True
CUDA runtime version: Could not collect
GPU models and configuration:
GPU 0: Tesla V100-SXM2-16GB
GPU 1: Tesla V100-SXM2-16GB
GPU 2: Tesla V100-SXM2-16GB
GPU 3: Tesla V100-SXM2-16GB

Nvidia driver version: 450.80.02
cuDNN version: /usr/lib/x86_64-linux-gnu/libcudnn.so.7.6.5
HIP runtime version: N/A
MIOpen runtime version: N/A

Versions of relevant libraries:
[pip3] numpy==1.19.2
[pip3] torch==1.7.0
[conda] blas                      1.0                         mkl
[conda] pytorch                   1.7.0           py3.8_cuda10.2.89_cudnn7.6.5_0    pytorch
""".replace("configuration:\n", "configuration: \n")   # the script's own trailing space

TORCH_1_7_ROCM = """Collecting environment information...
PyTorch version: 1.7.0a0+abcdef0
Is debug build: False
CUDA used to build PyTorch: N/A
ROCM used to build PyTorch: 3.7.20315-0123abcd

OS: Ubuntu 18.04.4 LTS (x86_64)
GCC version: (Ubuntu 7.5.0-3ubuntu1~18.04) 7.5.0
Clang version: 11.0.0
CMake version: version 3.14.0

Python version: 3.6 (64-bit runtime)
Is CUDA available: True
CUDA runtime version: N/A
GPU models and configuration: Device 66a1
Nvidia driver version: Could not collect
cuDNN version: N/A
HIP runtime version: 3.18.2
MIOpen runtime version: 2.6.0

Versions of relevant libraries:
[pip3] numpy==1.18.5
[pip3] torch==1.7.0a0+abcdef0
[conda] Could not collect
"""


def imported(cli: Cli, tmp_path: Path, text: str) -> dict[str, Any]:
    paste = tmp_path / "paste.txt"
    paste.write_text(text)
    result = cli("import", str(paste), "--label", "paste")
    assert result.returncode == 0, result.stderr
    return dict(Store(cli.env["ENVSNAP_STORE"]).load("paste"))


def test_torch_1_1_layout(cli: Cli, tmp_path: Path) -> None:
    document = imported(cli, tmp_path, TORCH_1_1)
    facts = document["facts"]
    assert facts["cuda_nccl"]["torch"] == {"version": "1.1.0", "cuda": "9.0.176",
                                           "debug": False}
    assert facts["cuda_nccl"]["cuda_toolkit"] == {"version": "9.1.85"}
    assert facts["nvidia"]["gpus"] == {"GPU0": {"index": 0, "name": "GeForce GTX 1080"}}
    assert facts["nvidia"]["driver"] == "418.67"
    assert facts["python_env"]["interpreter"] == {"version": "3.6"}
    assert facts["python_env"]["packages"] == {"numpy": "1.16.4", "torch": "1.1.0",
                                               "torchvision": "0.3.0"}
    assert "cudnn" not in facts["cuda_nccl"]         # "Could not collect": unknown
    assert document["meta"]["imported"]["sources"]["paste.txt"]["format"] == \
        "oldest (no ROCm, CPU or platform lines)"


def test_torch_1_7_with_four_gpus_one_a_line(cli: Cli, tmp_path: Path) -> None:
    facts = imported(cli, tmp_path, TORCH_1_7_FOUR_GPUS)["facts"]
    gpus = facts["nvidia"]["gpus"]
    assert list(gpus) == ["GPU0", "GPU1", "GPU2", "GPU3"]
    assert gpus["GPU3"] == {"index": 3, "name": "Tesla V100-SXM2-16GB"}
    assert facts["nvidia"]["gpu_count"] == 4 and facts["nvidia"]["driver"] == "450.80.02"
    assert facts["cuda_nccl"]["torch"]["debug"] is True
    assert "cuda_toolkit" not in facts["cuda_nccl"]
    assert facts["cuda_nccl"]["cudnn"]["libraries"] == {
        "/usr/lib/x86_64-linux-gnu/libcudnn.so.7.6.5": "7.6.5"}
    assert facts["system"]["os_release"] == {"PRETTY_NAME": "CentOS Linux 7 (Core)"}
    # conda's lines are read past, not taken for pip's
    assert facts["python_env"]["packages"] == {"numpy": "1.19.2", "torch": "1.7.0"}


def test_torch_1_7_rocm_build(cli: Cli, tmp_path: Path) -> None:
    facts = imported(cli, tmp_path, TORCH_1_7_ROCM)["facts"]
    assert facts["cuda_nccl"]["torch"] == {"version": "1.7.0a0+abcdef0",
                                           "hip": "3.7.20315-0123abcd", "debug": False}
    # an AMD GPU, named on a ROCm build's GPU line, is no NVIDIA GPU
    assert facts["cuda_nccl"]["rocm"]["gpus"] == {"GPU0": "Device 66a1"}
    assert facts["nvidia"] == {}

# ScaleLLM's copy of the script (scalellm/utils/collect_env.py, vectorch-ai/ScaleLLM #288): its
# `env_info_fmt` adds `ScaleLLM version:` first, `GPU topology: {nvidia_gpu_topo}` (the output
# of `nvidia-smi topo -mp`, stripped, so its header row starts on the key's line, tabs between
# the cells as nvidia-smi prints them) and `NCCL version: {nccl_version}` (torch's NCCL).
SCALELLM = """Collecting environment information...
ScaleLLM version: 0.2.0
PyTorch version: 2.4.0+cu121
Is debug build: False
CUDA used to build PyTorch: 12.1
ROCM used to build PyTorch: N/A

OS: Ubuntu 22.04.4 LTS (x86_64)
GCC version: (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0
Clang version: Could not collect
CMake version: version 3.29.0
Libc version: glibc-2.35

Python version: 3.11.9 (main, Apr  6 2024, 17:59:24) [GCC 11.4.0] (64-bit runtime)
Python platform: Linux-5.15.0-105-generic-x86_64-with-glibc2.35
Is CUDA available: True
CUDA runtime version: 12.1.105
CUDA_MODULE_LOADING set to: LAZY
GPU models and configuration:
GPU 0: NVIDIA L40S
GPU 1: NVIDIA L40S
GPU topology: GPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID
GPU0\t X \tSYS\t0-15\t0\t\tN/A
GPU1\tSYS\t X \t16-31\t1\t\tN/A

Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes
  PIX  = Connection traversing at most a single PCIe bridge
Nvidia driver version: 550.54.15
NCCL version: 2.20.5
cuDNN version: Could not collect
HIP runtime version: N/A
MIOpen runtime version: N/A
Is XNNPACK available: Yes

CPU:
Architecture:                         x86_64
CPU(s):                               32

Versions of relevant libraries:
[pip3] numpy==1.26.4
[pip3] torch==2.4.0
[conda] Could not collect
"""


def test_scalellm_copy_with_its_topology_and_nccl_lines(cli: Cli, tmp_path: Path) -> None:
    facts = imported(cli, tmp_path, SCALELLM)["facts"]
    assert facts["cuda_nccl"]["nccl"] == {"torch": {"version": "2.20.5"}}
    gpus = facts["nvidia"]["gpus"]
    assert gpus["GPU1"] == {"index": 1, "name": "NVIDIA L40S", "cpu_affinity": "16-31",
                            "numa_affinity": "1"}
    assert facts["nvidia"]["gpu_count"] == 2 and facts["nvidia"]["driver"] == "550.54.15"
    # -mp's cells are PCIe paths even between GPUs that NVLink joins: no link is claimed
    assert "topology" not in facts["nvidia"]
    assert facts["python_env"]["packages"] == {"numpy": "1.26.4", "torch": "2.4.0"}
    # read whole: no line of the matrix or its legend was passed over as breaking it
    result = cli("import", str(tmp_path / "paste.txt"), "--label", "again", "-v")
    assert result.returncode == 0 and "passed over" not in result.stderr, result.stderr
