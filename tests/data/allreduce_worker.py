"""One rank of a short NCCL all-reduce, started by torchrun (one process per GPU).

Usage: torchrun --nproc-per-node=N tests/data/allreduce_worker.py FOLDER
Each rank all-reduces a 256 MiB tensor over and over, checks every sum, writes
FOLDER/ready.<rank> after the first good one and FOLDER/result.<rank>.json when FOLDER/stop
appears (or after a minute at most), so a capture can be taken while they run.
"""
import json
import os
import sys
import time

import torch
import torch.distributed as dist

ELEMENTS = 64 * 1024 * 1024  # float32: 256 MiB per all-reduce
LONGEST_S = 60


def main(folder: str) -> None:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=device)
    expected = world * (world + 1) / 2  # rank r contributes r + 1
    tensor = torch.empty(ELEMENTS, device=device)
    rounds, wrong, started = 0, 0, time.monotonic()
    while not os.path.exists(os.path.join(folder, "stop")):
        tensor.fill_(rank + 1)
        dist.all_reduce(tensor)
        torch.cuda.synchronize()
        wrong += int((tensor != expected).sum().item())
        rounds += 1
        if rounds == 1:
            open(os.path.join(folder, f"ready.{rank}"), "w").close()
        if time.monotonic() - started > LONGEST_S:
            break
    seconds = time.monotonic() - started
    with open(os.path.join(folder, f"result.{rank}.json"), "w") as handle:
        json.dump({"rank": rank, "world": world, "rounds": rounds, "wrong_elements": wrong,
                   "seconds": round(seconds, 2),
                   "nccl": ".".join(map(str, torch.cuda.nccl.version())),
                   "NCCL_NVLS_ENABLE": os.environ.get("NCCL_NVLS_ENABLE")}, handle)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
