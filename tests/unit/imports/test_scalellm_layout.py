"""ScaleLLM's copy of torch's collect_env, read by the reader of torch's layout: its
`env_info_fmt` (scalellm/utils/collect_env.py) filled line for line, the `GPU topology:`
value being `nvidia-smi topo -mp` as `run_and_read_all` gives it (stripped: the header row
starts on the key's line), in the copy styles a terminal gives it (tabs, runs of spaces)."""
from __future__ import annotations

import pytest

from envsnap.imports import collect_env
from envsnap.imports.reading import Unreadable

FORMAT = """Collecting environment information...
ScaleLLM version: {scalellm_version}
PyTorch version: 2.3.1+cu121
Is debug build: False
CUDA used to build PyTorch: 12.1
ROCM used to build PyTorch: N/A

OS: Ubuntu 22.04.4 LTS (x86_64)
Python version: 3.10.14 (64-bit runtime)
Is CUDA available: True
CUDA runtime version: 12.1.105
GPU models and configuration: {gpus}
GPU topology: {topology}
Nvidia driver version: 535.161.08
NCCL version: {nccl}
cuDNN version: Could not collect

Versions of relevant libraries:
[pip3] torch==2.3.1
"""
MATRIX = ("GPU0\tGPU1\tGPU2\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
          "GPU0\t X \tPIX\tSYS\t0-11\t0\t\tN/A\n"
          "GPU1\tPIX\t X \tSYS\t0-11\t0\t\tN/A\n"
          "GPU2\tSYS\tSYS\t X \t12-23\t1\t\tN/A\n\n"
          "Legend:\n\n  X    = Self\n  SYS  = Connection traversing PCIe as well as the SMP "
          "interconnect between NUMA nodes (e.g., QPI/UPI)\n  PIX  = Connection traversing at "
          "most a single PCIe bridge")
THREE = "\nGPU 0: Tesla T4\nGPU 1: Tesla T4\nGPU 2: Tesla T4\n"


def report(topology: str = MATRIX, nccl: str = "2.20.5") -> str:
    return FORMAT.format(scalellm_version="0.1.8", gpus=THREE, topology=topology, nccl=nccl)


@pytest.mark.parametrize("copy", ["tabs", "spaces"])
def test_each_gpus_affinity_and_torchs_nccl(copy: str) -> None:
    text = report() if copy == "tabs" else report().replace("\t", "    ")
    facts = collect_env.read(text, "paste.txt").facts
    gpus = facts["nvidia"]["gpus"]
    assert [gpus[f"GPU{k}"].get("cpu_affinity") for k in range(3)] == ["0-11", "0-11", "12-23"]
    assert gpus["GPU2"] == {"index": 2, "name": "Tesla T4", "cpu_affinity": "12-23",
                            "numa_affinity": "1"}
    assert facts["nvidia"]["gpu_count"] == 3 and "topology" not in facts["nvidia"]
    assert facts["cuda_nccl"]["nccl"] == {"torch": {"version": "2.20.5"}}
    assert facts["nvidia"]["driver"] == "535.161.08"


@pytest.mark.parametrize("unknown", ["N/A", "Could not collect", "No CUDA"])
def test_a_topology_or_nccl_the_script_could_not_read_is_unknown(unknown: str) -> None:
    facts = collect_env.read(report(topology=unknown, nccl=unknown), "paste.txt").facts
    assert "nccl" not in facts.get("cuda_nccl", {})
    assert all("cpu_affinity" not in gpu for gpu in facts["nvidia"]["gpus"].values())


def test_a_matrix_row_that_does_not_fit_its_header_is_named_by_its_line() -> None:
    text = report(topology=MATRIX.replace("GPU1\tPIX\t X \tSYS", "GPU1\tPIX"))
    with pytest.raises(Unreadable) as raised:
        collect_env.read(text, "paste.txt")
    assert raised.value.line == text.splitlines().index("GPU1\tPIX\t0-11\t0\t\tN/A") + 1
