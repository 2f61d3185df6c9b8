"""vLLM's collect_env, in its two layouts (vllm/collect_env.py: torch's layout with vLLM's
tail up to 0.8, as in vllm-project/vllm #9293 and #13497; the sectioned layout of #18285,
as in #19607 and #22372). Each paste here is the real H200 recording's torch part
(tests/data/h200/collect_env.txt) with a vLLM tail in that layout and values of our own: the
H200 had no vLLM installed."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from conftest import Cli
from helpers.imported import H200, agent_collectors, mismatches, save_capture

from envsnap.snapshot.store import Store

TORCH_PART = (H200 / "collect_env.txt").read_text()
TOPOLOGY = ("\tGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \t0-15\t0\t\tN/A\n\n"
            "Legend:\n\n  X    = Self\n  NV#  = Connection traversing a bonded set of # "
            "NVLinks\n\n")
VARIABLES = "NCCL_CUMEM_ENABLE=0\nTORCHINDUCTOR_COMPILE_THREADS=1\n"
OLD_TAIL = ("ROCM Version: Could not collect\nNeuron SDK Version: N/A\nvLLM Version: 0.8.4\n"
            "vLLM Build Flags:\nCUDA Archs: Not Set; ROCm: Disabled; Neuron: Disabled\n"
            "GPU Topology:\n" + TOPOLOGY + VARIABLES)
LOGGED = "INFO 12-01 14:03:01 [__init__.py:239] Automatically detected platform cuda.\n"


def rule(title: str) -> str:
    return f"{'=' * 30}\n{title:^30}\n{'=' * 30}\n"


def sectioned(torch_part: str) -> str:
    """torch's part in the 0.9 layout: titled sections, keys padded to one column."""
    head, cpu = torch_part.split("\nCPU:\n")
    cpu, libraries = cpu.split("\nVersions of relevant libraries:\n")
    lines = [re.sub(r"^([A-Za-z][^:]*?): ?", lambda m: f"{m.group(1):<29}: ", line)
             if not line.startswith(("/", "GPU ", "Collecting")) else line
             for line in head.splitlines()]
    return ("Collecting environment information...\n" + rule("System Info") +
            "\n".join(lines[1:]) + "\n\n" + rule("CPU Info") + cpu + "\n\n" +
            rule("Versions of relevant libraries") + libraries + "\n" + rule("vLLM Info") +
            f"{'ROCM Version':<29}: Could not collect\n{'vLLM Version':<29}: 0.11.0\n"
            "vLLM Build Flags:\n  CUDA Archs: Not Set; ROCm: Disabled; Neuron: Disabled\n"
            "GPU Topology:\n  " + TOPOLOGY + rule("Environment Variables") + VARIABLES)


def imported(cli: Cli, tmp_path: Path, text: str) -> dict[str, Any]:
    paste = tmp_path / "vllm.txt"
    paste.write_text(text)
    result = cli("import", str(paste), "--label", "paste")
    assert result.returncode == 0, result.stderr
    return dict(Store(cli.env["ENVSNAP_STORE"]).load("paste"))


def check(document: dict[str, Any], version: str, layout: str) -> None:
    source = document["meta"]["imported"]["sources"]["vllm.txt"]
    assert (source["tool"], source["version"], source["format"]) == (
        "vLLM collect_env", version, layout)
    facts = document["facts"]
    assert facts["env"] == {"shell": {"NCCL_CUMEM_ENABLE": "0",
                                      "TORCHINDUCTOR_COMPILE_THREADS": "1"}}
    assert facts["nvidia"]["gpus"]["GPU0"]["cpu_affinity"] == "0-15"
    # the vLLM part's version is the installed package's (the H200 recording has none)
    assert facts["python_env"]["packages"].pop("vllm") == version
    # the torch part reads as torch's own output does: the same facts as the agent's
    without_env = {k: v for k, v in facts.items() if k != "env"}
    compared, wrong = mismatches(without_env, agent_collectors(H200))
    assert wrong == [] and compared >= 65, (compared, wrong)


def test_vllm_up_to_0_8_torch_layout_and_its_tail(cli: Cli, tmp_path: Path) -> None:
    text = LOGGED + TORCH_PART + OLD_TAIL
    check(imported(cli, tmp_path, text), "0.8.4", "torch layout + vLLM tail")


def test_vllm_0_9_sectioned_layout(cli: Cli, tmp_path: Path) -> None:
    check(imported(cli, tmp_path, sectioned(TORCH_PART)), "0.11.0", "sectioned (vLLM 0.9+)")


def test_a_torch_output_with_nvidia_smi_under_it_reads_as_two_reports(
        cli: Cli, tmp_path: Path) -> None:
    paste = tmp_path / "mixed.txt"
    paste.write_text(TORCH_PART + (H200 / "smi.txt").read_text())
    result = cli("import", str(paste), "--label", "two")
    assert result.returncode == 0, result.stderr
    sources = Store(cli.env["ENVSNAP_STORE"]).load("two")["meta"]["imported"]["sources"]
    assert [s["tool"] for s in sources.values()] == ["torch collect_env", "nvidia-smi"]


def test_a_vllm_paste_diffs_against_the_capture_on_what_it_knows(cli: Cli,
                                                                 tmp_path: Path) -> None:
    save_capture(cli.env["ENVSNAP_STORE"], H200, "mine")
    paste = tmp_path / "vllm.txt"
    paste.write_text(sectioned(TORCH_PART))
    result = cli("diff", str(paste), "mine", "--json")
    found = {(f["section"], tuple(f["path"])): f["kind"]
             for f in __import__("json").loads(result.stdout)["findings"]}
    # of the two variables vLLM printed, only NCCL_CUMEM_ENABLE is one a capture records
    # (its prefixes): the capture's shell lacks it, a real difference. TORCHINDUCTOR_ is
    # outside them (TORCH_ is not TORCH), so unknown to the capture, as the capture's other
    # variables are unknown to the paste. The paste's vLLM is a package the capture's
    # python lacks.
    assert found == {("env", ("shell", "NCCL_CUMEM_ENABLE")): "removed",
                     ("python_env", ("packages", "vllm")): "removed"}
