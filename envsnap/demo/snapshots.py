"""The STORY host as it was, as two snapshots: story-good (94 tok/s) and story-bad (60 tok/s).

docs/STORY.md happened on a machine we do not have, so its snapshots are built, not captured:
8x RTX PRO 6000 Blackwell Server Edition on PCIe Gen5 x16 (no NVLink), driver 590.48.01
(open kernel module built with GCC 12.2.0), CUDA 13.1, NCCL 2.27.5, torch 2.10.0+cu128,
/root/ml-env/bin/python3, SGLang editable at /root/sglang moved from bba2fc4 to 3207427 by
`pull origin main: Fast-forward`, nine commits, one of them 0be30d4 "Fix PCG MoE Error"
touching pynccl.py and parallel_state.py; NCCL tuned through sitecustomize.py.

They have exactly the shape a real capture has because they are made the way a capture
makes them: the agent's own pure parsers turn raw readings into facts (NVML readings ->
nvidia.parse_nvml, /proc/driver/nvidia/version -> nvidia_driver.parse_proc_version,
environments -> env.select_env with its redaction, sampled columns -> benchsample.summarise,
runs -> bench.build_record), and snapshot.build turns the agent document into a snapshot
with its digests. What the STORY does not say (the other eight commit subjects, hash
suffixes past the STORY's 7-digit prefixes, serials, package versions beyond the STORY's)
is made up, deterministically: the same code always writes the same bytes.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from envsnap.agent import nvidia, nvidia_driver
from envsnap.demo.story_bench import bench_record
from envsnap.demo.story_code import (
    BAD_HEAD,
    GOOD_HEAD,
    REPO,
    VENV_PYTHON,
    epoch,
    git_facts,
    made_up_hex,
)
from envsnap.demo.story_env import cuda_nccl_facts, env_facts, python_env_facts
from envsnap.snapshot import document as snapshot
from envsnap.snapshot.store import dump_yaml

if TYPE_CHECKING:
    from envsnap.snapshot.records import Snapshot

GPU_NAME = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
HOSTNAME = "gpu-box"
DRIVER = "590.48.01"
NVRM = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  590.48.01  Release Build  "
        "(dvs-builder@U22-I3-AF03-09-1)  Mon Dec  8 12:00:00 UTC 2025")
GCC = "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)"
BUSES = ["00000000:01:00.0", "00000000:21:00.0", "00000000:41:00.0", "00000000:61:00.0",
         "00000000:81:00.0", "00000000:A1:00.0", "00000000:C1:00.0", "00000000:E1:00.0"]
ALL_ONES = (1 << 64) - 1
NAMES = ("story-good", "story-bad")


BOOT = epoch("2025-12-09T07:58:20")
CAPTURED = {"story-good": "2025-12-09T16:20:05", "story-bad": "2025-12-11T10:42:51"}


# ---- system ------------------------------------------------------------------------------

def system_collector(at: int) -> dict[str, Any]:
    facts = {
        "boot_id": "6f1c2a9e-3b7d-4e52-9a0f-1d2c3b4a5e6f",
        "cmdline": "BOOT_IMAGE=/boot/vmlinuz-6.1.0-28-amd64 root=/dev/mapper/vg0-root ro quiet "
                   "iommu=pt amd_iommu=on pci=realloc",
        "cpu": {"logical_cpus": 256, "model": "AMD EPYC 9554 64-Core Processor",
                "online": "0-255", "physical_cores": 128, "smt": "on", "sockets": 2},
        "governors": {"performance": 256}, "hostname": HOSTNAME,
        "iommu": {"cmdline": {"amd_iommu": "on", "iommu": "pt"}, "groups": 148},
        "kernel": {"machine": "x86_64", "release": "6.1.0-28-amd64",
                   "version": "#1 SMP PREEMPT_DYNAMIC Debian 6.1.119-1 (2024-11-22)"},
        "limits": {"memlock": {"hard": "unlimited", "soft": "unlimited"},
                   "nofile": {"hard": 1048576, "soft": 1048576}},
        "memory": {"hugepage_size_kib": 2048, "hugepages_total": 0, "swap_total_kib": 0,
                   "total_kib": 1584842752},
        "numa": {"0": {"cpulist": "0-63,128-191"}, "1": {"cpulist": "64-127,192-255"}},
        "os_release": {"ID": "debian", "NAME": "Debian GNU/Linux",
                       "PRETTY_NAME": "Debian GNU/Linux 12 (bookworm)", "VERSION_ID": "12"},
        "transparent_hugepage": {"defrag": "madvise", "enabled": "always"},
        "toolchain": {"gcc": "(Debian 12.2.0-14+deb12u1) 12.2.0", "clang": None,
                      "cmake": "version 3.25.1", "libc": "glibc-2.36"},
    }
    volatile = {"loadavg": {"15m": 9.12, "1m": 9.87, "5m": 9.41},
                "mem_available_kib": 1301127168, "uptime_seconds": float(at - BOOT),
                "numa_mem_total_kib": {"0": 792421376, "1": 792421376}}
    return {"facts": facts, "volatile": volatile, "error": None, "seconds": 0.0913}


# ---- nvidia: raw NVML readings through the agent's own parser ------------------------------

def raw_gpu(index: int, load: int) -> dict[str, Any]:
    node = index // 4
    words = [ALL_ONES, 0, ALL_ONES, 0] if node == 0 else [0, ALL_ONES, 0, ALL_ONES]
    return {
        "architecture": 10, "clock_app_graphics": 2430, "clock_app_mem": 14001,
        "clock_default_app_graphics": 2430, "clock_default_app_mem": 14001,
        "clock_event_reasons": 1, "clock_event_reasons_supported": 511,
        "clock_graphics": 180 + load, "clock_max_graphics": 2430, "clock_max_mem": 14001,
        "clock_max_sm": 2430, "clock_max_video": 2100, "clock_mem": 405, "clock_sm": 180 + load,
        "compute_capability": [12, 0], "compute_mode": 0, "cpu_affinity": words,
        "ecc_corrected_aggregate": 0, "ecc_corrected_volatile": 0, "ecc_mode": [1, 1],
        "ecc_uncorrected_aggregate": 0, "ecc_uncorrected_volatile": 0,
        "energy": 91_000_000 + 1_000_000 * index + load, "fan": {"error": "Not Supported"},
        "inforom_image": "G530.0200.00.02", "memory": {
            "free": 8_120_000_000, "total": 102_641_958_912, "used": 94_521_958_912},
        "memory_affinity": [1 << node], "mig_mode": [0, 0], "minor_number": index,
        "name": GPU_NAME, "numa_node": node, "nvlink_state.0": {"error": "Not Supported"},
        "pci": {"busId": BUSES[index]}, "pcie_gen_current": 5, "pcie_gen_gpu_max": 5,
        "pcie_gen_max": 5, "pcie_replay_count": 0, "pcie_width_current": 16,
        "pcie_width_max": 16, "persistence_mode": 1, "power_default_limit": 600000,
        "power_enforced_limit": 600000, "power_limit": 600000,
        "power_limit_constraints": [300000, 600000], "power_usage": 34100 + 150 * index,
        "pstate": 8, "remapped_rows": [0, 0, 0, 0], "temp_shutdown": 98, "temp_slowdown": 95,
        "temperature": 36 + index % 3 + (load > 0), "utilization": {"gpu": 0, "memory": 0},
        "uuid": f"GPU-{made_up_hex(f'uuid {index}', 8)}-{made_up_hex(f'u1 {index}', 4)}-"
                f"{made_up_hex(f'u2 {index}', 4)}-{made_up_hex(f'u3 {index}', 4)}-"
                f"{made_up_hex(f'u4 {index}', 12)}",
        "vbios": "98.02.2E.00.05",
    }


def raw_nvml(load: int) -> dict[str, Any]:
    # Over PCIe only: GPUs on one socket meet at its root complex (NODE), else SYS.
    pairs = {f"{a},{b}": {"common_ancestor": 40 if a // 4 == b // 4 else 50}
             for a in range(8) for b in range(a + 1, 8)}
    return {"system": {"cuda_driver_version": 13010, "device_count": 8,
                       "driver_version": DRIVER, "nvml_version": f"13.{DRIVER}"},
            "library": f"/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.{DRIVER}",
            "gpus": {str(i): raw_gpu(i, load) for i in range(8)}, "pairs": pairs}


def kernel_module() -> dict[str, Any]:
    facts = nvidia_driver.parse_proc_version(f"{NVRM}\n{GCC}\n")
    params = "\n".join(["EnableMSI: 1", "EnableGpuFirmware: 18", "EnableResizableBar: 0",
                        "NvLinkDisable: 0", "RegistryDwords: \"\"", "DmaRemapPeerMmio: 1"])
    modinfo = nvidia_driver.parse_modinfo(
        f"filename:       /lib/modules/6.1.0-28-amd64/updates/dkms/nvidia.ko\n"
        f"version:        {DRIVER}\nlicense:        Dual MIT/GPL\n"
        "srcversion:     4C1E0B9A7F3D2E6B8A5C901\n"
        "vermagic:       6.1.0-28-amd64 SMP preempt mod_unload modversions\n")
    facts.update({"loaded": {"nvidia": DRIVER, "nvidia_uvm": DRIVER, "nvidia_modeset": DRIVER,
                             "nvidia_drm": DRIVER},
                  "params": nvidia_driver.parse_params(params),
                  "srcversion": "4C1E0B9A7F3D2E6B8A5C901", "modinfo": modinfo,
                  "file": {"path": modinfo["filename"], "size": 96731288,
                           "mtime": "2025-12-08T12:41:07Z"},
                  "file_matches_loaded": True})
    return facts


def nvidia_collector(load: int) -> dict[str, Any]:
    facts, volatile = nvidia.parse_nvml(raw_nvml(load))
    facts["kernel_module"] = kernel_module()
    return {"facts": facts, "volatile": volatile, "error": None, "seconds": 0.3817}


# ---- one snapshot ---------------------------------------------------------------------------

def agent_output(name: str) -> dict[str, Any]:
    at = epoch(CAPTURED[name])
    good = name == "story-good"
    collectors = {
        "system": system_collector(at),
        "nvidia": nvidia_collector(0 if good else 15),
        "cuda_nccl": {"facts": cuda_nccl_facts(), "volatile": {}, "error": None,
                      "seconds": 0.2712},
        "python_env": {"facts": python_env_facts(), "volatile": {}, "error": None,
                       "seconds": 0.2304},
        "env": {"facts": env_facts(good, BOOT), "volatile": {}, "error": None, "seconds": 0.0061},
        "git": {"facts": git_facts(good), "volatile": {"seconds": {REPO: 0.1934}},
                "error": None, "seconds": 0.1941},
    }
    return {"agent": {"pid": 52113 if good else 71208, "python": VENV_PYTHON,
                      "python_version": "3.11.2", "version": "1",
                      "startup_seconds": 0.0712 if good else 0.0698, "masking_seconds": 0.0014},
            "collectors": collectors}


def story_snapshot(name: str) -> Snapshot:
    config = {"repos": [REPO], "procs": ["sglang"], "timeout": 20.0, "python": VENV_PYTHON,
              "hot_paths": []}
    document = snapshot.build(agent_output(name), label=name, host=f"root@{HOSTNAME}",
                              address=HOSTNAME, captured_at=CAPTURED[name] + "+00:00",
                              config=config)
    snapshot.set_envsnap_version(document, "0.1.0")  # the bytes must not move with releases
    snapshot.set_bench(document, bench_record(name == "story-good", HOSTNAME, BUSES, GPU_NAME,
                                              epoch(CAPTURED[name])))
    return document


def story_documents() -> dict[str, Snapshot]:
    """{"story-good": document, "story-bad": document}; HEADs GOOD_HEAD and BAD_HEAD."""
    assert GOOD_HEAD.startswith("bba2fc4") and BAD_HEAD.startswith("3207427")
    return {name: story_snapshot(name) for name in NAMES}


def write_examples(folder: str | Path) -> list[Path]:
    """Write story-good.yaml and story-bad.yaml into folder; the paths written."""
    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for name, document in story_documents().items():
        path = target / f"{name}.yaml"
        path.write_text(dump_yaml(document), encoding="utf-8")
        written.append(path)
    return written
