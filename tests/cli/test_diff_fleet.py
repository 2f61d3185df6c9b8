"""Fleet mode: N snapshots, the facts where hosts disagree with the majority."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from conftest import Cli
from helpers.diffdata import H200_BUS, edited, h200, save
from helpers.paths import ROOT

from envsnap.diff import rules
from envsnap.diff.fleet import fleet

SLOW_BUS = "00000000:15:00.0"
SLOW_GPU = "5"   # nvidia-smi's index of SLOW_BUS: rows name GPUs by index


def node(name: str, change: Any = None) -> dict[str, Any]:
    document = edited(h200(label=f"run1/{name}", host=name, gpus=8),
                      lambda d: d["facts"]["system"].update(hostname=name, boot_id=f"b-{name}"))
    return edited(document, change) if change else document


def narrow_link(document: dict[str, Any]) -> None:
    document["facts"]["nvidia"]["gpus"][SLOW_BUS].update(pcie_gen_current=4,
                                                         pcie_width_current=8)


def fleet_of(count: int, odd: dict[int, Any]) -> list[dict[str, Any]]:
    return [node(f"node{i:02d}", odd.get(i)) for i in range(1, count + 1)]


def test_one_narrow_link_on_one_node_of_32_stands_out() -> None:
    documents = fleet_of(32, {7: narrow_link})
    report = fleet(documents, [f"f{i}" for i in range(32)])
    assert report.hosts[6] == "node07" and report.drift
    paths = [d.path for d in report.disagreements]
    assert paths == [("gpus", SLOW_GPU, "pcie_width_current"),
                     ("gpus", SLOW_GPU, "pcie_gen_current")]
    width = report.disagreements[0]
    assert width.majority == 16 and len(width.majority_hosts) == 31 and width.total == 32
    assert width.others == [(8, ["node07"])] and not width.tie
    assert width.rank == rules.PCIE_WIDTH and "below its max x16" in width.why


def test_a_node_edited_behind_its_digest_still_stands_out() -> None:
    documents = fleet_of(4, {})
    documents[2]["facts"]["nvidia"]["gpus"][SLOW_BUS]["pcie_gen_current"] = 3  # digest kept
    report = fleet(documents, [f"f{i}" for i in range(4)])
    (odd,) = report.disagreements
    assert odd.path == ("gpus", SLOW_GPU, "pcie_gen_current") and odd.others == [(3, ["node03"])]


def test_every_link_of_one_node_narrowed_is_one_row() -> None:
    def all_narrow(document: dict[str, Any]) -> None:
        for record in document["facts"]["nvidia"]["gpus"].values():
            record["pcie_width_current"] = 8
    report = fleet(fleet_of(6, {4: all_narrow}), [f"f{i}" for i in range(6)])
    (row,) = report.disagreements
    assert row.path == ("gpus", "0-7 (all 8)", "pcie_width_current")
    assert row.others == [(8, ["node04"])] and row.why.startswith("GPUs 0-7 (all 8) PCIe")


def test_host_unique_facts_are_not_disagreements() -> None:
    documents = fleet_of(3, {})  # hostnames, boot ids and GPU uuids differ by nature
    for index, document in enumerate(documents):
        for gpu in document["facts"]["nvidia"]["gpus"].values():
            gpu["uuid"] = f"GPU-{index}"
    report = fleet([edited(d, lambda d: None) for d in documents], ["a", "b", "c"])
    assert report.disagreements == [] and not report.drift


def test_a_missing_gpu_is_one_disagreement_not_one_per_field() -> None:
    documents = fleet_of(4, {2: lambda d: d["facts"]["nvidia"]["gpus"].pop(H200_BUS)})
    report = fleet(documents, list("abcd"))
    gone = [d for d in report.disagreements if d.path == ("gpus", "0")]
    assert len(gone) == 1 and gone[0].others == [("(absent)", ["node02"])]
    assert gone[0].rank == rules.VERSIONS
    assert all(d.path[:2] != ("gpus", "0") or d.path == ("gpus", "0")
               for d in report.disagreements)


def test_a_different_driver_and_a_failed_collector() -> None:
    def failed(document: dict[str, Any]) -> None:
        document["meta"]["collectors"]["nvidia"]["error"] = "nvidia-smi hung"
        document["facts"]["nvidia"] = {}
    documents = fleet_of(5, {3: lambda d: d["facts"]["nvidia"].update(driver="595.1"),
                             5: failed})
    report = fleet(documents, list("abcde"))
    assert [(d.path, d.others) for d in report.disagreements] == [
        (("driver",), [("595.1", ["node03"])])]
    assert report.not_captured == [("nvidia", "node05", "nvidia-smi hung")]


def test_workers_compared_by_command_line_across_hosts() -> None:
    def workers(env: dict[str, str]) -> Any:
        def change(document: dict[str, Any]) -> None:
            pid = str(abs(hash(json.dumps(env))) % 30000 + 1000)
            document["facts"]["env"]["processes"] = {pid: {
                "cmdline": ["python3", "-m", "sglang.launch_server"], "ppid": 1,
                "start_epoch": float(pid), "env": env}}
        return change
    tuned = workers({"NCCL_PROTO": "LL"})
    documents = fleet_of(3, {1: tuned, 2: tuned, 3: workers({})})
    report = fleet(documents, list("abc"))
    (lost,) = report.disagreements
    assert lost.path[-1] == "NCCL_PROTO" and lost.others == [("(absent)", ["node03"])]


def test_fleet_cli_on_files_a_folder_and_a_store_group(cli: Cli, tmp_path: Path) -> None:
    cli.env["PYTHONPATH"] = str(ROOT)
    group = Path(cli.env["ENVSNAP_STORE"]) / "run1"
    group.mkdir(parents=True)
    files = [str(save(d, group / f"{d['meta']['host']}.yaml"))
             for d in fleet_of(4, {3: narrow_link})]
    for args in (files, [str(group)], ["run1"]):
        result = cli("diff", "--fleet", *args)
        assert result.returncode == 1, result.stderr
        assert result.stdout.startswith("fleet of 4 snapshots: 2 facts differ from the majority")
        assert "majority 16 (3 of 4); node03: 8" in result.stdout
    as_json = json.loads(cli("diff", "--json", "--fleet", *files).stdout)
    assert as_json["envsnap_fleet"] == 1 and as_json["hosts"][2] == "node03"
    assert as_json["disagreements"][0]["others"] == [{"value": 8, "hosts": ["node03"]}]
    markdown = cli("diff", "--markdown", "--fleet", *files).stdout
    assert "| rank | section | path | majority | differing hosts | why |" in markdown
    same = cli("diff", "--fleet", files[0], files[1])
    assert same.returncode == 0 and "every compared fact agrees" in same.stdout
    alone = cli("diff", "--fleet", files[0])
    assert alone.returncode == 0 and alone.stdout.startswith("nothing to compare: the fleet "
                                                             "holds one snapshot")


def test_fleet_cli_on_a_missing_folder_says_it_does_not_exist(cli: Cli, tmp_path: Path) -> None:
    missing = tmp_path / "run9"
    result = cli("diff", "--fleet", str(missing))
    assert result.returncode == 2
    assert result.stderr == (f"envsnap: error: {missing}: folder does not exist (nor a snapshot "
                             f"file, nor a label or fleet folder in the store "
                             f"{cli.env['ENVSNAP_STORE']})\n")


def test_a_two_host_fleet_names_both_hosts(cli: Cli, tmp_path: Path) -> None:
    """Two hosts have no majority: each value is shown with the host that has it."""
    files = [str(save(d, tmp_path / f"{d['meta']['host']}.yaml"))
             for d in fleet_of(2, {2: narrow_link})]
    result = cli("diff", "--fleet", *files)
    assert result.returncode == 1, result.stderr
    assert result.stdout.startswith("fleet of 2 snapshots: 2 facts differ between node01 and "
                                    "node02.")
    assert "pcie_width_current: no majority: node01: 16; node02: 8" in result.stdout
    assert "first" not in result.stdout
    row = json.loads(cli("diff", "--json", "--fleet", *files).stdout)["disagreements"][0]
    assert (row["tie"], row["majority_hosts"], row["others"]) == (
        True, ["node01"], [{"value": 8, "hosts": ["node02"]}])
    markdown = cli("diff", "--markdown", "--fleet", *files).stdout
    assert "| no majority: node01: 16 | node02: 8 |" in markdown


@pytest.mark.skipif(os.geteuid() == 0, reason="root lists a folder of mode 000 all the same")
def test_fleet_of_a_folder_that_cannot_be_listed_is_one_line(cli: Cli) -> None:
    folder = cli.cwd / "run1"
    folder.mkdir()
    folder.chmod(0)
    try:
        result = cli("diff", "--fleet", str(folder))
    finally:
        folder.chmod(0o700)
    assert result.returncode == 2
    assert result.stderr == (f"envsnap: error: --fleet {folder}: cannot list the folder: "
                             "Permission denied\n")
