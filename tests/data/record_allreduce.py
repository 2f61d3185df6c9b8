"""Capture a GPU host before and during an NCCL all-reduce, and check the capture against
nvidia-smi on the same machine (issue 6).

Run on a GPU host with torch, from the repository root:
    python3 tests/data/record_allreduce.py OUT_DIR
It writes OUT_DIR/record.tar.gz holding h200x<N>/ (N = GPUs; copy it to tests/data/):
- nvidia-smi's own view: smi_q.xml, smi_q.txt, smi_topo_m.txt, smi_nvlink_s.txt,
  smi_query.csv + smi_query_fields.json, smi_L.txt, and nvml_raw.json (NVML as the agent reads it);
- snapshots/before.yaml, snapshots/during.yaml (same options, taken before and while the
  all-reduce runs), snapshots/during-procs.yaml and during-procs-again.yaml (both with
  --proc allreduce_worker.py);
- diff.txt, diff_all.txt, diff.json: `envsnap diff before during` (plain, --all, --json),
  diff_procs.txt: the two --proc captures, whose workers must pair up by rank;
- crosscheck.json: tests/helpers/smicheck.py on the `before` snapshot; allreduce.json: each rank's
  result (rounds, wrong elements, NCCL version); log.json: every command's exit code.
NVLink multicast stays off in the workers (NCCL_NVLS_ENABLE=0 and the like), as the lent
multi-GPU machines require.
"""
from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from typing import Any

ROOT = os.getcwd()
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]

import yaml  # noqa: E402
from helpers.smicheck import crosscheck  # noqa: E402

from envsnap.agent import nvml_reader, smi  # noqa: E402

WORKER = os.path.join(ROOT, "tests", "data", "allreduce_worker.py")
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                 "NVSHMEM_DISABLE_NVLS": "1"}


class Recording:
    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.log: dict[str, Any] = {}
        self.env = {**os.environ, "PYTHONPATH": ROOT,
                    "ENVSNAP_STORE": os.path.join(folder, "snapshots")}
        os.makedirs(self.env["ENVSNAP_STORE"])

    def write(self, name: str, text: str) -> None:
        with open(os.path.join(self.folder, name), "w") as handle:
            handle.write(text)

    def json(self, name: str, data: Any) -> None:
        self.write(name, json.dumps(data, indent=1, sort_keys=True, default=str) + "\n")

    def run(self, name: str, argv: list[str], keep: str | None = None) -> str:
        started = time.monotonic()
        proc = subprocess.run(argv, capture_output=True, text=True, env=self.env, timeout=300)
        self.log[name] = {"argv": argv, "rc": proc.returncode, "stderr": proc.stderr[-2000:],
                          "seconds": round(time.monotonic() - started, 3)}
        if keep:
            self.write(keep, proc.stdout)
        return proc.stdout

    def envsnap(self, name: str, *args: str, keep: str | None = None) -> str:
        return self.run(name, [sys.executable, "-m", "envsnap", *args], keep)


def record_smi(rec: Recording) -> None:
    rec.run("smi_q_xml", ["nvidia-smi", "-q", "-x"], "smi_q.xml")
    rec.run("smi_q", ["nvidia-smi", "-q"], "smi_q.txt")
    rec.run("smi_topo_m", ["nvidia-smi", "topo", "-m"], "smi_topo_m.txt")
    rec.run("smi_nvlink_s", ["nvidia-smi", "nvlink", "-s"], "smi_nvlink_s.txt")
    rec.run("smi_L", ["nvidia-smi", "-L"], "smi_L.txt")
    fields, text = smi.query_gpus("nvidia-smi", 30)
    rec.write("smi_query.csv", text)
    rec.json("smi_query_fields.json", fields)
    rec.json("nvml_raw.json", nvml_reader.read_raw(nvml_reader.load_nvml()[0]))


