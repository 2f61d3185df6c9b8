"""The pairwise diff as a library, on snapshots built from the recorded H200 agent output."""
from __future__ import annotations

import sys
from typing import Any

import pytest
from helpers.diffdata import H200_BUS, edited, h200
from helpers.paths import ROOT

from envsnap.diff import rules
from envsnap.diff.compare import DiffOptions, diff
from envsnap.diff.findings import ADDED, MISSING, NOT_CAPTURED, REMOVED
from envsnap.errors import UsageError

GOOD = h200()


def worker(pid: int, start: float, env: dict[str, str], argv: list[str] | None = None) -> Any:
    return {"cmdline": argv or ["python3", "-m", "sglang.launch_server", "--tp", "8"],
            "exe": "/usr/bin/python3", "cwd": "/root", "ppid": 1, "matched": "pattern sglang",
            "start_since_boot_s": start, "start_epoch": 1e9 + start, "env": env, "limits": {}}


def with_workers(*workers: Any) -> Any:
    def change(document: dict[str, Any]) -> None:
        document["facts"]["env"]["processes"] = {str(w["pid"]): w["info"] for w in workers}
    return change


def test_a_snapshot_against_itself_has_no_findings() -> None:
    report = diff(GOOD, GOOD)
    assert report.findings == [] and not report.drift
    assert report.same_host
    assert report.unchanged[:6] == ["driver", "kernel module", "CUDA", "NCCL", "torch", "PCIe"]


def test_a_section_edited_behind_its_digest_is_still_compared() -> None:
    stale = h200()
    stale["facts"]["system"]["hostname"] = "elsewhere"
    report = diff(GOOD, stale)
    assert [f.path for f in report.findings] == [("hostname",)]
    assert report.notes == ["system differs although both recorded digests match: a "
                            "snapshot was edited after capture"]
    # a snapshot without digests has them computed, and needs no such note
    del stale["digests"]
    report = diff(GOOD, stale)
    assert [f.path for f in report.findings] == [("hostname",)] and report.notes == []


def test_pcie_width_drop_is_ranked_and_pcie_is_no_longer_unchanged() -> None:
    bad = edited(GOOD, lambda d: d["facts"]["nvidia"]["gpus"][H200_BUS].update(
        pcie_width_current=8))
    report = diff(GOOD, bad)
    assert [(f.path[-1], f.rank) for f in report.findings] == [("pcie_width_current",
                                                                rules.PCIE_WIDTH)]
    assert "PCIe" not in report.unchanged and "driver" in report.unchanged


def test_a_failed_collector_is_not_captured_never_removed() -> None:
    def fail(document: dict[str, Any]) -> None:
        document["meta"]["collectors"]["nvidia"]["error"] = "timed out after 20s"
        document["facts"]["nvidia"] = {}
    report = diff(GOOD, edited(GOOD, fail))
    assert [(f.section, f.kind) for f in report.findings] == [("nvidia", NOT_CAPTURED)]
    assert report.findings[0].after == "timed out after 20s"
    assert "driver" not in report.unchanged and "PCIe" not in report.unchanged


def test_a_collector_failed_in_both_is_a_note_not_drift() -> None:
    def fail(document: dict[str, Any]) -> None:
        document["meta"]["collectors"]["git"]["error"] = "boom"
    broken = edited(GOOD, fail)
    report = diff(broken, broken)
    assert not report.drift and report.notes == ["git was not captured in either snapshot (boom)"]


def test_different_hosts_are_allowed_and_told() -> None:
    other = edited(GOOD, lambda d: d["facts"]["system"].update(hostname="node2", boot_id="x"))
    report = diff(GOOD, other)
    assert not report.same_host and report.b.name == "node2"
    boot = [f for f in report.findings if f.path == ("boot_id",)]
    assert boot and boot[0].rank < rules.PERFORMANCE  # not "rebooted": another machine


def test_a_failed_system_collector_does_not_make_another_host() -> None:
    def fail(document: dict[str, Any]) -> None:
        document["meta"]["collectors"]["system"]["error"] = "boom"
        document["facts"]["system"] = {}
    assert diff(GOOD, edited(GOOD, fail)).same_host


