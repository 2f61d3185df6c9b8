"""`envsnap import` of shapes met in the paste corpus's later threads (tests/data/pastes/threads):
vLLM's collect_env run in a uv venv, a list of GPUs closed by collect_env's blank line in a
paste cut after it, an nvidia-smi table cut after a GPU's first row, and a Windows table whose
rows say TCC/WDDM where Linux says persistence mode."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from conftest import Cli

from envsnap.snapshot.store import Store

PASTES = Path(__file__).resolve().parent.parent / "data" / "pastes" / "threads" / "pastes"


def imported(cli: Cli, path: Path, *more: str) -> tuple[dict[str, Any], str]:
    result = cli("import", str(path), "--label", "theirs", "--force", *more)
    assert result.returncode == 0, result.stdout + result.stderr
    facts: dict[str, Any] = Store(cli.env["ENVSNAP_STORE"]).load("theirs")["facts"]
    return facts, result.stderr


def by_index(facts: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {gpu["index"]: gpu for gpu in facts["nvidia"]["gpus"].values()}


def test_the_line_vllm_prints_in_a_uv_venv_is_not_joined_onto_the_first_line(cli: Cli) -> None:
    """`uv is set` comes between `Collecting environment information...` and the first
    banner; joined onto the line above as if wrapped, it cost the whole System Info section."""
    facts, said = imported(cli, PASTES / "vllm_genesis-vllm-patches_24.copy-button.txt", "-v")
    assert facts["system"]["os_release"]["PRETTY_NAME"] == "Ubuntu 24.04.4 LTS"
    assert facts["cuda_nccl"]["torch"]["version"] == "2.11.0+cu130"
    assert "joined back" not in said


def test_a_list_of_gpus_closed_by_its_blank_line_is_counted_in_a_cut_paste(
        cli: Cli, tmp_path: Path) -> None:
    """The paste stops at the driver line (cut), after the blank line collect_env prints
    under a list of several GPUs: the list is whole. Ended by a fence instead, it may be
    short, and the count stays unknown."""
    text = (PASTES / "vllm_vllm_17527.copy-button.txt").read_text()
    facts, _ = imported(cli, PASTES / "vllm_vllm_17527.copy-button.txt")
    assert facts["nvidia"]["gpu_count"] == 4 and len(by_index(facts)) == 4
    fenced = tmp_path / "cut-in-the-list.txt"
    fenced.write_text("```\n" + text.rstrip("\n") + "\n```\n")
    facts, _ = imported(cli, fenced)
    assert "gpu_count" not in facts["nvidia"] and len(by_index(facts)) == 4


def test_an_nvidia_smi_table_cut_after_a_gpus_first_row_names_that_gpu(cli: Cli) -> None:
    facts, _ = imported(cli, PASTES / "smi_vllm_34296.copy-button.txt")
    gpus = by_index(facts)
    assert gpus[0]["memory_total_mib"] == 49140
    assert gpus[1]["name"] == "NVIDIA GeForce RTX 4090" and "memory_total_mib" not in gpus[1]
    assert "gpu_count" not in facts["nvidia"]       # more rows may follow where it was cut


def test_a_windows_table_is_read_without_a_persistence_mode(cli: Cli) -> None:
    facts, _ = imported(cli, PASTES / "smi_rtx-remix_453.template.txt")
    gpu = by_index(facts)[0]
    assert gpu["memory_total_mib"] == 4096 and "name" not in gpu      # `NVIDIA GeForce ...`
    assert "persistence_mode" not in gpu                               # WDDM is no answer
    assert facts["nvidia"]["driver"] == "546.12"


def test_a_project_copy_of_collect_env_gives_torch_version_alone(cli: Cli) -> None:
    """DocTR's copy prints `PyTorch version: 1.8.0 (torchvision: 0.9.0)`."""
    facts, _ = imported(cli, PASTES / "torch_doctr_345.copy-button.txt")
    assert facts["cuda_nccl"]["torch"]["version"] == "1.8.0"


def test_a_release_name_in_parentheses_is_not_taken_for_the_machine(cli: Cli) -> None:
    """torch 1.6 prints `OS: Red Hat Enterprise Linux Server 7.6 (Maipo)`, no machine."""
    facts, _ = imported(cli, PASTES / "torch_pytorch_43058.template.txt")
    assert facts["system"]["os_release"]["PRETTY_NAME"] == \
        "Red Hat Enterprise Linux Server 7.6 (Maipo)"
    assert "machine" not in facts["system"].get("kernel", {})


def test_a_sectioned_report_pasted_from_its_first_banner_keeps_its_system_info(
        cli: Cli) -> None:
    """No `Collecting environment information...` above: the OS block comes before the
    PyTorch block, and reading must start at the banner, not at `PyTorch version`."""
    facts, _ = imported(cli, PASTES / "vllm_vllm_28438.copy-button.txt")
    assert facts["system"]["os_release"]["PRETTY_NAME"] == "Ubuntu 20.04.5 LTS"
    assert facts["system"]["kernel"]["machine"] == "x86_64"


def test_the_vllm_version_line_names_the_installed_package(cli: Cli) -> None:
    facts, _ = imported(cli, PASTES / "vllm_vllm_15525.copy-button.txt")
    assert facts["python_env"]["packages"]["vllm"] == "0.7.3"


def test_a_table_indented_as_a_whole_is_read_from_its_bars(cli: Cli) -> None:
    """WSL's table pasted two spaces in, below nvidia-smi's own failure in another block."""
    facts, _ = imported(cli, PASTES / "smi_wsl_9134.template.txt")
    assert facts["nvidia"]["driver"] == "517.48"
    assert by_index(facts)[0]["memory_total_mib"] == 11264
