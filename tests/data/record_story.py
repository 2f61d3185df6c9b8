"""The NCCL benchmark story, for real, on a machine with 2 or more GPUs (issue 16).

Run on the GPU host with torch, from the repository root:
    python3 tests/data/record_story.py OUT_DIR
It plays the incident with a real all-reduce and the real CLI, and writes
OUT_DIR/story.tar.gz holding h200x<N>-story/ (copy it to tests/data/):
1. An upstream repository and a clone of it, `work`, at the good commit: a bus-bandwidth
   benchmark (busbw.py, one process per GPU under torchrun) and its NCCL set-up module.
2. `envsnap bench local` -> snapshots/good.yaml (runs and GPU telemetry on every GPU).
3. Four commits land upstream and `git pull` brings them in: one of them sets
   NCCL_P2P_DISABLE=1 in the NCCL set-up, on the path every rank takes.
4. `envsnap bench local` -> snapshots/bad.yaml.
5. `envsnap diff good bad` (text, --json, --markdown) and `envsnap report bad --vs good`
   (md, json): diff*.txt/json/md, report.md, report.json.
6. `envsnap restore good --yes --rerun`: restore.txt (the numbers after restore).
7. `envsnap bisect good bad`: bisect.txt (the culprit commit, runs used).
log.json holds every command's argv, exit code, seconds and stderr; story.json the commits.
NVLink multicast stays off in every worker (MULTICAST_OFF below), as the lent multi-GPU
machines require: the benchmark sets it itself too, since torchrun passes its own env on.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from typing import Any

ROOT = os.getcwd()
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                 "NVSHMEM_DISABLE_NVLS": "1"}
METRIC = r"busbw ([0-9.]+) GB/s"
REPEAT = "3"  # 3 vs 3 runs: enough for the verdict when the gap dwarfs the noise

NCCL_SETUP = '''"""How every rank sets NCCL up before init_process_group."""
import os

# NVLink multicast stays off on shared machines.
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                 "NVSHMEM_DISABLE_NVLS": "1"}


def nccl_environment():
    for name, value in MULTICAST_OFF.items():
        os.environ.setdefault(name, value)
'''

CULPRIT = NCCL_SETUP + '''    # Some PCIe hosts hang in P2P copies: take the safe path everywhere.
    os.environ["NCCL_P2P_DISABLE"] = "1"
'''

BENCHMARK = '''"""All-reduce bus bandwidth, one process per GPU (nccl-tests' busbw definition)."""
import os
import time

import torch
import torch.distributed as dist

from infer.nccl_setup import nccl_environment

ELEMENTS = 64 * 1024 * 1024  # float32: 256 MiB
MEASURE_S = 2.0              # long enough for telemetry to see the GPUs busy


def main():
    nccl_environment()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=device)
    tensor = torch.ones(ELEMENTS, device=device)
    for _ in range(5):
        dist.all_reduce(tensor)
    torch.cuda.synchronize()
    rounds, started = 0, time.perf_counter()
    while True:
        for _ in range(10):
            dist.all_reduce(tensor)
        torch.cuda.synchronize()
        rounds += 10
        elapsed = time.perf_counter() - started
        flag = torch.tensor([elapsed >= MEASURE_S], device=device, dtype=torch.int32)
        dist.all_reduce(flag, op=dist.ReduceOp.MIN)  # every rank stops at the same round
        if flag.item():
            break
    elapsed = time.perf_counter() - started
    algbw = tensor.element_size() * ELEMENTS * rounds / elapsed
    if rank == 0:
        print(f"{rounds} all-reduces of 256 MiB on {world} GPUs in {elapsed:.2f} s")
        print(f"busbw {algbw * 2 * (world - 1) / world / 1e9:.1f} GB/s")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
