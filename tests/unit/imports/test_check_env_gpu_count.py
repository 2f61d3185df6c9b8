"""SGLang's check_env (python/sglang/check_env.py) prints `GPU i,j: name` for the devices
torch sees (`torch.cuda.device_count()`, narrowed by CUDA_VISIBLE_DEVICES) and, under
`NVIDIA Topology:`, `nvidia-smi topo -m`, whose header names every GPU of the host: the
count a capture records (NVML's). Written in its layout with values of our own."""
from __future__ import annotations

import pytest

from envsnap.imports import sglang

HEAD = """Python: 3.10.12 (main, Nov 20 2023, 15:14:05) [GCC 11.4.0]
CUDA available: True
GPU {visible}: NVIDIA H100 80GB HBM3
GPU {visible} Compute Capability: 9.0
CUDA_HOME: /usr/local/cuda
NVCC: Cuda compilation tools, release 12.4, V12.4.131
CUDA Driver Version: 550.90.07
PyTorch: 2.5.1+cu124
sglang: 0.4.0
flashinfer: 0.1.6+cu124torch2.4
triton: 3.1.0
"""
MATRIX = """NVIDIA Topology:
\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID
GPU0\t X \tNV18\tNV18\tNV18\t0-47\t0\t\tN/A
GPU1\tNV18\t X \tNV18\tNV18\t0-47\t0\t\tN/A
GPU2\tNV18\tNV18\t X \tNV18\t48-95\t1\t\tN/A
GPU3\tNV18\tNV18\tNV18\t X \t48-95\t1\t\tN/A

Legend:

  X    = Self
  NV#  = Connection traversing a bonded set of # NVLinks
"""


@pytest.mark.parametrize("visible", ["0", "0,1", "0,1,2,3"])
def test_the_matrix_header_counts_the_hosts_gpus(visible: str) -> None:
    facts = sglang.read(HEAD.format(visible=visible) + MATRIX, "paste.txt").facts
    assert facts["nvidia"]["gpu_count"] == 4
    named = {key for key, gpu in facts["nvidia"]["gpus"].items() if "name" in gpu}
    assert named == {f"GPU{k}" for k in visible.split(",")}


def test_rows_cut_below_the_header_leave_its_count() -> None:
    text = HEAD.format(visible="0") + "\n".join(MATRIX.splitlines()[:3])
    assert sglang.read(text, "paste.txt", cut=True).facts["nvidia"]["gpu_count"] == 4


def test_without_a_matrix_the_named_gpus_are_counted() -> None:
    facts = sglang.read(HEAD.format(visible="0,1"), "paste.txt").facts
    assert facts["nvidia"]["gpu_count"] == 2
