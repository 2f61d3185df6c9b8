"""Record the raw GPU readings the nvidia and cuda_nccl parsers are tested on.

Run on a real GPU host from the repository root:  python3 tests/data/record_gpu.py OUT_DIR
It writes OUT_DIR/h200/* (copy them to tests/data/h200/): the raw NVML dict that
nvml_reader.read_raw() returns, nvidia-smi's outputs (csv query, topo -m, -q and -q -x for
cross-checking), /proc/driver/nvidia/version, modinfo, and what torch itself says about its
versions (imported here, never in the agent), idle and under a matmul load. It also times the
agent against `python -m torch.utils.collect_env`.
"""
from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from typing import Any

sys.path.insert(0, os.getcwd())

from envsnap.agent import cuda_nccl, nvidia, nvml_reader, smi  # noqa: E402

TORCH_TRUTH = """
import importlib.util, json, sys
spec = importlib.util.find_spec("torch")
imported_by_find_spec = "torch" in sys.modules
import torch
print(json.dumps({"find_spec_imported_torch": imported_by_find_spec,
                  "version": torch.__version__, "cuda": torch.version.cuda,
                  "git_version": torch.version.git_version,
                  "nccl": ".".join(map(str, torch.cuda.nccl.version())),
                  "cudnn": torch.backends.cudnn.version(),
                  "device": torch.cuda.get_device_name(0)}))
"""
LOAD = """
import time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
torch.cuda.synchronize()
open("%s", "w").write("running")
end = time.time() + %f
while time.time() < end:
    for _ in range(20):
        a @ a
    torch.cuda.synchronize()
"""


def shell(argv: list[str], timeout: float = 120) -> dict[str, Any]:
    started = time.monotonic()
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"rc": None, "out": "", "err": str(exc), "seconds": None}
    return {"rc": proc.returncode, "out": proc.stdout.decode("utf-8", "replace"),
            "err": proc.stderr.decode("utf-8", "replace")[-4000:],
            "seconds": round(time.monotonic() - started, 3)}


class Recorder:
    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.log: dict[str, Any] = {}
        os.makedirs(folder, exist_ok=True)

    def write(self, name: str, text: str) -> None:
        with open(os.path.join(self.folder, name), "w") as handle:
            handle.write(text)

    def command(self, name: str, argv: list[str], timeout: float = 120,
                keep: bool = True) -> dict[str, Any]:
        result = shell(argv, timeout)
        if keep and result["out"]:
            self.write(name, result["out"])
        self.log[name] = {"argv": argv, "rc": result["rc"], "seconds": result["seconds"],
                          "stderr": result["err"][-1000:]}
        return result

    def json(self, name: str, data: Any) -> None:
        self.write(name, json.dumps(data, indent=1, sort_keys=True, default=str) + "\n")

    def copy(self, name: str, path: str) -> None:
        try:
            with open(path) as handle:
                self.write(name, handle.read())
        except OSError as exc:
            self.log[name] = {"error": str(exc)}


def record_smi(rec: Recorder, suffix: str = "") -> None:
    fields, text = smi.query_gpus("nvidia-smi", 30)
    rec.write(f"smi_query{suffix}.csv", text)
    rec.json(f"smi_query_fields{suffix}.json", fields)
    rec.json(f"nvml_raw{suffix}.json", nvml_reader.read_raw(nvml_reader.load_nvml()[0]))
    rec.command(f"smi_q_performance{suffix}.txt", ["nvidia-smi", "-q", "-d", "PERFORMANCE"])


def record_driver(rec: Recorder) -> None:
    rec.copy("proc_driver_nvidia_version.txt", "/proc/driver/nvidia/version")
    rec.copy("proc_driver_nvidia_params.txt", "/proc/driver/nvidia/params")
    rec.command("modinfo_nvidia.txt", ["modinfo", "nvidia"])
    rec.command("sys_module.txt", ["sh", "-c", "ls /sys/module/nvidia; ls /sys/module | grep nv;"
                                   " for m in /sys/module/nvidia*; do echo $m $(cat $m/version "
                                   "$m/srcversion 2>/dev/null); done; uname -r"])


