"""A snapshot taken by `envsnap capture local` on the lent H200 (tests/data/h200/README.md):
the real thing must load, show, and hold the facts the STORY needs."""
from __future__ import annotations

import json

from conftest import Cli
from helpers.paths import DATA

SNAPSHOT = DATA / "h200" / "snapshot.yaml"


def test_real_h200_capture_shows_through_the_cli(cli: Cli) -> None:
    result = cli("show", str(SNAPSHOT), "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert all(info["error"] is None for info in document["meta"]["collectors"].values())
    nvidia = document["facts"]["nvidia"]
    assert nvidia["present"] and nvidia["source"] == "nvml"
    (gpu,) = nvidia["gpus"].values()
    assert gpu["name"] == "NVIDIA H200"
    assert (gpu["pcie_gen_current"], gpu["pcie_width_current"]) == (5, 16)
    assert nvidia["kernel_module"]["version"] == nvidia["driver"]
    nccl = document["facts"]["cuda_nccl"]["nccl"]["torch"]
    assert nccl["version"] == "2.28.9" and nccl["source"].startswith("ncclGetVersion:")
    (worker,) = document["facts"]["env"]["processes"].values()
    assert worker["env"]["NCCL_PROTO"] == "LL" and "envsnap-worker" in worker["cmdline"]
    assert document["facts"]["git"]["repos"]["/tmp/repo"]["uncommitted"]["dirty"]
