"""The NCCL benchmark story, recorded on the lent 2-GPU H200 machine by
tests/data/record_story.py (issue 16): a real 2-rank all-reduce bus-bandwidth benchmark
through `envsnap bench`, a pulled commit that sets NCCL_P2P_DISABLE=1, `bench` again,
`restore --rerun` and `bisect`. CI re-renders diff and report from the recorded snapshots
and checks the numbers and verdicts the GPU machine printed."""
from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml
from conftest import Cli
from helpers.folded import words
from helpers.paths import DATA

from envsnap.bench import stats

STORY = DATA / "h200x2-story"


def recorded(name: str) -> str:
    return (STORY / name).read_text()


def story() -> dict[str, Any]:
    return json.loads(recorded("story.json"))


def bench_of(label: str) -> dict[str, Any]:
    return dict(yaml.safe_load(recorded(f"snapshots/{label}.yaml"))["bench"])


def snapshot_file(label: str) -> str:
    return str(STORY / "snapshots" / f"{label}.yaml")


def culprit() -> tuple[str, str]:
    sha, subject = story()["pulled"][1]
    return sha, subject


def test_every_step_of_the_story_ran() -> None:
    log = json.loads(recorded("log.json"))
    assert {name: step["rc"] for name, step in log.items()} == {
        "bench good": 0, "bench bad": 0, "diff": 1, "diff --json": 1, "diff --markdown": 1,
        "report md": 0, "report json": 0, "restore": 0, "bisect": 1}
    assert story()["gpus"] == 2


def test_the_pulled_commit_cut_the_bus_bandwidth_tenfold() -> None:
    good, bad = bench_of("good"), bench_of("bad")
    assert good["command"] == bad["command"] and "--nproc-per-node 2" in good["command"]
    assert min(good["values"]) > 200 and max(bad["values"]) < 50, (good["values"],
                                                                   bad["values"])
    result = stats.compare(good["values"], bad["values"])
    verdict, _ = stats.decide(result)
    assert verdict == "regression" and len(good["values"]) == len(bad["values"]) == 3


@pytest.mark.parametrize("label", ["good", "bad"])
def test_telemetry_saw_both_gpus_busy_in_every_run(label: str) -> None:
    for run in bench_of(label)["runs"]:
        assert len(run["gpus"]) == 2, f"run {run['run']}: one reading per GPU"
        for bus, gpu in run["gpus"].items():
            busy = gpu["busy"]
            assert busy["samples"] >= 3, f"run {run['run']} {bus}: the all-reduce was seen"
            assert busy["sm_mhz"]["median"] > 1000, f"run {run['run']} {bus}: clocks up"


def test_diff_names_the_pull_and_the_commit_on_the_nccl_path(cli: Cli) -> None:
    sha, subject = culprit()
    result = cli("diff", snapshot_file("good"), snapshot_file("bad"))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "4 commits pulled into" in result.stdout
    verdict = " ".join(result.stdout.split("\n\n")[1].split("\n"))
    assert f"1 on a hot path: {sha[:7]} {subject} (touches " in verdict
    as_json = json.loads(cli("diff", snapshot_file("good"), snapshot_file("bad"),
                             "--json").stdout)
    (head,) = [f for f in as_json["findings"] if f["path"][-1] == "head"]
    hot = [c for c in head["detail"]["added"] if c["hot"]]
    assert [c["sha"] for c in hot] == [sha]


def test_report_vs_good_names_the_commit(cli: Cli) -> None:
    sha, subject = culprit()
    result = cli("report", snapshot_file("bad"), "--vs", snapshot_file("good"))
    assert result.returncode == 0, result.stderr
    assert sha[:7] in result.stdout and subject in result.stdout
    assert "2 x NVIDIA H200" in result.stdout and "NV18" in result.stdout


def test_restore_brought_the_number_back() -> None:
    text = recorded("restore.txt")
    assert "verified: checkouts and sitecustomize match the snapshot" in text
    (values,) = re.findall(r"values now: (.*)", text)
    after = [float(v) for v in values.split(", ")]
    good = bench_of("good")["values"]
    assert len(after) == 3 and all(abs(v / stats.summarise(good)["median"] - 1) < 0.05
                                   for v in after), (after, good)
    # compared with both ends: the runs restored from (bad) are found in the store
    assert "benchmark rerun: back to good: 290.5 vs good 288.1, bad 27.5 (3 runs vs 3 and 3)" \
        in text
    assert story()["head_after_restore"] == story()["good"][-1][0]


def test_bisect_found_the_commit_in_two_steps() -> None:
    sha, subject = culprit()
    text = recorded("bisect.txt")
    assert f"first bad commit: {sha} {subject}" in text
    assert "2 at 2 steps over 4 commits" in text and "9 runs in all" in text
    assert story()["head_after_bisect"] == story()["head_after_restore"], \
        "bisect put HEAD back where it found it"


# ---- the numbers lead (issue 14) ----------------------------------------------------------------

BUSBW_LINE = "benchmark: busbw 288.1 -> 27.5 GB/s (-90%, regression, 3 vs 3 runs)"


