"""The issue's check: for the H200 recordings, every fact `envsnap import` reads from the
pasted outputs equals what envsnap's agent recorded on the same machine in the same minute
(tests/data/h200: collect_env, nvidia-smi -q, -q -x, topo -m, the table; h200-evidence: pip
list, list --format=json, freeze, inspect and nvidia-smi again): 0 mismatches."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from conftest import Cli
from helpers.imported import DATA, mismatches

from envsnap.snapshot.store import Store

RECORDINGS = {
    "h200": ["collect_env.txt", "smi.txt", "smi_q.txt", "smi_q.xml", "smi_topo_m.txt"],
    "h200-evidence": ["pip_list.txt", "pip_list.json", "pip_freeze.txt", "pip_inspect.json",
                      "smi.txt", "smi_q.txt", "smi_q.xml", "smi_topo_m.txt"],
}
@pytest.mark.parametrize("folder,name", [(f, n) for f, names in RECORDINGS.items()
                                         for n in names])
def test_imported_facts_equal_the_agents_of_the_same_machine(cli: Cli, tmp_path: Path,
                                                            folder: str, name: str) -> None:
    path = DATA / folder / name
    if name == "pip_inspect.json":
        path = tmp_path / name
        path.write_bytes(gzip.decompress((DATA / folder / (name + ".gz")).read_bytes()))
    result = cli("import", str(path), "--label", "paste")
    assert result.returncode == 0, result.stderr
    document = Store(cli.env["ENVSNAP_STORE"]).load("paste")
    agent = json.loads((DATA / folder / "agent.json").read_text())["collectors"]
    compared, wrong = mismatches(document["facts"], agent)
    assert wrong == [] and compared >= 7, (compared, wrong)


def test_the_facts_the_issue_names_are_all_read_and_all_equal(cli: Cli) -> None:
    """collect_env, -q -x and topo -m of one host as one snapshot: driver, CUDA, NCCL,
    torch, GPUs and their bus ids, topology, packages, each read and each equal."""
    files = [DATA / "h200" / n for n in ("collect_env.txt", "smi_q.xml", "smi_topo_m.txt")]
    assert cli("import", *map(str, files), "--label", "host").returncode == 0
    facts = Store(cli.env["ENVSNAP_STORE"]).load("host")["facts"]
    agent = json.loads((DATA / "h200" / "agent.json").read_text())["collectors"]
    compared, wrong = mismatches(facts, agent)
    assert wrong == [] and compared >= 98
    truth = {name: agent[name]["facts"] for name in agent}
    assert facts["nvidia"]["driver"] == truth["nvidia"]["driver"] == "580.159.04"
    assert facts["nvidia"]["cuda_driver"] == truth["nvidia"]["cuda_driver"]
    assert list(facts["nvidia"]["gpus"]) == list(truth["nvidia"]["gpus"])   # bus ids
    assert facts["nvidia"]["topology"] == truth["nvidia"]["topology"]
    assert facts["cuda_nccl"]["cuda_toolkit"]["version"] == \
        truth["cuda_nccl"]["cuda_toolkit"]["version"]
    assert facts["cuda_nccl"]["nccl"]["wheels"]["nvidia-nccl-cu13"]["version"] == \
        truth["cuda_nccl"]["nccl"]["torch"]["version"] == "2.28.9"
    assert facts["cuda_nccl"]["torch"] == {k: truth["cuda_nccl"]["torch"][k]
                                           for k in ("version", "cuda", "debug")}
    # cuDNN: collect_env lists the system's libraries; the agent read the same version from
    # the system's header beside them
    versions = set(facts["cuda_nccl"]["cudnn"]["libraries"].values())
    assert versions == {"9.14.0"} <= set(truth["cuda_nccl"]["cudnn"]["headers"].values())


@pytest.mark.parametrize("folder", sorted(RECORDINGS))
def test_every_file_of_one_recording_makes_one_snapshot_equal_to_the_agents(
        cli: Cli, tmp_path: Path, folder: str) -> None:
    paths = []
    for name in RECORDINGS[folder]:
        path = DATA / folder / name
        if name == "pip_inspect.json":
            path = tmp_path / name
            path.write_bytes(gzip.decompress((DATA / folder / (name + ".gz")).read_bytes()))
        paths.append(str(path))
    result = cli("import", *paths, "--label", "all")
    assert result.returncode == 0, result.stderr
    document = Store(cli.env["ENVSNAP_STORE"]).load("all")
    agent = json.loads((DATA / folder / "agent.json").read_text())["collectors"]
    compared, wrong = mismatches(document["facts"], agent)
    assert wrong == [] and compared >= 90, (compared, wrong)
    assert len(document["meta"]["imported"]["sources"]) == len(paths)


def test_files_of_two_machines_are_refused_and_nothing_is_stored(cli: Cli) -> None:
    """h200 and h200-evidence are two boots of two lent VMs: their GPUs' UUIDs differ."""
    first, second = DATA / "h200" / "smi_q.txt", DATA / "h200-evidence" / "smi_q.xml"
    result = cli("import", str(first), str(second), "--label", "mixed")
    assert result.returncode == 4
    assert result.stderr == (
        f"envsnap: error: {second}: nvidia.gpus.00000000:00:06.0.uuid is "
        "'GPU-182dd796-462b-b296-a9bc-56e2cbd7d9bd' here but "
        f"'GPU-1f3810d9-1e14-3ad4-f9b1-abe2f054c8b3' in {first}: these files are not of one "
        "host at one time; import them apart\n")
    assert not Store(cli.env["ENVSNAP_STORE"]).exists("mixed")
