"""Which environment variables the agent records: the default prefixes and names, and the
one rule that selects by them (agent/env.py reads by it; the diff asks it whether a side
records a variable). Apart from env.py because the diff needs only this, not the process
reader, the secret detector and subprocess that env.py imports."""
from __future__ import annotations

TYPE_CHECKING = False   # typing's own, without its import: see runner.py
if TYPE_CHECKING:
    from typing import Tuple

    Selector = Tuple[Tuple[str, ...], Tuple[str, ...]]   # (prefixes, names)

DEFAULT_PREFIXES = (
    "NCCL_", "CUDA_", "TORCH_", "PYTORCH_", "NVIDIA_", "NVSHMEM_", "SGLANG_", "VLLM_", "OMP_",
    "MKL_", "UCX_", "FI_", "HF_", "TRANSFORMERS_", "TRITON_", "CUBLAS_", "CUDNN_", "GLOO_",
    "MASTER_",
)
DEFAULT_NAMES = (
    "LD_LIBRARY_PATH", "LD_PRELOAD", "PYTHONPATH", "PATH", "VIRTUAL_ENV", "CONDA_PREFIX",
    "PYTHONHASHSEED", "TOKENIZERS_PARALLELISM",
    "PYTHONNOUSERSITE", "PYTHONSAFEPATH",   # they change which customize file runs
    # set by torchrun and friends: they tell apart workers that share one command line
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
)

def is_selected(name: str, selector: Selector) -> bool:
    prefixes, names = selector
    return name in names or name.startswith(prefixes)