'''

# (subject, {path: text}); the culprit is the second commit of the pull.
GOOD_COMMITS = [
    ("Add the all-reduce bus-bandwidth benchmark",
     {"busbw.py": BENCHMARK, "infer/__init__.py": "", "infer/nccl_setup.py": NCCL_SETUP,
      "README.md": "# infer\n"}),
    ("README: how to run the benchmark",
     {"README.md": "# infer\n\n    torchrun --nproc-per-node 2 busbw.py\n"}),
]
PULLED_COMMITS = [
    ("Tokenizer: cache special tokens", {"infer/tokenizer.py": "SPECIAL = {}\n"}),
    ("nccl: disable P2P to avoid hangs on PCIe hosts", {"infer/nccl_setup.py": CULPRIT}),
    ("Batching: log the queue depth", {"infer/batching.py": "QUEUE_LOG = True\n"}),
    ("README: fix a typo",
     {"README.md": "# infer\n\nRun:\n\n    torchrun --nproc-per-node 2 busbw.py\n"}),
]


class Story:
    def __init__(self, folder: str, scratch: str) -> None:
        self.folder = folder
        self.store = os.path.join(folder, "snapshots")
        os.makedirs(self.store)
        self.log: dict[str, Any] = {}
        self.env = {**os.environ, **MULTICAST_OFF, "PYTHONPATH": ROOT, "ENVSNAP_STORE": self.store,
                    "GIT_AUTHOR_NAME": "Dev", "GIT_AUTHOR_EMAIL": "dev@example.com",
                    "GIT_COMMITTER_NAME": "Dev", "GIT_COMMITTER_EMAIL": "dev@example.com"}
        self.upstream = os.path.join(scratch, "upstream")
        self.work = os.path.join(scratch, "work")

    def run(self, name: str, argv: list[str], cwd: str | None = None,
            keep: str | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        started = time.monotonic()
        proc = subprocess.run(argv, capture_output=True, text=True, env=self.env, cwd=cwd,
                              timeout=timeout)
        self.log[name] = {"argv": argv, "rc": proc.returncode, "stderr": proc.stderr[-3000:],
                          "seconds": round(time.monotonic() - started, 2)}
        if keep:
            with open(os.path.join(self.folder, keep), "w") as handle:
                handle.write(proc.stdout)
        print(f"{name}: exit {proc.returncode} in {self.log[name]['seconds']} s", flush=True)
        return proc

    def envsnap(self, name: str, *args: str, keep: str | None = None) -> str:
        return self.run(name, [sys.executable, "-m", "envsnap", *args], ROOT, keep).stdout

    def git(self, repo: str, *args: str) -> str:
        proc = subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True,
                              env=self.env, check=True)
        return proc.stdout.strip()

    def commit(self, repo: str, subject: str, files: dict[str, str]) -> str:
        for path, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(repo, path)), exist_ok=True)
            with open(os.path.join(repo, path), "w") as handle:
                handle.write(text)
        self.git(repo, "add", "-A")
        self.git(repo, "commit", "-q", "-m", subject)
        return self.git(repo, "rev-parse", "HEAD")

    def write_json(self, name: str, data: Any) -> None:
        with open(os.path.join(self.folder, name), "w") as handle:
            handle.write(json.dumps(data, indent=1, sort_keys=True, default=str) + "\n")


def bench_command(gpus: int) -> str:
    if os.environ.get("STORY_DRY_RUN"):  # the flow without GPUs: P2P off reads as 10x slower
        return (f"{sys.executable} -c 'import os; from infer.nccl_setup import nccl_environment; "
                "nccl_environment(); "
                "print(\"busbw\", 26.8 if os.environ.get(\"NCCL_P2P_DISABLE\") else 296.8, "
                "\"GB/s\")'")
    return (f"{sys.executable} -m torch.distributed.run --nproc-per-node {gpus} "
            f"--master-port 29533 busbw.py")


def bench_args(story: Story, gpus: int, label: str) -> list[str]:
    command = bench_command(gpus)
    return ["bench", "local", "--repo", story.work, "--cwd", story.work, "--cmd", command,
            "--metric", METRIC, "--repeat", REPEAT, "--label", label,
            "--python", sys.executable]


def play(story: Story, gpus: int) -> dict[str, Any]:
    commits: dict[str, Any] = {"good": [], "pulled": []}
    os.makedirs(story.upstream)
    story.git(story.upstream, "init", "-q", "-b", "main")
    for subject, files in GOOD_COMMITS:
        commits["good"].append([story.commit(story.upstream, subject, files), subject])
    story.git(os.path.dirname(story.work), "clone", "-q", story.upstream, story.work)
    bench = bench_args(story, gpus, "good")
    story.envsnap("bench good", *bench)
    for subject, files in PULLED_COMMITS:
        commits["pulled"].append([story.commit(story.upstream, subject, files), subject])
    story.git(story.work, "pull", "-q", "--ff-only")
    story.envsnap("bench bad", *bench_args(story, gpus, "bad"))
    story.envsnap("diff", "diff", "good", "bad", keep="diff.txt")
    story.envsnap("diff --json", "diff", "good", "bad", "--json", keep="diff.json")
    story.envsnap("diff --markdown", "diff", "good", "bad", "--markdown", keep="diff.md")
    story.envsnap("report md", "report", "bad", "--vs", "good", keep="report.md")
    story.envsnap("report json", "report", "bad", "--vs", "good", "--format", "json",
                  keep="report.json")
    story.envsnap("restore", "restore", "good", "--yes", "--rerun", keep="restore.txt")
    commits["head_after_restore"] = story.git(story.work, "rev-parse", "HEAD")
    story.envsnap("bisect", "bisect", "good", "bad", "--repo", story.work, "--cwd", story.work,
                  "--cmd", bench_command(gpus), "--metric", METRIC,
                  "--good-from-snapshot",
                  keep="bisect.txt")
    commits["head_after_bisect"] = story.git(story.work, "rev-parse", "HEAD")
    return commits


def main(out: str) -> None:
    gpus = int(os.environ.get("STORY_DRY_RUN") or subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.cuda.device_count())"],
        capture_output=True, text=True).stdout.strip() or 0)
    name = f"h200x{gpus}-story"
    scratch = tempfile.mkdtemp(prefix="story-")
    story = Story(os.path.join(scratch, name), scratch)
    try:
        story.write_json("story.json", {"gpus": gpus, **play(story, gpus)})
    finally:
        story.write_json("log.json", story.log)
        with tarfile.open(os.path.join(out, "story.tar.gz"), "w:gz") as tar:
            tar.add(story.folder, arcname=name)
    for part in ("diff.txt", "restore.txt", "bisect.txt"):
        path = os.path.join(story.folder, part)
        if os.path.exists(path):
            with open(path) as handle:
                print(f"==== {part}\n{handle.read()[-2500:]}")


if __name__ == "__main__":
    main(sys.argv[1])
