"""The STORY host's python, CUDA/NCCL stack and environment, for snapshots.py.

The NCCL tuning lives in sitecustomize.py (docs/STORY.md), so it is in os.environ of every
python process that starts: the agent itself (its "shell" env), and the sglang workers that
the server spawns after its own sitecustomize ran. The server process was exec'd from a login
shell without them, so its /proc environ lacks them, exactly as a real capture would show.
"""
from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from envsnap.agent import env as agent_env
from envsnap.agent import envnames
from envsnap.agent.cuda_nccl import library_source
from envsnap.demo.story_code import NCCL_TUNING, REPO, SITE, VENV, VENV_PYTHON, made_up_hex

if TYPE_CHECKING:
    from envsnap.snapshot.records import (
        CudaNccl,
        CustomizeFile,
        Env,
        Process,
        PythonEnv,
        VersionSource,
    )

NVIDIA_WHEELS = {
    "nvidia-cublas-cu12": "12.8.4.1", "nvidia-cuda-cupti-cu12": "12.8.90",
    "nvidia-cuda-nvrtc-cu12": "12.8.93", "nvidia-cuda-runtime-cu12": "12.8.90",
    "nvidia-cudnn-cu12": "9.10.2.21", "nvidia-cufft-cu12": "11.3.3.83",
    "nvidia-cufile-cu12": "1.13.1.3", "nvidia-curand-cu12": "10.3.9.90",
    "nvidia-cusolver-cu12": "11.7.3.90", "nvidia-cusparse-cu12": "12.5.8.93",
    "nvidia-cusparselt-cu12": "0.7.1", "nvidia-ml-py": "13.590.44",
    "nvidia-nccl-cu12": "2.27.5", "nvidia-nvjitlink-cu12": "12.8.93",
    "nvidia-nvshmem-cu12": "3.3.20", "nvidia-nvtx-cu12": "12.8.90",
}
PACKAGES = {
    "accelerate": "1.12.0", "aiohttp": "3.13.2", "anthropic": "0.75.0", "blobfile": "3.1.0",
    "build": "1.3.0", "compressed-tensors": "0.12.2", "cuda-python": "12.9.4",
    "datasets": "4.4.1", "einops": "0.8.1", "fastapi": "0.123.0", "flashinfer-cubin": "0.5.3",
    "flashinfer-python": "0.5.3", "gguf": "0.17.1", "hf-transfer": "0.1.9",
    "huggingface-hub": "0.36.0", "interegular": "0.3.3", "jinja2": "3.1.6",
    "llguidance": "0.7.30", "modelscope": "1.32.0", "msgspec": "0.19.0", "ninja": "1.13.0",
    "numpy": "2.3.5", "openai": "2.8.1", "orjson": "3.11.4", "outlines": "0.1.11",
    "packaging": "25.0", "partial-json-parser": "0.2.1.1.post6", "pillow": "12.0.0",
    "pip": "25.3", "prometheus-client": "0.23.1", "psutil": "7.1.3", "pybase64": "1.4.2",
    "pydantic": "2.12.5", "python-multipart": "0.0.20", "pyyaml": "6.0.3", "pyzmq": "27.1.0",
    "requests": "2.32.5", "safetensors": "0.7.0", "scipy": "1.16.3",
    "sentencepiece": "0.2.1", "setproctitle": "1.3.7", "setuptools": "80.9.0",
    "sgl-kernel": "0.3.17", "sglang": "0.5.6", "soundfile": "0.13.1", "tiktoken": "0.12.0",
    "timm": "1.0.22", "tokenizers": "0.22.1", "torch": "2.10.0+cu128",
    "torch-memory-saver": "0.0.9", "torchao": "0.14.1", "torchaudio": "2.10.0+cu128",
    "torchvision": "0.25.0+cu128", "tqdm": "4.67.1", "transformers": "4.57.1",
    "triton": "3.6.0", "uvicorn": "0.38.0", "uvloop": "0.22.1", "wheel": "0.45.1",
    "xgrammar": "0.1.27", **NVIDIA_WHEELS,
}
SITECUSTOMIZE = """# NCCL tuned for 8x RTX PRO 6000 over PCIe (no NVLink).
# Set here so that every python process, and every worker it spawns, gets it.
import os

""" + "".join(f'os.environ.setdefault("{name}", "{value}")\n'
              for name, value in NCCL_TUNING.items())
DISTUTILS_PTH = ("import os; var = 'SETUPTOOLS_USE_DISTUTILS'; enabled = os.environ.get(var, "
                 "'local') == 'local'; enabled and __import__('_distutils_hack').add_shim();")


# ---- python -------------------------------------------------------------------------------

def customize() -> dict[str, CustomizeFile | None]:
    data = SITECUSTOMIZE.encode("utf-8")
    return {"sitecustomize": {"content": SITECUSTOMIZE, "imported": True,
                              "path": f"{SITE}/sitecustomize.py", "redacted": False,
                              "sha256": hashlib.sha256(data).hexdigest(), "size": len(data),
                              "truncated": False},
            "usercustomize": None}


