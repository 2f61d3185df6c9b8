"""`envsnap diff` of an imported (partial) snapshot against a capture: what both know is
compared, what the paste does not carry is named once as not compared, never as removed.
The capture is the agent's own output of the same minute on the real H200 (tests/data/h200),
the paste that machine's collect_env, nvidia-smi -q -x and topo -m."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import Cli
from helpers.folded import item, words
from helpers.imported import DATA, H200, save_capture

PASTE = [H200 / "collect_env.txt", H200 / "smi_q.xml", H200 / "smi_topo_m.txt"]


def test_a_paste_of_the_same_machine_shows_no_drift_and_names_what_it_lacks(cli: Cli) -> None:
    save_capture(cli.env["ENVSNAP_STORE"], H200, "mine")
    assert cli("import", *map(str, PASTE), "--label", "theirs").returncode == 0
    result = cli("diff", "theirs", "mine")
    assert result.returncode == 0, result.stdout
    assert "no drift" in result.stdout
    said = words(result.stdout)
    assert "could not compare, not in a torch collect_env or nvidia-smi -q -x or nvidia-smi " \
           "topo -m output: " in said
    noted = said.split("output: ")[1].split(". ")[0].split(", ")
    assert {"env", "git", "python_env.customize", "nvidia.kernel_module"} <= set(noted)
    assert "unchanged: driver, CUDA, NCCL, torch, PCIe" in result.stdout
    both = json.loads(cli("diff", "mine", "theirs", "--json").stdout)
    assert both["findings"] == [] and both["drift"] is False


def test_an_unknown_is_never_a_removal_but_a_real_change_is_found(cli: Cli) -> None:
    def edit(collectors: dict[str, Any]) -> None:
        collectors["nvidia"]["facts"]["driver"] = "570.86.15"
        del collectors["python_env"]["facts"]["packages"]["triton"]   # one collect_env lists
    save_capture(cli.env["ENVSNAP_STORE"], H200, "mine", edit)
    assert cli("import", *map(str, PASTE), "--label", "theirs").returncode == 0
    result = json.loads(cli("diff", "theirs", "mine", "--json").stdout)
    found = {(f["section"], tuple(f["path"])): f for f in result["findings"]}
    assert found[("nvidia", ("driver",))]["after"] == "570.86.15"
    assert found[("python_env", ("packages", "triton"))]["kind"] == "removed"
    # the capture's 197 packages against the paste's 31: none of the others is "added",
    # the shell's variables and the repositories are not "removed"
    assert sorted(found) == [("nvidia", ("driver",)), ("python_env", ("packages", "triton"))]


def test_a_package_list_given_whole_finds_a_missing_package(cli: Cli) -> None:
    evidence = DATA / "h200-evidence"

    def edit(collectors: dict[str, Any]) -> None:
        del collectors["python_env"]["facts"]["packages"]["absl-py"]
    save_capture(cli.env["ENVSNAP_STORE"], evidence, "mine", edit)
    assert cli("import", str(evidence / "pip_list.json"), "--label", "theirs").returncode == 0
    result = cli("diff", "theirs", "mine", "--json")
    findings = json.loads(result.stdout)["findings"]
    assert [(f["path"], f["kind"]) for f in findings] == [(["packages", "absl-py"], "removed")]
    assert result.returncode == 1


def test_diff_reads_a_pasted_output_in_place_of_a_snapshot(cli: Cli, tmp_path: Path) -> None:
    save_capture(cli.env["ENVSNAP_STORE"], H200, "mine")
    result = cli("diff", str(H200 / "collect_env.txt"), "mine")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "could not compare, not in a torch collect_env output: " in words(result.stdout)
    assert sorted(p.name for p in Path(cli.env["ENVSNAP_STORE"]).iterdir()) == ["mine.yaml"]
    truncated = tmp_path / "truncated.txt"
    truncated.write_text("".join((H200 / "collect_env.txt").read_text()
                                 .splitlines(keepends=True)[:30]))
    cut = cli("diff", str(truncated), "mine")      # read as far as it goes
    assert cut.returncode == 0 and "unchanged: driver, CUDA, torch" in cut.stdout, cut.stdout


def test_diff_fleet_reads_a_folder_of_pasted_outputs(cli: Cli, tmp_path: Path) -> None:
    """Users' pastes beside a capture: the one user on another driver stands out; what a
    paste does not carry (the capture's env, git, kernel module...) is no disagreement."""
    folder = tmp_path / "reports"
    folder.mkdir()
    recorded = (H200 / "collect_env.txt").read_text()
    for user in ("alice", "carol", "dave"):
        (folder / f"{user}.txt").write_text(recorded)
    (folder / "bob.txt").write_text(recorded.replace("Nvidia driver version: 580.159.04",
                                                     "Nvidia driver version: 570.86.15"))
    save_capture(cli.env["ENVSNAP_STORE"], H200, "mine")
    result = cli("diff", "--fleet", str(folder), "mine", "--json")
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    rows = [(row["section"], row["path"], row["others"]) for row in report["disagreements"]]
    assert rows == [("nvidia", ["driver"], [{"value": "570.86.15",
                                             "hosts": [str(folder / "bob.txt")]}])]
    assert report["not_captured"] == []


def test_diff_fleet_names_what_pastes_could_not_compare_once_per_kind(cli: Cli,
                                                                      tmp_path: Path) -> None:
    """Three collect_env pastes (one of a torch that printed no CPU block) and a pip list
    beside a capture: one line a kind of paste, the members it holds, what none of them
    carries, and what one alone lacks; never a line a member."""
    folder = tmp_path / "reports"
    folder.mkdir()
    lines = (H200 / "collect_env.txt").read_text().splitlines(keepends=True)
    for user in ("alice", "carol"):
        (folder / f"{user}.txt").write_text("".join(lines))
    (folder / "bob.txt").write_text("".join(lines[:34] + lines[79:]))   # no `CPU:` block
    (folder / "erin.txt").write_text((DATA / "h200-evidence" / "pip_list.txt").read_text())
    save_capture(cli.env["ENVSNAP_STORE"], H200, "mine")
    text = cli("diff", "--fleet", str(folder), "mine")
    assert text.returncode == 0, text.stdout + text.stderr
    noted = [item(text.stdout, f"could not compare, not in a {kind}")
             for kind in ("torch collect_env", "pip list")]
    members = ", ".join(str(folder / f"{user}.txt") for user in ("alice", "bob", "carol"))
    assert len(noted) == 2 and noted[0].startswith(
        f"could not compare, not in a torch collect_env output (3: {members}): ")
    assert ", env, git, " in noted[0] and "system.{boot_id, cmdline, governors, hostname +4}" \
        in noted[0] and noted[0].endswith(f"; {folder / 'bob.txt'} also: system.{{cpu, numa}}")
    assert noted[1].startswith(f"could not compare, not in a pip list output (1: "
                               f"{folder / 'erin.txt'}): cuda_nccl.{{")
    kinds = json.loads(cli("diff", "--fleet", str(folder), "mine", "--json").stdout)["uncompared"]
    assert [(kind["why"], len(kind["members"])) for kind in kinds] == [
        ("not in a torch collect_env output", 3), ("not in a pip list output", 1)]
    assert {"env", "git", "system.boot_id", "python_env.customize"} <= set(kinds[0]["names"])
    assert kinds[0]["more"] == [{"member": str(folder / "bob.txt"),
                                 "names": ["system.cpu", "system.numa"]}]
    assert {"nvidia", "system", "env", "git"} <= set(kinds[1]["names"])


def test_a_cpu_list_written_as_lscpu_writes_it_is_no_drift(cli: Cli, tmp_path: Path) -> None:
    """A pasted lscpu prints a run of two CPUs as `0,1`; the kernel (and so a capture) as
    `0-1`: the same CPUs. A list naming other CPUs is still a change."""
    def edit(collectors: dict[str, Any]) -> None:
        collectors["system"]["facts"]["cpu"]["online"] = "0-1"
        collectors["system"]["facts"]["numa"]["0"]["cpulist"] = "0-1"
    save_capture(cli.env["ENVSNAP_STORE"], H200, "mine", edit)
    paste = tmp_path / "collect_env.txt"
    text = (H200 / "collect_env.txt").read_text()
    paste.write_text(text.replace("On-line CPU(s) list:                     0-15",
                                  "On-line CPU(s) list:                     0,1")
                     .replace("NUMA node0 CPU(s):                       0-15",
                              "NUMA node0 CPU(s):                       0,1"))
    assert cli("import", str(paste), "--label", "theirs").returncode == 0
    result = json.loads(cli("diff", "theirs", "mine", "--json").stdout)
    assert [f for f in result["findings"] if f["section"] == "system"] == []
    assert result["drift"] is False
    paste.write_text(text.replace("On-line CPU(s) list:                     0-15",
                                  "On-line CPU(s) list:                     0,2")
                     .replace("NUMA node0 CPU(s):                       0-15",
                              "NUMA node0 CPU(s):                       1,0"))
    assert cli("import", str(paste), "--label", "other").returncode == 0
    found = json.loads(cli("diff", "other", "mine", "--json").stdout)["findings"]
    assert [(f["path"], f["before"], f["after"]) for f in found if f["section"] == "system"] \
        == [(["cpu", "online"], "0,2", "0-1")]


def test_facts_an_older_agent_did_not_record_are_no_drift(cli: Cli) -> None:
    """A capture from before the collect_env facts (the recorded H200 one) against the
    same host with them: nothing added; a compiler that really changed is still found."""
    def newer(collectors: dict[str, Any]) -> None:
        facts = collectors["system"]["facts"]
        facts["toolchain"] = {"gcc": "(Ubuntu 13.3.0-6ubuntu2~24.04.1) 13.3.0", "clang": None,
                              "cmake": "version 4.4.3", "libc": "glibc-2.39"}
        facts["cpu"]["vendor_id"] = "GenuineIntel"
        collectors["cuda_nccl"]["facts"]["cudnn"]["libraries"] = {
            "/usr/lib/x86_64-linux-gnu/libcudnn.so.9.14.0": "9.14.0"}
    save_capture(cli.env["ENVSNAP_STORE"], H200, "old")
    save_capture(cli.env["ENVSNAP_STORE"], H200, "new", newer)
    result = json.loads(cli("diff", "old", "new", "--json").stdout)
    assert result["findings"] == [] and result["drift"] is False

    def upgraded(collectors: dict[str, Any]) -> None:
        newer(collectors)
        collectors["system"]["facts"]["toolchain"]["gcc"] = "(GCC) 14.2.0"
    save_capture(cli.env["ENVSNAP_STORE"], H200, "upgraded", upgraded)
    found = json.loads(cli("diff", "new", "upgraded", "--json").stdout)["findings"]
    assert [(f["path"], f["after"]) for f in found] == [(["toolchain", "gcc"], "(GCC) 14.2.0")]


def test_two_pastes_that_name_no_host_are_not_taken_for_one_host(cli: Cli) -> None:
    """Every import is host "imported": two reporters' pastes are not one machine, and a
    difference of boot time between them is no reboot."""
    assert cli("import", *map(str, PASTE), "--label", "first").returncode == 0
    assert cli("import", str(H200 / "collect_env.txt"), "--label", "second").returncode == 0
    result = cli("diff", "first", "second")
    assert "one host or two, not known: first and second name no hostname" in \
        words(result.stdout), result.stdout
    assert json.loads(cli("diff", "first", "second", "--json").stdout)["same_host"] is False


def test_gpus_of_a_cut_table_are_not_called_all_of_the_hosts(cli: Cli, tmp_path: Path) -> None:
    """A real nvidia-smi table cut short by its poster (tests/data/pastes/threads): it lists
    two GPUs and does not say how many the host has, so a change on both is "all 2 listed",
    never "all 2"; a capture, which counts them, says "all N"."""
    cut = DATA / "pastes" / "threads" / "pastes" / "smi_club-3090_1129.copy-button.txt"
    raised = tmp_path / "raised.txt"
    raised.write_text(cut.read_text().replace("/  250W", "/  300W"))
    assert cli("import", str(cut), "--label", "before").returncode == 0
    assert cli("import", str(raised), "--label", "after").returncode == 0
    result = cli("diff", "before", "after")
    assert "GPUs 0-1 (all 2 listed) " in words(result.stdout), result.stdout
    assert "(all 2)" not in result.stdout
    found = json.loads(cli("diff", "before", "after", "--json").stdout)["findings"]
    assert [f["path"] for f in found if f["path"][0] == "gpus"] == [
        ["gpus", "0-1 (all 2 listed)", "power_enforced_limit_w"]]
