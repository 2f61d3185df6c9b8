"""`envsnap import` of what people really paste (tests/data/pasted: cut from public issue
threads, saved as copied; its README names each thread): the report is found among the
markdown, prompts, warnings and prose around it; topology matrices copied with spaces are
read by shape; a line that breaks a report is named and the rest read; a paste cut short is
read as far as it goes."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from conftest import Cli
from helpers.folded import words

from envsnap.snapshot.store import Store

PASTED = Path(__file__).resolve().parent.parent / "data" / "pasted"


def imported(cli: Cli, name: str, *more: str) -> tuple[dict[str, Any], str]:
    result = cli("import", str(PASTED / name), "--label", "theirs", *more)
    assert result.returncode == 0, result.stdout + result.stderr
    return Store(cli.env["ENVSNAP_STORE"]).load("theirs"), result.stderr


def test_a_check_env_in_a_pull_request_body_with_tabs_and_a_driver_line_a_gpu(cli: Cli) -> None:
    document, said = imported(cli, "sglang_661.txt", "-v")
    facts = document["facts"]
    assert facts["nvidia"]["driver"] == "535.54.03"      # the second `535.54.03` passed over
    gpus = facts["nvidia"]["gpus"]
    assert gpus["GPU1"]["name"] == "NVIDIA A100-SXM4-80GB"
    assert gpus["GPU1"]["cpu_affinity"] == "0-31,64-95" and gpus["GPU1"]["numa_affinity"] == "0"
    assert facts["nvidia"]["topology"]["GPU0"] == {
        "GPU1": "NV12", "NIC0": "NODE", "NIC1": "NODE", "NIC2": "PXB", "NIC3": "SYS",
        "NIC4": "SYS"}
    assert facts["python_env"]["packages"]["sglang"] == "0.1.21"
    # what is around the report is listed with -v, each line by its number
    for line in ("sglang_661.txt:1: skipped a markdown heading: '## Motivation'",
                 "sglang_661.txt:5: skipped a code fence: '```bash'",
                 "sglang_661.txt:6: skipped prose: 'python3 -m sglang.check_env'"):
        assert line in said, said


def test_a_matrix_copied_with_spaces_and_cut_in_a_row_is_read_by_shape(cli: Cli) -> None:
    """The crash of the report: `int(gpu[3:])` on an unsplit row of 18 NICs."""
    document, said = imported(cli, "sglang_854.txt")
    nvidia = document["facts"]["nvidia"]
    assert nvidia["driver"] == "535.161.08" and nvidia["gpu_count"] == 8
    assert nvidia["gpus"]["GPU0"]["cpu_affinity"] == "0-55,112-167"
    assert nvidia["topology"]["GPU0"]["GPU7"] == "NV18"
    assert nvidia["topology"]["GPU0"]["NIC17"] == "SYS"
    assert "GPU1" not in nvidia["topology"]          # its row is cut: unknown, not guessed
    assert "sglang_854.txt:41: passed over 'GPU1    NV18     X      NV18" in said
    assert "the rest of the report read" in said
    assert "3 lines around the reports passed over" in said     # fence, prompt, /bin/sh
    assert document["meta"]["imported"]["complete"] == []


def test_a_warning_and_its_source_line_above_a_check_env_are_passed_over(cli: Cli) -> None:
    document, said = imported(cli, "sglang_2805.txt", "--verbose")
    gpu = document["facts"]["nvidia"]["gpus"]["GPU0"]
    assert gpu["name"] == "NVIDIA A40" and gpu["compute_capability"] == "8.6"
    assert gpu["cpu_affinity"] == "0-31,64-95" and gpu["numa_affinity"] == "0"
    assert document["facts"]["nvidia"]["topology"]["GPU0"]["NIC2"] == "PIX"
    assert "sglang_2805.txt:2: skipped a Python warning:" in said
    assert "sglang_2805.txt:4: skipped a Python warning's source line: " \
           "'warnings.warn(message, UserWarning)'" in said


def test_a_rocm_collect_env_in_details_and_fences_gives_rocm_facts(cli: Cli) -> None:
    document, said = imported(cli, "vllm_8963.txt")
    cuda = document["facts"]["cuda_nccl"]
    assert cuda["rocm"] == {"hip_runtime": "6.2.41133", "miopen": "3.2.0",
                            "gpus": {"GPU0": "AMD Instinct MI100 (gfx908:sramecc+:xnack-)"}}
    assert cuda["torch"]["hip"] == "6.2.41133-dd7f95766"
    assert "gpus" not in document["facts"]["nvidia"]         # no NVIDIA GPU is stated
    assert document["facts"]["system"]["cpu"]["online"] == "0-15"
    assert "vllm_8963.txt: line 37: truncated collect_env output" in said and \
        "read as far as it goes" in said


def test_a_rocm_report_under_a_prompt_notices_and_logs_is_read_as_far_as_it_goes(
        cli: Cli) -> None:
    document, said = imported(cli, "vllm_10855.txt", "-v")
    assert "driver" not in document["facts"]["nvidia"]
    assert document["facts"]["cuda_nccl"]["torch"]["version"] == "2.6.0.dev20241113+rocm6.2"
    assert "vllm_10855.txt:5: skipped a log line: 'WARNING 12-03 08:56:56" in said
    assert "vllm_10855.txt:2: skipped a prompt line: 'root@mistral7b" in said


def test_a_matrix_whose_affinity_cells_are_empty_claims_no_affinity(cli: Cli) -> None:
    """vLLM 0.8.5's tail alone: the matrix is read; the spaces a copy made of empty cells
    cannot say which column `N/A` stands in, so no affinity is stated."""
    document, _ = imported(cli, "vllm_19607.txt")
    nvidia = document["facts"]["nvidia"]
    assert nvidia["topology"]["GPU1"]["GPU0"] == "NV12"
    assert nvidia["topology"]["GPU0"]["NIC7"] == "PXB"
    assert nvidia["gpus"]["GPU0"] == {"index": 0}


def test_show_and_diff_of_a_pasted_check_env(cli: Cli) -> None:
    imported(cli, "sglang_661.txt")
    shown = words(cli("show", "theirs").stdout)
    assert "NVIDIA driver 535.54.03" in shown and "2 x NVIDIA A100-SXM4-80GB" in shown
    diff = cli("diff", "theirs", str(PASTED / "sglang_2805.txt"))
    assert diff.returncode == 1, diff.stdout + diff.stderr
    assert "535.54.03" in diff.stdout and "535.104.12" in diff.stdout


def test_nothing_readable_is_one_line_and_exit_4(cli: Cli, tmp_path: Path) -> None:
    prose = tmp_path / "prose.txt"
    prose.write_text("### Your current environment\n\nI cannot run collect_env, sorry.\n")
    result = cli("import", str(prose), "--label", "never")
    assert result.returncode == 4 and result.stderr.count("\n") == 1, result.stderr
    assert "not an output envsnap reads" in result.stderr


def test_mangled_pastes_never_give_an_internal_error(cli: Cli, tmp_path: Path) -> None:
    """A few of the fuzz test's seeded cases (tests/unit/imports/test_paste_fuzz.py)
    through the CLI: a snapshot of what could be read, or one line and exit 4."""
    import random
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "unit" / "imports"))
    from test_paste_fuzz import SAMPLES, mutate

    rng = random.Random(39)
    for number, path in enumerate(rng.sample(SAMPLES, 6)):
        paste = tmp_path / f"mangled-{number}.txt"
        paste.write_text("\n".join(mutate(path.read_text().splitlines(), rng)) + "\n")
        result = cli("import", str(paste), "--label", f"m{number}")
        assert result.returncode in (0, 4), result.stderr
        assert result.returncode == 0 or result.stderr.count("\n") == 1, result.stderr


def test_an_smi_table_with_mig_under_a_terminal_session_is_read(cli: Cli) -> None:
    document, said = imported(cli, "smi_nvitop_8.txt", "-v")
    nvidia = document["facts"]["nvidia"]
    assert nvidia["driver"] == "510.47.03" and nvidia["cuda_driver"] == "11.6"
    second = nvidia["gpus"]["00000000:41:00.0"]
    assert second["mig_mode_current"] == "Enabled" and second["memory_total_mib"] == 81920
    assert "name" not in second                  # `NVIDIA A100-SXM...` is cut by the table
    assert "smi_nvitop_8.txt:3: skipped a prompt line:" in said


def test_an_smi_row_with_power_not_available_is_read(cli: Cli, tmp_path: Path) -> None:
    """The same table as a workstation card or a MIG GPU prints it, power draw and cap
    `N/A` (the real row's figures replaced: no thread in the samples quotes one whole)."""
    paste = tmp_path / "smi-na.txt"
    paste.write_text((PASTED / "smi_nvitop_8.txt").read_text().replace(
        "   178W / 500W |", "  N/A /  N/A  |"))
    result = cli("import", str(paste), "--label", "na")
    assert result.returncode == 0, result.stderr
    gpu = Store(cli.env["ENVSNAP_STORE"]).load("na")["facts"]["nvidia"]["gpus"][
        "00000000:41:00.0"]
    assert gpu["memory_total_mib"] == 81920 and "power_enforced_limit_w" not in gpu


def test_an_smi_q_quoted_in_a_reply_is_read(cli: Cli) -> None:
    document, _ = imported(cli, "smi_q_nvidia_docker_925.txt")
    nvidia = document["facts"]["nvidia"]
    assert nvidia["driver"] == "415.27"
    assert nvidia["gpus"]["00000000:01:00.0"]["vbios"] == "84.06.76.00.16"


def test_show_and_report_of_a_rocm_paste_say_what_it_states(cli: Cli) -> None:
    imported(cli, "vllm_8963.txt")
    shown = words(cli("show", "theirs").stdout)
    assert "torch 2.6.0.dev20240918+rocm6.2 (built for ROCm 6.2.41133-dd7f95766)" in shown
    assert "ROCm HIP runtime 6.2.41133; MIOpen 3.2.0; 1 x AMD Instinct MI100" in shown
    assert "CUDA none" not in shown
    report = cli("report", "theirs").stdout
    assert "python packages" in report and "unknown: not in a torch collect_env output" in \
        report.split("python packages")[1][:200]


def test_rocm_smi_tables_give_the_link_types_between_amd_gpus(cli: Cli) -> None:
    document, _ = imported(cli, "rocm_smi_lib_108.txt")
    topology = document["facts"]["cuda_nccl"]["rocm"]["topology"]
    assert topology["GPU0"] == {"GPU1": "PCIE", "GPU2": "PCIE", "GPU3": "PCIE"}
    assert sorted(topology) == ["GPU0", "GPU1", "GPU2", "GPU3"]
    assert "nvidia" not in document["meta"]["imported"]["complete"]


def test_rocm_smi_tables_under_vllms_gpu_topology_are_no_crash(cli: Cli) -> None:
    """vLLM's ROCm tail (`GPU Topology:` then rocm-smi's tables) crashed on `int('0 0')`;
    cut in a row, as this paste is, the row is named."""
    result = cli("import", str(PASTED / "vllm_46179.txt"), "--label", "rocm")
    assert result.returncode == 0, result.stderr
    assert "vllm_46179.txt:16: passed over 'GPU7   15           15'" in result.stderr


def test_a_sectioned_vllm_report_cut_before_its_tail_is_read(cli: Cli) -> None:
    """Only vLLM prints torch's facts in sections: cut before `vLLM Version`, it is still
    vLLM's report, read as far as it goes."""
    document, said = imported(cli, "vllm_27307.txt")
    assert document["meta"]["imported"]["sources"]["vllm_27307.txt"]["tool"] == \
        "vLLM collect_env"
    facts = document["facts"]
    assert facts["cuda_nccl"]["torch"] == {"version": "2.9.0a0+git1c57644",
                                           "hip": "7.1.25424-4179531dcd", "debug": False}
    assert facts["system"]["os_release"]["PRETTY_NAME"] == "Ubuntu 22.04.5 LTS"
    assert "read as far as it goes" in said


def test_check_envs_nic_legend_names_the_nics(cli: Cli, tmp_path: Path) -> None:
    """Later check_env releases print nvidia-smi's NIC legend under the matrix, then the
    hypervisor and ulimit lines (no thread in the samples quotes it whole: this is #661's
    paste with the legend completed and those lines as check_env prints them)."""
    paste = tmp_path / "nic-legend.txt"
    paste.write_text((PASTED / "sglang_661.txt").read_text() + "".join(
        f"  {line}\n" for line in (
            "PIX  = Connection traversing at most a single PCIe bridge",
            "NV#  = Connection traversing a bonded set of # NVLinks"))
        + "\nNIC Legend:\n\n" + "".join(f"  NIC{n}: mlx5_{n}\n" for n in range(5))
        + "\n\nHypervisor vendor: KVM\nulimit soft: 1048576\n")
    result = cli("import", str(paste), "--label", "nics")
    assert result.returncode == 0, result.stderr
    facts = Store(cli.env["ENVSNAP_STORE"]).load("nics")["facts"]
    assert facts["nvidia"]["topology"]["GPU0"]["mlx5_2"] == "PXB"
    assert facts["system"]["limits"]["nofile"]["soft"] == 1048576
    assert "nic-legend" not in facts["python_env"]["packages"]


def test_a_line_a_mail_client_wrapped_is_joined_back(cli: Cli, tmp_path: Path) -> None:
    """#8963's paste as a mail client wraps it: its long Python version line broken in two."""
    text = (PASTED / "vllm_8963.txt").read_text()
    long = "Python version: 3.9.19 (main, May  6 2024, 19:43:03)  [GCC 11.2.0] (64-bit runtime)"
    assert long in text
    paste = tmp_path / "wrapped.txt"
    paste.write_text(text.replace(long, long.replace(" [GCC", "\n[GCC")))
    result = cli("import", str(paste), "--label", "wrapped", "-v")
    assert result.returncode == 0, result.stderr
    assert "wrapped.txt:19: skipped a wrapped line, joined back: '[GCC 11.2.0] (64-bit " \
           "runtime)'" in result.stderr
    interpreter = Store(cli.env["ENVSNAP_STORE"]).load("wrapped")["facts"]["python_env"][
        "interpreter"]
    # the break took the spaces where it fell: joined back with one
    assert interpreter["build"] == "3.9.19 (main, May  6 2024, 19:43:03) [GCC 11.2.0]"