def python_env_facts() -> PythonEnv:
    return {
        "customize": customize(), "customize_shadowed": {}, "direct_urls": {},
        "editable": {"sglang": f"{REPO}/python"},
        "interpreter": {"base_prefix": "/usr",
                        "build": "3.11.2 (main, Apr 28 2025, 14:11:48) [GCC 12.2.0]",
                        "executable": VENV_PYTHON, "executable_real": "/usr/bin/python3.11",
                        "flags": {"ignore_environment": False, "isolated": False,
                                  "no_site": False, "no_user_site": False},
                        "implementation": "cpython", "prefix": VENV, "venv": True,
                        "version": "3.11.2"},
        "packages": dict(sorted(PACKAGES.items())), "shadowed": {}, "site_dirs": [SITE],
        "outside_site": [],
        "user_site": {"enabled": False, "path": "/root/.local/lib/python3.11/site-packages"},
        "startup_pth": {f"{SITE}/distutils-precedence.pth": {
            "code_lines": [DISTUTILS_PTH],
            "sha256": hashlib.sha256((DISTUTILS_PTH + "\n").encode()).hexdigest()}},
        "sys_path": ["/usr/lib/python311.zip", "/usr/lib/python3.11",
                     "/usr/lib/python3.11/lib-dynload", SITE, f"{REPO}/python"],
    }


def cuda_nccl_facts() -> CudaNccl:
    nccl_lib = f"{SITE}/nvidia/nccl/lib/libnccl.so.2"
    from_lib: VersionSource = {"source": library_source("ncclGetVersion", nccl_lib),
                               "version": "2.27.5"}
    return {
        "cuda_toolkit": {"source": "/usr/local/cuda/bin/nvcc --version", "version": "13.1.80"},
        "cuda_toolkits_installed": {"/usr/local/cuda-13": "13.1", "/usr/local/cuda-13.1": "13.1"},
        "cudnn": {"headers": {f"{SITE}/nvidia/cudnn/include/cudnn_version.h": "9.10.2"},
                  "wheels": {"nvidia-cudnn-cu12": {"source": "importlib.metadata",
                                                   "version": "9.10.2.21"}}},
        "nccl": {"libraries": {nccl_lib: from_lib.copy()}, "torch": from_lib.copy(),
                 "wheels": {"nvidia-nccl-cu12": {"source": "importlib.metadata",
                                                 "version": "2.27.5"}}},
        "nvidia_wheels": dict(NVIDIA_WHEELS),
        "torch": {"cuda": "12.8", "debug": False, "git_version": made_up_hex("torch git"),
                  "hip": None, "path": f"{SITE}/torch", "source": f"{SITE}/torch/version.py",
                  "version": "2.10.0+cu128"},
    }


# ---- environment of the agent and of the workers -----------------------------------------

def login_env() -> dict[str, str]:
    return {"PATH": f"{VENV}/bin:/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:"
                    "/usr/bin:/sbin:/bin", "VIRTUAL_ENV": VENV, "CUDA_HOME": "/usr/local/cuda",
            "LD_LIBRARY_PATH": "/usr/local/cuda/lib64", "HF_HOME": "/root/.cache/huggingface",
            # made up, in a real token's shape: the demo shows it masked (a value that reads
            # as a placeholder, "example-...", is left whole on purpose)
            "HF_TOKEN": "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", "HOME": "/root",
            "SHELL": "/bin/bash",
            "TERM": "xterm-256color", "OMP_NUM_THREADS": "8"}


def selected(environ: dict[str, str]) -> dict[str, str | None]:
    """What the agent keeps of an environment, redacted the agent's way."""
    chosen = agent_env.select_env(environ, (envnames.DEFAULT_PREFIXES, envnames.DEFAULT_NAMES))
    kept: dict[str, str | None] = dict(sorted(chosen.items()))
    return kept


SERVER_ARGS = ["-m", "sglang.launch_server", "--model-path", "moonshotai/Kimi-K2.5", "--tp", "8",
               "--trust-remote-code", "--speculative-algorithm", "EAGLE3",
               "--speculative-draft-model-path", "/root/models/kimi-k2.5-eagle3",
               "--speculative-num-steps", "2", "--speculative-eagle-topk", "1",
               "--speculative-num-draft-tokens", "3", "--port", "30000"]


def process(cmdline: list[str], ppid: int, started: float, boot: int,
            environ: dict[str, str], matched: str) -> Process:
    return {"cmdline": cmdline, "cwd": "/root", "env": selected(environ),
            "exe": "/usr/bin/python3.11",
            "limits": {"memlock": {"hard": "unlimited", "soft": "unlimited"},
                       "nofile": {"hard": 1048576, "soft": 1048576}},
            "matched": matched, "ppid": ppid, "start_epoch": round(boot + started, 2),
            "start_since_boot_s": started}


def processes(good: bool, boot: int) -> dict[str, Process]:
    """The server and its nine children: eight scheduler (TP) workers and a detokenizer."""
    server, started = (41873, 11520.0) if good else (88412, 172520.37)
    tuned = dict(login_env(), **NCCL_TUNING)
    found = {str(server): process([VENV_PYTHON] + SERVER_ARGS, 41702 if good else 88240,
                                  started, boot, login_env(), "pattern sglang")}
    names = [f"sglang::scheduler_TP{rank}" for rank in range(8)] + ["sglang::detokenizer"]
    for offset, name in enumerate(names):
        found[str(server + 117 + offset)] = process([name], server,
                                                    round(started + 6.4 + offset / 10, 2),
                                                    boot, tuned, "pattern sglang")
    return found


def env_facts(good: bool, boot: int) -> Env:
    return {"env_prefixes": list(envnames.DEFAULT_PREFIXES), "proc_patterns": ["sglang"],
            "processes": processes(good, boot), "processes_omitted": 0,
            "shell": selected(dict(login_env(), **NCCL_TUNING))}
