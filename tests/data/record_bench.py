"""Record the agent's bench mode on a real GPU host, for the bench tests to parse.

Run on a GPU host from the repository root:  python3 tests/data/record_bench.py OUT_DIR
It writes OUT_DIR/h200/bench_agent.json (copy it to tests/data/h200/): what
benchrun.run_bench reports for two runs of a small torch workload (PCIe copies of 5 GiB,
then bf16 matmuls), sampled every 0.2 s: clocks, throttle reasons, power, PCIe under load.
The workload also lands in OUT_DIR/gpu_bench.py, for `envsnap bench local --cmd ...`.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, os.getcwd())

from envsnap.agent import benchrun  # noqa: E402

WORKLOAD = '''\
import sys, time
import torch
seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
host = torch.empty(256 << 20, dtype=torch.uint8).pin_memory()
for _ in range(20):
    host.to("cuda", non_blocking=True)
torch.cuda.synchronize()
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
torch.cuda.synchronize()
started, n = time.perf_counter(), 0
while time.perf_counter() - started < seconds:
    for _ in range(20):
        a @ b
    torch.cuda.synchronize()
    n += 20
elapsed = time.perf_counter() - started
print("gen throughput (token/s): %.1f" % (n * 2 * 8192 ** 3 / elapsed / 1e12))
'''


def main() -> None:
    out = Path(sys.argv[1])
    (out / "h200").mkdir(parents=True, exist_ok=True)
    workload = out / "gpu_bench.py"
    workload.write_text(WORKLOAD)
    report = benchrun.run_bench({"cmd": f"{sys.executable} {workload} 2", "repeat": 2,
                                 "sample_interval": 0.2, "cwd": "/tmp",
                                 "metric": r"\(token/s\): ([0-9.]+)"})
    report["cmd"] = "python3 gpu_bench.py 2"   # the recording host's paths mean nothing here
    (out / "h200" / "bench_agent.json").write_text(json.dumps(report, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