def record_smi_outputs(rec: Recorder) -> None:
    rec.command("smi_q.txt", ["nvidia-smi", "-q"])
    rec.command("smi_q.xml", ["nvidia-smi", "-q", "-x"])
    rec.command("smi_topo_m.txt", ["nvidia-smi", "topo", "-m"])
    rec.command("smi.txt", ["nvidia-smi"])
    rec.command("smi_help_query_gpu.txt", ["nvidia-smi", "--help-query-gpu"])


def record_cuda_nccl(rec: Recorder) -> None:
    torch_dir = cuda_nccl.torch_dir()
    if torch_dir:
        rec.copy("torch_version.py.txt", os.path.join(torch_dir, "version.py"))
    rec.command("ldconfig_p.txt", ["sh", "-c", "ldconfig -p | grep -E 'nccl|cudnn|cuda|nvidia'"])
    rec.command("nvcc_version.txt", ["sh", "-c", "nvcc --version || "
                                     "/usr/local/cuda/bin/nvcc --version"])
    rec.copy("cuda_version.json", "/usr/local/cuda/version.json")
    rec.command("nvidia_wheels.txt", [sys.executable, "-c", "import sys,glob\nfor p in sys.path:"
                                      "\n print(*glob.glob(p + '/nvidia*'), sep='\\n')"])
    rec.command("torch_truth.json", [sys.executable, "-c", TORCH_TRUTH])


def time_agent(rec: Recorder) -> None:
    config = base64.b64encode(b"{}").decode()
    # the first run compiles .pyc files: timed, not kept
    rec.command("agent_cold.json", [sys.executable, "-m", "envsnap.agent", config], keep=False)
    full = rec.command("agent.json", [sys.executable, "-m", "envsnap.agent", config])
    if full["rc"] != 0:  # other collectors may not be written yet: run these two alone
        only = base64.b64encode(json.dumps(
            {"collectors": ["nvidia", "cuda_nccl"]}).encode()).decode()
        rec.command("agent.json", [sys.executable, "-m", "envsnap.agent", only])
    rec.command("agent_smi.json", [sys.executable, "-c", "import json; from envsnap.agent "
                                   "import nvidia; print(json.dumps(nvidia.collect("
                                   "{'nvidia': {'source': 'smi'}}), default=str))"])
    rec.command("collect_env.txt", [sys.executable, "-m", "torch.utils.collect_env"])
    rec.json("in_process_seconds.json", in_process_timings())


def in_process_timings() -> dict[str, list[float]]:
    timings: dict[str, list[float]] = {"nvidia": [], "cuda_nccl": []}
    for _ in range(3):
        for name, module in (("nvidia", nvidia), ("cuda_nccl", cuda_nccl)):
            started = time.monotonic()
            module.collect({})
            timings[name].append(round(time.monotonic() - started, 4))
    return timings


def record_under_load(rec: Recorder, seconds: float = 10.0) -> None:
    flag = os.path.join(rec.folder, ".load_running")
    load = subprocess.Popen([sys.executable, "-c", LOAD % (flag, seconds)])
    deadline = time.monotonic() + 60
    while not os.path.exists(flag) and time.monotonic() < deadline and load.poll() is None:
        time.sleep(0.2)
    time.sleep(2.0)  # let clocks and power settle into the load
    record_smi(rec, "_load")
    load.wait(timeout=120)
    os.remove(flag) if os.path.exists(flag) else None


def main(out: str) -> None:
    rec = Recorder(os.path.join(out, "h200"))
    steps = [("smi", lambda: record_smi(rec)), ("driver", lambda: record_driver(rec)),
             ("smi_outputs", lambda: record_smi_outputs(rec)),
             ("cuda_nccl", lambda: record_cuda_nccl(rec)), ("agent", lambda: time_agent(rec)),
             ("load", lambda: record_under_load(rec))]
    for name, step in steps:
        try:
            step()
        except Exception as exc:  # keep what the other steps recorded
            rec.log["step:" + name] = f"{type(exc).__name__}: {exc}"
    rec.json("record_log.json", rec.log)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "out")
