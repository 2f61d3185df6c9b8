"""`envsnap diff` of pastes from the corpus of real issue threads (tests/data/pastes/threads),
as copied: against a capture and against each other. What a paste does not state (the GPUs
below where a table was cut, how many there are, the libraries of a report cut before them)
is unknown: named once as not compared, never "removed", "missing", "new" or "none"; what it
states is compared."""
from __future__ import annotations

import json
from typing import Any

from conftest import Cli
from helpers.folded import words
from helpers.imported import H200, save_capture
from helpers.pastecorpus import CORPUS

# nvidia-smi cut after its second A800's rows, before the rule that closes the last GPU
CUT_TABLE = "smi_vllm_41519.copy-button.txt"
# vLLM's collect_env of an eight-A100 host, cut in its cuDNN list (no libraries)
EIGHT_GPUS = "vllm_vllm_4803.copy-button.txt"
# torch's collect_env cut on its `GPU 1:` line: no driver line, no libraries, no count
CUT_GPU_LIST = "torch_vllm_10147.template.txt"
# check_env naming the one GPU torch sees, its matrix's header all eight of the host
ONE_OF_EIGHT = "sglang_sglang_5389.copy-button.txt"


def imported(cli: Cli, name: str, label: str) -> None:
    result = cli("import", str(CORPUS / "pastes" / name), "--label", label)
    assert result.returncode == 0, result.stderr


def diff(cli: Cli, a: str, b: str) -> tuple[dict[str, Any], str]:
    found = cli("diff", a, b, "--json")
    said = cli("diff", a, b)
    assert found.returncode == said.returncode == 1, said.stdout + said.stderr
    return json.loads(found.stdout), words(said.stdout)


def kinds(report: dict[str, Any]) -> dict[tuple[str, ...], str]:
    """Each finding's kind by its place; a GPU by its index (`GPU1` or `1`, as keyed)."""
    found = {}
    for finding in report["findings"]:
        path = [str(part) for part in finding["path"]]
        if path[0] == "gpus" and len(path) > 1:
            path[1] = path[1].removeprefix("GPU")
        found[(finding["section"], *path)] = finding["kind"]
    return found


def test_a_cut_table_against_a_whole_gpu_list_compares_only_the_gpus_it_shows(
        cli: Cli) -> None:
    imported(cli, CUT_TABLE, "cut")
    imported(cli, EIGHT_GPUS, "eight")
    for a, b in (("eight", "cut"), ("cut", "eight")):
        report, said = diff(cli, a, b)
        found = kinds(report)
        assert found[("nvidia", "driver")] == "changed"
        names = [path for path in found if path[:2] == ("nvidia", "gpus")]
        assert len(names) == 1 and names[0][3] == "name" and found[names[0]] == "changed", found
        # GPUs 2-7 of the whole list are not said to be gone from the cut table, nor the
        # count to differ: the table does not say how many GPUs the host has
        assert not [f for f in report["findings"] if f["kind"] in ("removed", "added")]
        assert "nvidia.gpu_count" in said and "could not compare" in said
        assert "missing" not in said and " new in " not in said and "none" not in said


def test_a_report_cut_before_its_driver_and_libraries_against_a_capture(cli: Cli) -> None:
    save_capture(cli.env["ENVSNAP_STORE"], H200, "mine")
    imported(cli, CUT_GPU_LIST, "theirs")
    for a, b in (("mine", "theirs"), ("theirs", "mine")):
        report, said = diff(cli, a, b)
        found = kinds(report)
        # stated: torch, the toolkit, GPU 0's name; and GPU 1, which the one-GPU capture lacks
        assert found[("cuda_nccl", "torch", "version")] == "changed"
        assert found[("cuda_nccl", "cuda_toolkit", "version")] == "changed"
        assert found[("nvidia", "gpus", "0", "name")] == "changed"
        assert found[("nvidia", "gpus", "1")] == ("added" if a == "mine" else "removed")
        # not stated: the driver, the count, every package of the capture
        assert not [path for path in found if path[:2] in (("nvidia", "driver"),
                                                           ("nvidia", "gpu_count"))]
        assert not [path for path in found if path[0] == "python_env" and path[1] == "packages"]
        noted = said.split("could not compare, not in a torch collect_env output: ")[1]
        assert {"nvidia.driver", "nvidia.gpu_count", "python_env.packages"} <= \
            set(noted.split(". ")[0].split(", "))


def test_a_check_env_counts_the_gpus_of_its_matrix_as_a_capture_does(cli: Cli) -> None:
    """check_env names the GPUs torch sees (one here); its matrix's header names the host's
    eight, as NVML counts them: against another eight-GPU host's report, no count drift."""
    imported(cli, ONE_OF_EIGHT, "one")
    imported(cli, EIGHT_GPUS, "eight")
    report, _ = diff(cli, "one", "eight")
    assert ("nvidia", "gpu_count") not in kinds(report), report["findings"]
    shown = cli("show", "one")
    assert "1 x NVIDIA A100-SXM4-80GB; 7 x ?" in shown.stdout, shown.stdout
