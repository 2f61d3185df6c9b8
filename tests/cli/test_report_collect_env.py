"""`envsnap report LABEL --format collect-env`: a snapshot as torch's collect_env prints it
(the layout of the real H200 recording, tests/data/h200/collect_env.txt), and the round
trip: `envsnap import` of that output gives the same facts."""
from __future__ import annotations

import re
from pathlib import Path

from conftest import Cli
from helpers.imported import H200, agent_collectors, mismatches, save_capture

from envsnap.snapshot.store import Store

RECORDED = (H200 / "collect_env.txt").read_text()


def keys(text: str) -> list[str]:
    """The `Key:` lines outside the CPU and library blocks, in order."""
    outside = text.split("\nCPU:\n")[0]
    return [m.group(1) for line in outside.splitlines()
            if (m := re.match(r"([A-Za-z][^:/]*?):", line)) and not line.startswith("GPU ")]


def pip_lines(text: str) -> set[str]:
    return {re.sub(r"[-_.]+", "-", line.split("==")[0]).lower() for line in text.splitlines()
            if line.startswith("[pip3]")}


def test_a_capture_printed_as_collect_env_has_its_layout_and_facts(cli: Cli) -> None:
    save_capture(cli.env["ENVSNAP_STORE"], H200, "mine")
    result = cli("report", "mine", "--format", "collect-env")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert keys(out) == keys(RECORDED)
    assert pip_lines(out) == pip_lines(RECORDED)         # the script's own filter, 31 lines
    for line in ("PyTorch version: 2.11.0+cu130", "CUDA used to build PyTorch: 13.0",
                 "Nvidia driver version: 580.159.04", "CUDA runtime version: 13.0.88",
                 "GPU models and configuration: GPU 0: NVIDIA H200",
                 "OS: Ubuntu 24.04.3 LTS (x86_64)", "[pip3] torch==2.11.0",
                 "[pip3] nvidia-nccl-cu13==2.28.9",
                 "Python version: 3.12.3 (main, Aug 31 2026, 10:18:26) [GCC 13.3.0] "
                 "(64-bit runtime)"):
        assert line + "\n" in out, line
    # what envsnap does not record, printed as the script prints what it cannot read
    assert "GCC version: Could not collect\n" in out
    assert "Is CUDA available: N/A\n" in out


def test_round_trip_import_of_the_printed_output_gives_the_same_facts(cli: Cli,
                                                                      tmp_path: Path) -> None:
    save_capture(cli.env["ENVSNAP_STORE"], H200, "mine")
    printed = tmp_path / "printed.txt"
    assert cli("report", "mine", "--format", "collect-env", "-o", str(printed)).returncode == 0
    assert cli("import", str(printed), "--label", "back").returncode == 0
    store = Store(cli.env["ENVSNAP_STORE"])
    agent = agent_collectors(H200)
    compared, wrong = mismatches(store.load("back")["facts"], agent)
    assert wrong == [] and compared >= 60, (compared, wrong)
    # and an imported paste printed and read again is the paste's facts, every one
    assert cli("import", str(H200 / "collect_env.txt"), "--label", "paste").returncode == 0
    again = tmp_path / "again.txt"
    assert cli("report", "paste", "--format", "collect-env", "-o", str(again)).returncode == 0
    assert cli("import", str(again), "--label", "paste-again").returncode == 0
    assert store.load("paste-again")["facts"] == store.load("paste")["facts"]


def test_collect_env_shows_one_snapshot(cli: Cli) -> None:
    save_capture(cli.env["ENVSNAP_STORE"], H200, "mine")
    result = cli("report", "mine", "--vs", "mine", "--format", "collect-env")
    assert result.returncode == 2 and "without --vs" in result.stderr


CHECK_ENV_KEYS = ["Python", "CUDA available", "GPU 0", "GPU 0 Compute Capability",
                  "CUDA_HOME", "NVCC", "CUDA Driver Version", "PyTorch"]


def test_a_capture_printed_as_sglang_check_env_and_read_back(cli: Cli, tmp_path: Path) -> None:
    save_capture(cli.env["ENVSNAP_STORE"], H200, "mine")
    printed = tmp_path / "check_env.txt"
    result = cli("report", "mine", "--format", "check-env", "-o", str(printed))
    assert result.returncode == 0, result.stderr
    text = printed.read_text()
    keys = [line.split(":")[0] for line in text.splitlines()]
    assert keys[:8] == CHECK_ENV_KEYS and keys[8] == "sglang"   # the script's order
    for line in ("GPU 0: NVIDIA H200", "NVCC: Cuda compilation tools, release 13.0, V13.0.88",
                 "CUDA Driver Version: 580.159.04", "PyTorch: 2.11.0+cu130",
                 "sglang: Module Not Found", "triton: 3.6.0", "ulimit soft: 20000",
                 "NVIDIA Topology: ", "GPU0\t X \t0-15\t0\t\tN/A"):
        assert line + "\n" in text, line
    assert cli("import", str(printed), "--label", "back").returncode == 0
    back = Store(cli.env["ENVSNAP_STORE"]).load("back")
    assert back["meta"]["imported"]["sources"]["check_env.txt"]["tool"] == "SGLang check_env"
    compared, wrong = mismatches(back["facts"], agent_collectors(H200))
    assert wrong == [] and compared >= 20, (compared, wrong)
