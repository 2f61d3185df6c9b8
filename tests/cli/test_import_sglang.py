"""SGLang's check_env (layout of sgl-project/sglang #645, #965, #2805, #5389, #14327,
#18943), written with the real H200's facts (the agent's, tests/data/h200/agent.json, and
that machine's real topo -m output): SGLang itself was not installed there, so its line and
the `Module Not Found` ones are ours."""
from __future__ import annotations

from pathlib import Path

from conftest import Cli
from helpers.imported import H200, agent_collectors, mismatches

from envsnap.snapshot.store import Store

WARNING = ("/opt/venv/lib/python3.12/site-packages/pydantic/_internal/_config.py:345: "
           "UserWarning: Valid config keys have changed in V2:\n")


def check_env() -> str:
    return (WARNING + "Python: 3.12.3 (main, Aug 31 2026, 10:18:26) [GCC 13.3.0]\n"
            "CUDA available: True\nGPU 0: NVIDIA H200\nGPU 0 Compute Capability: 9.0\n"
            "CUDA_HOME: /usr/local/cuda\n"
            "NVCC: Cuda compilation tools, release 13.0, V13.0.88\n"
            "CUDA Driver Version: 580.159.04\nPyTorch: 2.11.0+cu130\nsglang: 0.5.5\n"
            "sgl_kernel: Module Not Found\ntriton: 3.6.0\ntransformers: 5.17.0\n"
            "numpy: 2.5.2\naiohttp: 3.14.3\npackaging: 26.3\npsutil: 7.2.2\n"
            "uvloop: 0.23.0\nvllm: Module Not Found\nNVIDIA Topology: \n"
            + (H200 / "smi_topo_m.txt").read_text() + "\nHypervisor vendor: KVM\n"
            "ulimit soft: 20000\n")


def test_check_env_reads_into_the_agents_fields(cli: Cli, tmp_path: Path) -> None:
    paste = tmp_path / "check_env.txt"
    paste.write_text(check_env())
    result = cli("import", str(paste), "--label", "sgl")
    assert result.returncode == 0, result.stderr
    document = Store(cli.env["ENVSNAP_STORE"]).load("sgl")
    source = document["meta"]["imported"]["sources"]["check_env.txt"]
    assert (source["tool"], source["version"]) == ("SGLang check_env", "0.5.5")
    facts = document["facts"]
    assert facts["nvidia"]["gpus"]["GPU0"] == {
        "index": 0, "name": "NVIDIA H200", "compute_capability": "9.0",
        "cpu_affinity": "0-15", "numa_affinity": "0"}
    assert "vllm" not in facts["python_env"]["packages"]      # Module Not Found: unknown
    packages = facts["python_env"]["packages"]
    assert packages.pop("sglang") == "0.5.5"                  # not on that machine
    compared, wrong = mismatches(facts, agent_collectors(H200))
    assert wrong == [] and compared >= 15, (compared, wrong)


def test_a_truncated_check_env_is_read_as_far_as_it_goes(cli: Cli, tmp_path: Path) -> None:
    paste = tmp_path / "cut.txt"
    paste.write_text("\n".join(check_env().splitlines()[:5]) + "\nsglang: 0.5.5\n")
    result = cli("import", str(paste))
    assert result.returncode == 0, result.stderr
    assert f"warning: {paste}: line 6: truncated check_env output: no 'PyTorch:'" in \
        result.stderr and "read as far as it goes" in result.stderr
