"""The NCCL benchmark story, recorded on the lent 2-GPU H200 machine by
tests/data/record_story.py (issue 16): a real 2-rank all-reduce bus-bandwidth benchmark
through `envsnap bench`, a pulled commit that sets NCCL_P2P_DISABLE=1, `bench` again,
`restore --rerun` and `bisect`. CI re-renders diff and report from the recorded snapshots
and checks the numbers and verdicts the GPU machine printed."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import Cli

from envsnap.bench import stats

STORY = Path(__file__).parent / "data" / "h200x2-story"


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
    assert verdict == "regression" and len(good["values"]) == len(bad["values"]) == 4


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
    assert f"1 touches the NCCL path ({sha[:7]} {subject})" in result.stdout
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
    assert len(after) == 4 and all(abs(v / stats.summarise(good)["median"] - 1) < 0.05
                                   for v in after), (after, good)
    assert "benchmark rerun: same" in text
    assert story()["head_after_restore"] == story()["good"][-1][0]


def test_bisect_found_the_commit_in_two_steps() -> None:
    sha, subject = culprit()
    text = recorded("bisect.txt")
    assert f"first bad commit: {sha} {subject}" in text
    assert "12 runs in all" in text
    assert story()["head_after_bisect"] == story()["head_after_restore"], \
        "bisect put HEAD back where it found it"