def capture(rec: Recording, label: str, *extra: str) -> None:
    rec.envsnap("capture " + label, "capture", "local", "--label", label,
                "--python", sys.executable, *extra)


def start_allreduce(rec: Recording, gpus: int, run_dir: str) -> subprocess.Popen:
    env = {**rec.env, **MULTICAST_OFF, "NCCL_DEBUG": "WARN"}
    argv = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(gpus),
            "--master-port", "29517", WORKER, run_dir]
    rec.log["allreduce"] = {"argv": argv, "env": MULTICAST_OFF}
    log = open(os.path.join(rec.folder, "torchrun.log"), "w")
    return subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)


def wait_ready(launcher: subprocess.Popen, run_dir: str, gpus: int, limit_s: float) -> bool:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and launcher.poll() is None:
        if len(glob.glob(os.path.join(run_dir, "ready.*"))) == gpus:
            return True
        time.sleep(0.2)
    return False


def stop_allreduce(launcher: subprocess.Popen, run_dir: str) -> list[Any]:
    open(os.path.join(run_dir, "stop"), "w").close()
    try:
        launcher.wait(timeout=90)
    except subprocess.TimeoutExpired:
        launcher.kill()
    results = []
    for path in sorted(glob.glob(os.path.join(run_dir, "result.*.json"))):
        with open(path) as handle:
            results.append(json.load(handle))
    return results


def check_before(rec: Recording) -> dict[str, Any]:
    with open(os.path.join(rec.env["ENVSNAP_STORE"], "before.yaml")) as handle:
        facts = yaml.safe_load(handle)["facts"]["nvidia"]

    def text(name: str) -> str:
        with open(os.path.join(rec.folder, name)) as handle:
            return handle.read()
    query = smi.parse_query(text("smi_query.csv"), json.loads(text("smi_query_fields.json")))
    return crosscheck(facts, text("smi_q.xml"), smi.parse_topology(text("smi_topo_m.txt")),
                      query, text("smi_nvlink_s.txt"))


def main(out: str) -> None:
    gpus = len(smi.parse_topology(subprocess.run(["nvidia-smi", "topo", "-m"], text=True,
                                                 capture_output=True).stdout)["links"])
    name = f"h200x{gpus}"
    rec = Recording(os.path.join(tempfile.mkdtemp(), name))
    record_smi(rec)
    capture(rec, "before")
    run_dir = tempfile.mkdtemp(prefix="allreduce-")
    launcher = start_allreduce(rec, gpus, run_dir)
    ready = wait_ready(launcher, run_dir, gpus, 120)
    rec.log["allreduce"]["ready"] = ready
    if ready:
        capture(rec, "during")
        capture(rec, "during-procs", "--proc", "allreduce_worker.py")
        capture(rec, "during-procs-again", "--proc", "allreduce_worker.py")
    rec.json("allreduce.json", stop_allreduce(launcher, run_dir))
    rec.log["allreduce"]["rc"] = launcher.returncode
    if ready:
        rec.envsnap("diff", "diff", "before", "during", keep="diff.txt")
        rec.envsnap("diff --all", "diff", "before", "during", "--all", keep="diff_all.txt")
        rec.envsnap("diff --json", "diff", "before", "during", "--all", "--json",
                    keep="diff.json")
        rec.envsnap("diff procs", "diff", "during-procs", "during-procs-again",
                    keep="diff_procs.txt")
    rec.json("crosscheck.json", check_before(rec))
    rec.json("log.json", rec.log)
    with tarfile.open(os.path.join(out, "record.tar.gz"), "w:gz") as tar:
        tar.add(rec.folder, arcname=name)
    for part in ("log.json", "crosscheck.json", "allreduce.json", "diff.txt", "diff_all.txt",
                 "diff_procs.txt"):
        path = os.path.join(rec.folder, part)
        if os.path.exists(path):
            with open(path) as handle:
                print(f"==== {part}\n{handle.read()[-3000:]}")


if __name__ == "__main__":
    main(sys.argv[1])