def test_diff_leads_with_the_bus_bandwidth_then_the_commit(cli: Cli) -> None:
    sha, subject = culprit()
    result = cli("diff", snapshot_file("good"), snapshot_file("bad"))
    assert result.returncode == 1, result.stderr   # the drift code, as before
    header, verdict = result.stdout.split("\n\n")[:2]
    first, *paragraph = verdict.split("\n")
    explanation = " ".join(paragraph)   # folded between words to fit 80 columns
    assert first == BUSBW_LINE
    assert explanation.startswith("code moved: 4 commits pulled into")
    assert f": {sha[:7]} {subject} (touches " in explanation
    assert explanation.endswith("the benchmark moved; the findings listed are the candidates.")
    assert "nothing else" not in result.stdout


def test_diff_json_has_a_typed_benchmark(cli: Cli) -> None:
    result = cli("diff", snapshot_file("good"), snapshot_file("bad"), "--json")
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert report["envsnap_diff"] == 1 and report["regression"] is True
    assert report["verdict"].split("\n")[0] == BUSBW_LINE
    benchmark = report["benchmark"]
    good, bad = bench_of("good"), bench_of("bad")
    assert benchmark["compared"] is True and benchmark["line"] == BUSBW_LINE
    assert (benchmark["name"], benchmark["unit"]) == ("busbw", "GB/s")
    assert benchmark["command"] == good["command"] and benchmark["metric"] == good["metric"]
    assert benchmark["before"]["median"] == pytest.approx(288.1)
    assert benchmark["after"]["median"] == pytest.approx(27.5)
    assert (benchmark["before"]["runs"], benchmark["after"]["runs"]) == (3, 3)
    assert benchmark["before"]["values"] == good["values"]
    assert benchmark["after"]["values"] == bad["values"]
    assert benchmark["change_pct"] == pytest.approx(-90.45, abs=0.01)
    assert benchmark["verdict"] == "regression" and benchmark["moved"] is True


def test_diff_markdown_leads_with_the_bus_bandwidth(cli: Cli) -> None:
    result = cli("diff", snapshot_file("good"), snapshot_file("bad"), "--markdown")
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert lines[2] == f"**Verdict:** {BUSBW_LINE}"
    assert lines[4].startswith("code moved: 4 commits pulled into")
    assert "nothing else" not in result.stdout


def test_report_vs_good_leads_with_the_bus_bandwidth(cli: Cli) -> None:
    result = cli("report", snapshot_file("bad"), "--vs", snapshot_file("good"))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    lead = f"**Compared with good: {BUSBW_LINE}**"
    assert lead in out and out.index(lead) < out.index("## Summary")
    compared = out[out.index("## Compared with good"):]
    assert f"**Verdict:** {BUSBW_LINE}" in compared
    assert compared.index(BUSBW_LINE) < compared.index("code moved: 4 commits pulled")
    html = cli("report", snapshot_file("bad"), "--vs", snapshot_file("good"), "--format",
               "html").stdout
    shown = BUSBW_LINE.replace(">", "&gt;")
    assert html.index(f"Compared with good: {shown}") < html.index("<h2>Summary</h2>")
    as_json = json.loads(cli("report", snapshot_file("bad"), "--vs", snapshot_file("good"),
                             "--format", "json").stdout)
    assert as_json["diff"]["benchmark"]["line"] == BUSBW_LINE


def test_fleet_diff_leads_with_each_hosts_bus_bandwidth(cli: Cli) -> None:
    result = cli("diff", "--fleet", snapshot_file("good"), snapshot_file("bad"),
                 snapshot_file("pre-restore-20261130-180827"))
    assert result.returncode == 1, result.stderr
    # folded to 80 columns: read as words
    assert words(result.stdout).startswith(
        "benchmark: busbw fleet median 157.8 GB/s over 2 hosts with runs; 1 host without runs "
        "good: 288.1 GB/s (+948% vs the rest, improvement, 3 vs 3 runs) "
        "bad: 27.5 GB/s (-90% vs the rest, regression, 3 vs 3 runs) fleet of 3 snapshots:")
    as_json = json.loads(cli("diff", "--fleet", snapshot_file("good"), snapshot_file("bad"),
                             "--json").stdout)
    assert as_json["envsnap_fleet"] == 1 and as_json["regression"] is True
    assert [(h["host"], h["verdict"]) for h in as_json["benchmark"]["hosts"]] == [
        ("good", "improvement"), ("bad", "regression")]


def test_fail_on_regression_exits_on_the_numbers_not_the_drift(cli: Cli) -> None:
    good, bad = snapshot_file("good"), snapshot_file("bad")
    assert cli("diff", good, bad, "--fail-on", "regression").returncode == 1
    # back to good: an improvement, with drift (HEAD moved): 0 for CI, 1 by default
    assert cli("diff", bad, good, "--fail-on", "regression").returncode == 0
    assert cli("diff", bad, good).returncode == 1
    assert cli("diff", bad, good, "--fail-on", "drift").returncode == 1
    fleet = cli("diff", "--fleet", good, bad, "--fail-on", "regression")
    assert fleet.returncode == 1, fleet.stderr
