"""Captures recorded on lent GPU machines by tests/data/record_allreduce.py (issue 6), one
folder per machine: tests/data/h200x<N>/. Each is checked fact by fact against nvidia-smi's
own outputs from the same minute, its all-reduce workers' env is read back through the CLI,
and its before/during captures must differ in readings only. A recording of a machine with
more GPUs, dropped in as tests/data/h200x8/, is covered by these same tests."""
from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import Cli
from helpers.paths import DATA
from helpers.smicheck import NOT_IN_SMI, check_links, crosscheck

from envsnap.agent import nvidia, smi

RECORDINGS = sorted(folder for folder in (DATA).glob("h200x*")
                    if (folder / "smi_L.txt").exists())  # not h200x2-story/: that is a story
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                 "NVSHMEM_DISABLE_NVLS": "1"}


def test_there_is_a_recording() -> None:
    assert RECORDINGS, "tests/data/h200x*/ went missing"


@pytest.fixture(params=RECORDINGS, ids=lambda folder: folder.name)
def recording(request: pytest.FixtureRequest) -> Path:
    return Path(request.param)


def snapshot(folder: Path, label: str) -> dict[str, Any]:
    return yaml.safe_load((folder / "snapshots" / f"{label}.yaml").read_text())


def check(folder: Path, nvidia_facts: dict[str, Any]) -> dict[str, Any]:
    query = smi.parse_query((folder / "smi_query.csv").read_text(),
                            json.loads((folder / "smi_query_fields.json").read_text()))
    return crosscheck(nvidia_facts, (folder / "smi_q.xml").read_text(),
                      smi.parse_topology((folder / "smi_topo_m.txt").read_text()), query,
                      (folder / "smi_nvlink_s.txt").read_text())


def gpu_count(folder: Path) -> int:
    return len((folder / "smi_L.txt").read_text().splitlines())


# ---- step 1: every per-GPU fact against nvidia-smi -------------------------------------------

def test_every_gpu_fact_agrees_with_nvidia_smi(recording: Path) -> None:
    facts = snapshot(recording, "before")["facts"]["nvidia"]
    report = check(recording, facts)
    assert report["mismatches"] == []
    gpus = gpu_count(recording)
    assert report["gpus"] == gpus == len(facts["gpus"]) == facts["gpu_count"]
    assert report["pairs"] == gpus * (gpus - 1), "every GPU pair of topo -m was compared"
    assert set(report["unchecked"]) <= set(NOT_IN_SMI)
    assert report == json.loads((recording / "crosscheck.json").read_text()), \
        "CI reaches the verdict the GPU machine reached"


def test_a_lower_pcie_link_or_another_topology_is_caught(recording: Path) -> None:
    facts = snapshot(recording, "before")["facts"]["nvidia"]
    slower = copy.deepcopy(facts)
    bus = sorted(slower["gpus"])[-1]
    slower["gpus"][bus]["pcie_gen_current"] = 3
    slower["gpus"][bus]["numa_affinity"] = "7"
    slower["topology"].setdefault(bus, {})[bus] = "NV18"  # a pair topo -m does not list
    mismatches = check(recording, slower)["mismatches"]
    assert f"{bus} pcie_gen_current: snapshot 3, nvidia-smi '5'" in mismatches
    assert any(m.startswith(f"{bus} numa_affinity: snapshot '7'") for m in mismatches)
    assert f"link {bus} -> {bus}: snapshot 'NV18', nvidia-smi None" in mismatches


def test_links_are_compared_pair_by_pair() -> None:
    topo = smi.parse_topology(
        "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
        "GPU0\t X \tNV18\t0-55\t0\t\tN/A\nGPU1\tNV18\t X \t0-55\t0\t\tN/A\n\nLegend:\n")
    report: dict[str, Any] = {"mismatches": [], "pairs": 0}
    check_links(["00000000:18:00.0", "00000000:2A:00.0"],
                {"00000000:18:00.0": {"00000000:2A:00.0": "NV18"},
                 "00000000:2A:00.0": {"00000000:18:00.0": "SYS"}}, topo["links"], report)
    assert report["pairs"] == 2
    assert report["mismatches"] == [
        "link 00000000:2A:00.0 -> 00000000:18:00.0: snapshot 'SYS', nvidia-smi 'NV18'"]


def test_nvml_as_recorded_parses_to_the_captured_gpus(recording: Path) -> None:
    facts, _ = nvidia.parse_nvml(json.loads((recording / "nvml_raw.json").read_text()))
    captured = snapshot(recording, "before")["facts"]["nvidia"]
    assert facts["gpus"] == captured["gpus"] and facts["topology"] == captured["topology"]


# ---- step 2: the all-reduce workers' env ------------------------------------------------------

