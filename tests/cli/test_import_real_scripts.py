"""vLLM's collect_env.py and SGLang's check_env.py, the scripts themselves run on the lent
H200 (tests/data/h200-reports, its README says how), imported and compared fact by fact with
envsnap's capture of the same minute on that machine: 0 mismatches."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import Cli
from helpers.imported import DATA, agent_collectors, mismatches, save_capture

from envsnap.agent.env import DEFAULT_NAMES
from envsnap.snapshot.store import Store

REPORTS = DATA / "h200-reports"


@pytest.mark.parametrize("name,tool,least", [("vllm_collect_env.txt", "vLLM collect_env", 80),
                                             ("sglang_check_env.txt", "SGLang check_env", 20)])
def test_a_real_scripts_output_imports_equal_to_the_capture_of_its_minute(
        cli: Cli, name: str, tool: str, least: int) -> None:
    result = cli("import", str(REPORTS / name), "--label", "paste")
    assert result.returncode == 0, result.stderr
    document = Store(cli.env["ENVSNAP_STORE"]).load("paste")
    assert document["meta"]["imported"]["sources"][name]["tool"] == tool
    agent = agent_collectors(REPORTS)
    prefixes = tuple(agent["env"]["facts"]["env_prefixes"])
    compared, wrong = mismatches(document["facts"], agent)
    # what the script prints beyond the variables a capture records (vLLM's CUDA matches
    # CUDAHOSTCXX; a capture's CUDA_ does not) is not a mismatch: the capture has no value
    unrecorded = [w for w in wrong if w.startswith("env.shell.")
                  and not w.split(".")[2].split(":")[0].startswith(prefixes)]
    assert [w for w in wrong if w not in unrecorded] == [] and compared >= least, wrong


@pytest.mark.parametrize("name", ["vllm_collect_env.txt", "sglang_check_env.txt"])
def test_a_real_scripts_output_against_the_capture_of_its_minute_is_no_drift(
        cli: Cli, name: str) -> None:
    """Nothing the paste says and the capture did not record reads as a change: vLLM's
    CUDAHOSTCXX is outside the capture's env prefixes, so unknown there, not removed."""
    save_capture(cli.env["ENVSNAP_STORE"], REPORTS, "mine")
    result = cli("diff", str(REPORTS / name), "mine")
    assert result.returncode == 0, result.stdout
    assert "no drift" in result.stdout and "removed" not in result.stdout


def test_both_scripts_and_nothing_else_agree_on_the_gpu_driver_and_torch(cli: Cli) -> None:
    """One snapshot of the two pastes: they must not contradict each other (a disagreement
    is refused) and they name the driver, torch and the GPU the capture names."""
    paths = [str(REPORTS / n) for n in ("vllm_collect_env.txt", "sglang_check_env.txt")]
    assert cli("import", *paths, "--label", "both").returncode == 0
    facts = Store(cli.env["ENVSNAP_STORE"]).load("both")["facts"]
    truth = {name: section["facts"] for name, section in agent_collectors(REPORTS).items()}
    assert facts["nvidia"]["driver"] == truth["nvidia"]["driver"] == "580.159.04"
    assert facts["cuda_nccl"]["torch"]["version"] == truth["cuda_nccl"]["torch"]["version"]
    assert [g["name"] for g in facts["nvidia"]["gpus"].values()] == ["NVIDIA H200"]


def test_a_fleet_of_captures_and_a_paste_agrees_on_what_all_record(cli: Cli,
                                                                    tmp_path: Path) -> None:
    store = cli.env["ENVSNAP_STORE"]
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    for host in ("n1", "n2"):
        save_capture(store, REPORTS, host)
        (fleet / f"{host}.yaml").write_bytes((Path(store) / f"{host}.yaml").read_bytes())
    (fleet / "n3.txt").write_bytes((REPORTS / "vllm_collect_env.txt").read_bytes())
    result = cli("diff", "--fleet", str(fleet))
    assert result.returncode == 0, result.stdout
    assert "CUDAHOSTCXX" not in result.stdout


def test_captures_with_other_env_prefixes_differ_in_them_not_in_what_one_left_out(
        cli: Cli) -> None:
    """`--env-prefix NCCL_` records less: CUDA_HOME is unknown to it, not removed."""
    def narrow(collectors: dict[str, Any]) -> None:
        facts = collectors["env"]["facts"]
        facts["env_prefixes"] = ["NCCL_"]
        facts["shell"] = {k: v for k, v in facts["shell"].items()
                          if k.startswith("NCCL_") or k in DEFAULT_NAMES}
    store = cli.env["ENVSNAP_STORE"]
    save_capture(store, REPORTS, "wide")
    save_capture(store, REPORTS, "narrow", edit=narrow)
    result = cli("diff", "wide", "narrow", "--json")
    paths = {tuple(f["path"]) for f in json.loads(result.stdout)["findings"]
             if f["section"] == "env"}
    assert paths == {("env_prefixes",)}, paths
