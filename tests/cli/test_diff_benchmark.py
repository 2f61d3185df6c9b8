"""`envsnap diff` leads with the benchmark when both snapshots hold runs of one (issue 14): a
fresh pair made through the real `envsnap bench local`, where only the numbers moved."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from conftest import Cli
from helpers.folded import joined, paragraph
from helpers.paths import DATA

from envsnap.diff.benchmark import name_before, output_context, unit_after

METRIC = r"gen throughput \(token/s\): ([0-9.]+)"
# Prints its metric between log lines; `base` sets the level; the counter makes each run differ.
SCRIPT = """\
import pathlib, sys
here = pathlib.Path(sys.argv[0]).parent
counter = here / "counter"
n = int(counter.read_text()) if counter.exists() else 0
counter.write_text(str(n + 1))
base = float((here / "base").read_text())
print("loading model shards ...")
print("gen throughput (token/s): %.1f" % (base + (n % 4) * 0.7))
print("shutting down")
"""


def bench(cli: Cli, folder: Path, label: str, base: float, metric: str = METRIC) -> None:
    folder.mkdir(exist_ok=True)
    (folder / "bench_one.py").write_text(SCRIPT)
    (folder / "base").write_text(str(base))
    result = cli("bench", "local", "--cmd", f"{sys.executable} {folder / 'bench_one.py'}",
                 "--metric", metric, "--repeat", "4", "--label", label)
    assert result.returncode == 0, result.stderr


@pytest.fixture
def slower(cli: Cli, tmp_path: Path) -> Cli:
    """good at 91-93 tok/s, then bad at 60-62 tok/s: the same host, nothing else touched."""
    bench(cli, tmp_path / "b", "good", 91.0)
    bench(cli, tmp_path / "b", "bad", 60.0)
    return cli


def test_only_the_numbers_moved_and_the_diff_says_so_first(slower: Cli) -> None:
    result = slower("diff", "good", "bad")
    assert result.returncode == 0, result.stdout + result.stderr   # no fact drifted
    verdict = joined(paragraph(result.stdout, 1))   # the numbers, then the paragraph
    assert verdict.startswith("benchmark: gen throughput (token/s) 92.05 -> 61.05 "
                              "(-34%, regression, 4 vs 4 runs) the benchmark moved but no "
                              "recorded fact explains it")
    assert "look at what envsnap does not record" in verdict
    assert "nothing else" not in result.stdout and "no drift" not in result.stdout


def test_only_the_numbers_moved_in_json_and_markdown(slower: Cli) -> None:
    report = json.loads(slower("diff", "good", "bad", "--json").stdout)
    assert report["drift"] is False and report["regression"] is True
    benchmark = report["benchmark"]
    assert (benchmark["name"], benchmark["unit"]) == ("gen throughput (token/s)", None)
    assert benchmark["before"]["median"] == pytest.approx(92.05)
    assert benchmark["after"]["median"] == pytest.approx(61.05)
    assert benchmark["change_pct"] == pytest.approx(-33.68, abs=0.01)
    assert benchmark["verdict"] == "regression" and benchmark["moved"] is True
    assert benchmark["metric"] == METRIC and benchmark["command"].endswith("bench_one.py")
    markdown = slower("diff", "good", "bad", "--markdown").stdout.splitlines()
    assert markdown[2] == f"**Verdict:** {benchmark['line']}"
    assert markdown[4].startswith("the benchmark moved but no recorded fact explains it")


def test_fail_on_regression_fails_ci_on_the_numbers_alone(slower: Cli) -> None:
    assert slower("diff", "good", "bad").returncode == 0     # no drift: the default passes
    failed = slower("diff", "good", "bad", "--fail-on", "regression")
    assert failed.returncode == 1 and failed.stderr == ""
    assert slower("diff", "bad", "good", "--fail-on", "regression").returncode == 0


def test_same_numbers_say_same_and_no_drift(cli: Cli, tmp_path: Path) -> None:
    bench(cli, tmp_path / "b", "first", 91.0)
    (tmp_path / "b" / "counter").unlink()   # the same four values again
    bench(cli, tmp_path / "b", "second", 91.0)
    result = cli("diff", "first", "second")
    assert result.returncode == 0, result.stderr
    verdict = joined(paragraph(result.stdout, 1))
    assert verdict.startswith("benchmark: gen throughput (token/s) 92.05 -> 92.05 "
                              "(+0.0%, same, 4 vs 4 runs) no drift: every compared fact is "
                              "the same")


def test_a_different_metric_is_said_in_one_line_and_not_compared(cli: Cli,
                                                                 tmp_path: Path) -> None:
    bench(cli, tmp_path / "b", "good", 91.0)
    bench(cli, tmp_path / "b", "bad", 60.0, metric=r"throughput \(token/s\): ([0-9.]+)")
    result = cli("diff", "good", "bad")
    assert result.returncode == 0, result.stderr
    verdict = joined(paragraph(result.stdout, 1))
    first, rest = verdict.split(" no drift")
    assert first.startswith("benchmark: not compared: different metrics (good: ")
    assert "->" not in first and "regression" not in first
    assert rest.startswith(": every compared fact is the same")
    report = json.loads(cli("diff", "good", "bad", "--json").stdout)
    assert report["benchmark"]["compared"] is False and "verdict" not in report["benchmark"]
    ci = cli("diff", "good", "bad", "--fail-on", "regression")
    assert ci.returncode == 0 and "nothing can regress" in ci.stderr


def test_fail_on_takes_only_its_two_words(cli: Cli) -> None:
    result = cli("diff", "a", "b", "--fail-on", "slower")
    assert result.returncode == 2 and "invalid choice: 'slower'" in result.stderr
    assert "--fail-on" in cli("diff", "--help").stdout


# ---- what the output calls the number, and its unit ---------------------------------------------

@pytest.mark.parametrize("output, value, expected", [
    ("2140 all-reduces in 2.01 s\nbusbw 286.4 GB/s\n", 286.4, ("busbw", "GB/s")),
    ("EAGLE-3 2-step: 94.2 tok/s (verify 19.0 ms/cycle)\n", 94.2, ("EAGLE-3 2-step", "tok/s")),
    ("latency = 12.5ms\n", 12.5, ("latency", "ms")),
    ("p50 latency: 12.50 ms, p99 30 ms\n", 12.5, ("p50 latency", "ms")),
    ("throughput 91.7 on 2 GPUs\n", 91.7, ("throughput", None)),
    ("91.7\n", 91.7, (None, None)),
    ("speedup 1.93x\n", 1.93, ("speedup", "x")),
    ("accuracy 97.5%\n", 97.5, ("accuracy", "%")),
    ("nothing printed the value\n", 1.0, (None, None)),
])
def test_name_and_unit_come_from_the_line_that_printed_the_value(
        output: str, value: float, expected: tuple[str | None, str | None]) -> None:
    assert output_context({"runs": [{"output_tail": output, "value": value}]}) == expected


def test_a_long_prefix_keeps_its_last_words_and_odd_words_are_no_unit() -> None:
    assert name_before("[2026-11-30 17:08:40] rank 0 step 1000 all-reduce busbw ") == \
        "rank 0 step 1000 all-reduce busbw"
    assert unit_after(" GPUs") is None and unit_after(" (verify") is None
    assert unit_after(" GB/s.") == "GB/s"


def test_values_edited_past_float_range_are_one_line_not_a_crash(cli: Cli,
                                                                  tmp_path: Path) -> None:
    story = DATA / "h200x2-story" / "snapshots"
    document = yaml.safe_load((story / "bad.yaml").read_text())
    document["bench"]["values"] = [1e308, 1e308, 1e308, 1e308]   # a mean overflows
    edited = tmp_path / "edited.yaml"
    edited.write_text(yaml.safe_dump(document))
    for args in ((str(story / "good.yaml"), str(edited)), ("--fleet", str(story / "good.yaml"),
                                                           str(edited))):
        result = cli("diff", *args)
        assert result.returncode == 1 and result.stderr == "", result.stderr
        assert "benchmark: not compared: the values cannot be compared" in result.stdout