def test_volatile_readings_only_with_all() -> None:
    def throttle(document: dict[str, Any]) -> None:
        reading = document["volatile"]["nvidia"]["gpus"][H200_BUS]
        reading.update(clock_event_reasons=["sw_power_cap"], clock_event_reasons_mask="0x4",
                       temperature_c=80)
    hot = edited(GOOD, throttle)
    assert diff(GOOD, hot).findings == []
    readings = diff(GOOD, hot, DiffOptions(include_volatile=True))
    found = readings.findings
    assert [f.path[-1] for f in found] == ["clock_event_reasons", "temperature_c"]
    assert not readings.drift, "readings are shown, but they are not drift"
    assert found[0].rank == rules.THROTTLED and found[0].volatile


def test_workers_are_matched_by_command_line_not_pid() -> None:
    env = {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"}
    before = edited(GOOD, with_workers({"pid": 4000, "info": worker(4000, 10.0, env)}))
    restarted = edited(GOOD, with_workers({"pid": 9100, "info": worker(9100, 99.0, env)}))
    assert diff(before, restarted).findings == []
    lost = edited(GOOD, with_workers({"pid": 9100, "info": worker(9100, 99.0,
                                                                  {"NCCL_ALGO": "Ring"})}))
    (finding,) = diff(before, lost).findings
    assert finding.kind == REMOVED and finding.path[-1] == "NCCL_PROTO"
    assert finding.detail["pid_after"] == "9100" and finding.rank == rules.WORKER_ENV


def test_a_new_worker_lacking_the_shells_tuning_is_flagged() -> None:
    shell = dict(GOOD["facts"]["env"]["shell"], NCCL_PROTO="LL", EDITOR="vi")
    inherited = {k: v for k, v in shell.items() if k not in ("NCCL_PROTO", "EDITOR")}

    def started(document: dict[str, Any]) -> None:
        document["facts"]["env"]["shell"] = shell
        with_workers({"pid": 77, "info": worker(77, 1.0, inherited)})(document)
    before = edited(GOOD, lambda d: d["facts"]["env"].update(shell=shell))
    missing, new = diff(before, edited(GOOD, started)).findings
    assert (missing.kind, missing.path[-1], new.kind) == (MISSING, "NCCL_PROTO", ADDED)
    assert missing.why == "NCCL_PROTO=LL set in the shell but missing in new worker 77"
    assert missing.rank == rules.WORKER_ENV


def test_workers_sharing_a_command_line_pair_up_in_start_order() -> None:
    tp = [{"pid": 100 + i, "info": worker(100 + i, float(i), {"CUDA_VISIBLE_DEVICES": str(i)})}
          for i in range(4)]
    moved = [{"pid": 900 - i, "info": worker(900 - i, 50.0 + i,
                                             {"CUDA_VISIBLE_DEVICES": str(i)})}
             for i in range(4)]
    assert diff(edited(GOOD, with_workers(*tp)), edited(GOOD, with_workers(*moved))).findings == []


def test_torchrun_workers_are_matched_by_rank_whatever_their_start_order() -> None:
    def ranks(pids: list[int], lost: int | None = None) -> Any:
        return with_workers(*[{"pid": pid, "info": worker(
            pid, 7.0, {"RANK": str(rank), "NCCL_NVLS_ENABLE": "0"} if rank != lost
            else {"RANK": str(rank)}, ["python3", "-u", "allreduce.py"])}
            for rank, pid in enumerate(pids)])
    before = edited(GOOD, ranks([300, 301, 302, 303]))
    assert diff(before, edited(GOOD, ranks([812, 805, 830, 801]))).findings == []
    (finding,) = diff(before, edited(GOOD, ranks([812, 805, 830, 801], lost=2))).findings
    assert finding.path[-3:] == ("python3 -u allreduce.py [rank 2]", "env", "NCCL_NVLS_ENABLE")
    assert finding.detail["pid_after"] == "830"
    assert finding.why == "NCCL_NVLS_ENABLE=0 missing in worker 830 (rank 2)"


def test_a_second_worker_of_one_rank_keeps_its_rank() -> None:
    # Two jobs' rank-0 workers share a key, numbered "#2": the rank still reaches the why.
    argv = ["python3", "-u", "allreduce.py"]
    tuned = {"RANK": "0", "NCCL_NVLS_ENABLE": "0"}
    before = edited(GOOD, with_workers({"pid": 10, "info": worker(10, 1.0, tuned, argv)},
                                       {"pid": 20, "info": worker(20, 2.0, tuned, argv)}))
    after = edited(GOOD, with_workers({"pid": 11, "info": worker(11, 1.0, tuned, argv)},
                                      {"pid": 21, "info": worker(21, 2.0, {"RANK": "0"}, argv)}))
    (finding,) = diff(before, after).findings
    assert finding.path[1] == "python3 -u allreduce.py [rank 0] #2"
    assert finding.detail["rank"] == "0"
    assert finding.why == "NCCL_NVLS_ENABLE=0 missing in worker 21 (rank 0)"


def test_a_worker_fact_is_named_after_its_key_whatever_dots_the_key_holds() -> None:
    argv = ["python3", "-m", "sglang.launch_server", "--model-path", "/models/DeepSeek-V3.1"]
    before = edited(GOOD, with_workers({"pid": 5, "info": worker(5, 1.0, {}, argv)}))
    moved = worker(6, 1.0, {}, argv)
    moved["cwd"] = "/srv"
    (finding,) = diff(before, edited(GOOD, with_workers({"pid": 6, "info": moved}))).findings
    assert finding.why == "worker 6 cwd /root -> /srv"


def test_unreadable_worker_env_is_not_captured() -> None:
    env = {"NCCL_PROTO": "LL"}
    before = edited(GOOD, with_workers({"pid": 1, "info": worker(1, 1.0, env)}))
    after = edited(GOOD, with_workers({"pid": 2, "info": worker(2, 1.0,
                                                                {"error": "permission denied"})}))
    (finding,) = diff(before, after).findings
    assert finding.kind == NOT_CAPTURED and finding.after == "permission denied"


def git_facts(stashes: dict[str, Any], head: str = "a" * 40) -> Any:
    def change(document: dict[str, Any]) -> None:
        document["facts"]["git"] = {"repos": {"/r": {
            "head": head, "branch": "main", "history": [], "reflog": [], "stashes": stashes,
            "uncommitted": {"dirty": False, "digest": "0"}}}}
    return change


def stash(sha: str, message: str) -> dict[str, Any]:
    return {"sha": sha * 40, "message": message, "base": "a" * 40, "has_untracked": False}


def test_a_new_stash_renumbering_the_others_is_one_finding() -> None:
    before = edited(GOOD, git_facts({"stash@{0}": stash("1", "On main: old")}))
    after = edited(GOOD, git_facts({"stash@{0}": stash("2", "On main: new"),
                                    "stash@{1}": stash("1", "On main: old")}))
    (finding,) = diff(before, after).findings
    assert finding.kind == ADDED and finding.why == "stash added in /r: On main: new"


def test_an_unreadable_repo_is_not_captured() -> None:
    before = edited(GOOD, git_facts({}))
    after = edited(GOOD, lambda d: d["facts"].update(git={"repos": {"/r": {
        "error": "not a git repository: /r"}}}))
    (finding,) = diff(before, after).findings
    assert finding.kind == NOT_CAPTURED and "not a git repository" in finding.why


def test_head_back_where_it_was_after_moving_is_a_minor_finding() -> None:
    def moved(document: dict[str, Any]) -> None:
        git_facts({})(document)
        document["facts"]["git"]["repos"]["/r"]["reflog"] = [
            {"old": "b" * 40, "new": "a" * 40, "time": 2, "message": "checkout: back"},
            {"old": "a" * 40, "new": "b" * 40, "time": 1, "message": "checkout: away"}]
    (finding,) = diff(edited(GOOD, git_facts({})), edited(GOOD, moved)).findings
    assert finding.path[-1] == "reflog" and finding.rank < rules.PERFORMANCE
    assert "moved and came back: 2 reflog moves" in finding.why


def test_sections_can_be_chosen_and_unknown_ones_are_refused() -> None:
    bad = edited(GOOD, lambda d: (d["facts"]["env"]["shell"].update(NCCL_ALGO="Tree"),
                                  d["facts"]["nvidia"].update(driver="595.1")))
    report = diff(GOOD, bad, DiffOptions(sections=("env",)))
    assert [f.section for f in report.findings] == ["env"] and report.sections == ["env"]
    with pytest.raises(UsageError, match="unknown section gpu"):
        diff(GOOD, bad, DiffOptions(sections=("gpu",)))


def test_configured_hot_paths_come_from_the_snapshots() -> None:
    def pulled(head: str, extra: list[dict[str, Any]]) -> Any:
        def change(document: dict[str, Any]) -> None:
            git_facts({}, head)(document)
            document["meta"]["config"]["hot_paths"] = ["*/engine.py"]
            base = {"sha": "a" * 40, "parents": [], "subject": "base", "files": []}
            document["facts"]["git"]["repos"]["/r"]["history"] = extra + [base]
        return change
    tip = {"sha": "c" * 40, "parents": ["a" * 40], "subject": "Tune engine",
           "files": ["srt/entrypoints/engine.py"]}
    report = diff(edited(GOOD, pulled("a" * 40, [])), edited(GOOD, pulled("c" * 40, [tip])))
    head = report.findings[0]
    assert head.rank == rules.HOT_CONFIGURED and "configured hot path" in head.why


def test_the_bench_pair_has_exactly_its_ten_differences() -> None:
    """bench/bench_diff.py's documents: shifted lists, new pids and moved readings are noise."""
    sys.path.insert(0, str(ROOT / "bench"))
    import bench_diff

    good, bad = bench_diff.the_pair()
    report = diff(good, bad)
    assert len(report.findings) == bench_diff.EXPECTED == 10
    assert report.findings[0].rank == rules.HOT and len(report.findings[0].detail["added"]) == 3


# ---- the same change on several GPUs ---------------------------------------------------------

EIGHT = h200(gpus=8)


def on_gpus(indexes: list[int], **values: Any) -> Any:
    def change(document: dict[str, Any]) -> None:
        for record in document["facts"]["nvidia"]["gpus"].values():
            if record["index"] in indexes:
                record.update(values)
    return change


def test_a_change_on_every_gpu_is_one_finding_naming_them() -> None:
    report = diff(EIGHT, edited(EIGHT, on_gpus(list(range(8)), pcie_width_current=8)))
    (finding,) = report.findings
    assert finding.path == ("gpus", "0-7 (all 8)", "pcie_width_current")
    assert finding.rank == rules.PCIE_WIDTH and finding.why.startswith("GPUs 0-7 (all 8) PCIe")
    assert finding.detail["gpus"] == sorted(EIGHT["facts"]["nvidia"]["gpus"])
    assert "PCIe" not in report.unchanged


def test_some_gpus_alike_and_one_apart() -> None:
    def change(document: dict[str, Any]) -> None:
        on_gpus([0, 3, 4], power_limit_w=450.0)(document)
        on_gpus([6], power_limit_w=300.0)(document)
    found = diff(EIGHT, edited(EIGHT, change)).findings
    assert [(f.path[1], f.after) for f in found] == [("0,3-4 (3 of 8)", 450.0), ("6", 300.0)]
    assert found[1].detail["gpus"] == ["00000000:16:00.0"], "the bus id stays in detail"
    assert found[1].why.startswith("GPU 6 ") and found[1].where == "gpus[6].power_limit_w"


def test_readings_alike_on_every_gpu_are_one_row() -> None:
    def busy(document: dict[str, Any]) -> None:
        for reading in document["volatile"]["nvidia"]["gpus"].values():
            reading["utilization_gpu_pct"] = 97
    report = diff(EIGHT, edited(EIGHT, busy), DiffOptions(include_volatile=True))
    (finding,) = report.findings
    assert finding.path == ("gpus", "0-7 (all 8)", "utilization_gpu_pct") and finding.volatile