def test_each_all_reduce_worker_env_is_in_the_snapshot(recording: Path, cli: Cli) -> None:
    results = json.loads((recording / "allreduce.json").read_text())
    assert len(results) == gpu_count(recording)
    assert all(r["wrong_elements"] == 0 and r["rounds"] > 0 for r in results)
    shown = cli("show", str(recording / "snapshots" / "during-procs.yaml"), "--json")
    assert shown.returncode == 0, shown.stderr
    processes = json.loads(shown.stdout)["facts"]["env"]["processes"].values()
    workers = [p for p in processes if "RANK" in p["env"]]
    assert sorted(int(w["env"]["RANK"]) for w in workers) == list(range(len(results)))
    for worker in workers:
        assert MULTICAST_OFF.items() <= worker["env"].items()
        assert worker["env"]["WORLD_SIZE"] == str(len(results))
        assert worker["cmdline"][-2].endswith("allreduce_worker.py")
    (launcher,) = [p for p in processes if "RANK" not in p["env"]]
    assert "torch.distributed.run" in launcher["cmdline"]


def test_two_captures_of_running_workers_pair_them_up_by_rank(recording: Path,
                                                              cli: Cli) -> None:
    folder = recording / "snapshots"
    result = cli("diff", str(folder / "during-procs.yaml"), str(folder / "during-procs-again.yaml"))
    assert result.returncode == 0 and "no drift" in result.stdout, result.stdout


# ---- step 4: before and during differ in readings only -------------------------------------

def test_before_and_during_the_all_reduce_differ_in_readings_only(recording: Path,
                                                                  cli: Cli) -> None:
    before, during = (str(recording / "snapshots" / f"{label}.yaml")
                      for label in ("before", "during"))
    plain = cli("diff", before, during)
    assert plain.returncode == 0 and "no drift" in plain.stdout, plain.stdout
    full = cli("diff", before, during, "--all", "--json")
    assert full.returncode == 0, full.stdout
    document = json.loads(full.stdout)
    assert document["findings"] and not document["drift"]
    assert all(f["volatile"] for f in document["findings"])
    busy = {f["path"][1]: f["after"] for f in document["findings"]
            if f["path"][-1] == "utilization_gpu_pct"}
    assert len(busy) == gpu_count(recording) and min(busy.values()) > 50, \
        "the second capture was taken while every GPU all-reduced"


# ---- on several GPUs: pairs, NVLink counts, merged rows named by index ------------------------

MULTI = [folder for folder in RECORDINGS if gpu_count(folder) > 1]


@pytest.mark.parametrize("folder", MULTI, ids=lambda folder: folder.name)
def test_each_nvlink_pair_is_the_links_both_gpus_have_up(folder: Path) -> None:
    """topo -m's NV<n> between two GPUs, NVML's pair view and nvlink -s's count agree."""
    facts = snapshot(folder, "before")["facts"]["nvidia"]
    links = smi.parse_topology((folder / "smi_topo_m.txt").read_text())["links"]
    pairs = [(bus, peer, link) for bus, peers in facts["topology"].items()
             for peer, link in peers.items()]
    assert len(pairs) == gpu_count(folder) * (gpu_count(folder) - 1)
    by_index = {f"GPU{gpu['index']}": bus for bus, gpu in facts["gpus"].items()}
    for index, peers in links.items():
        for peer, link in peers.items():
            assert facts["topology"][by_index[index]][by_index[peer]] == link
    if gpu_count(folder) == 2:  # a direct pair: every active link joins the two
        (first, second, link) = pairs[0]
        assert link.startswith("NV")
        assert facts["gpus"][first]["nvlink_active"] == int(link[2:]) == \
            facts["gpus"][second]["nvlink_active"]


@pytest.mark.parametrize("folder", MULTI, ids=lambda folder: folder.name)
def test_a_real_multi_gpu_diff_merges_alike_rows_and_names_gpus_by_index(folder: Path,
                                                                        cli: Cli) -> None:
    before, during = (str(folder / "snapshots" / f"{label}.yaml") for label in ("before", "during"))
    shown = cli("diff", before, during, "--all", "--json")
    findings = json.loads(shown.stdout)["findings"]
    gpus = snapshot(folder, "before")["facts"]["nvidia"]["gpus"]
    everyone = f"0-{gpu_count(folder) - 1} (all {gpu_count(folder)})"
    per_gpu = [f for f in findings if f["section"] == "nvidia" and f["path"][0] == "gpus"]
    assert any(f["path"][1] == everyone for f in per_gpu), "clocks rose alike on every GPU"
    names = {f["path"][1] for f in per_gpu}
    assert not names & set(gpus), "no row is named by bus id"
    for finding in per_gpu:
        named = finding["path"][1]
        if named != everyone:
            (bus,) = finding["detail"]["gpus"]
            assert str(gpus[bus]["index"]) == named, "the bus id is kept in detail"
    text = cli("diff", before, during, "--all").stdout
    assert f"gpus[{everyone}].clock_sm_mhz" in text and "gpus[1].power_draw_w" in text
