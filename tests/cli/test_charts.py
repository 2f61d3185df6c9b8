"""Charts (report/charts.py) through the real CLI: the html report and the bundle draw every run
and every sample of the recorded 2 x H200 story; bisect --plot draws every tested commit; bench
and bisect show a live status line on a terminal only, and a sparkline of their values."""
from __future__ import annotations

import re
import statistics
import sys
import tarfile
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, Cli
from helpers.benchscript import write_bench
from helpers.bisecthistory import SLOW, History, bisect, regression_at
from helpers.htmlcharts import charts_in, elements, of_class
from helpers.terminal import stderr_at_a_terminal

from envsnap.cli.progress import Tally, status_text
from envsnap.report.charts import phases
from envsnap.text import sparkline

STORY = ROOT / "tests" / "data" / "h200x2-story" / "snapshots"


def median_run(record: dict) -> dict:
    """The run charted: the nearest the median, the earlier of two as near."""
    middle = statistics.median(record["values"])
    return min(record["runs"], key=lambda run: abs(run["value"] - middle))


def expected_story() -> dict[str, dict]:
    return {side: yaml.safe_load((STORY / f"{side}.yaml").read_text())["bench"]
            for side in ("good", "bad")}


def check_story_charts(charts: dict[str, list[tuple[str, dict[str, str]]]]) -> None:
    records = expected_story()
    runs = charts["runs"]
    points = of_class(runs, "circle", "run")
    for side, record in records.items():
        mine = [float(p["data-value"]) for p in points if p["data-side"] == side]
        assert mine == record["values"]
        medians = [m for m in of_class(runs, "line", "median") if m["data-side"] == side]
        assert len(medians) == 1
        assert float(medians[0]["data-value"]) == pytest.approx(record["summary"]["median"])
        run = median_run(record)
        for bus, columns in run["samples"].items():
            gpu = f"GPU{record['telemetry']['gpus'][bus]['index']}"
            inside = charts[f"telemetry-{side}-{gpu}"]
            for key in ("sm_mhz", "power_w", "util_gpu_pct"):
                lines = [p for p in of_class(inside, "polyline", "series")
                         if p["data-metric"] == key]
                drawn = sum(len(p["points"].split()) for p in lines)
                assert drawn == sum(int(p["data-count"]) for p in lines)
                assert drawn == sum(v is not None for v in columns[key])
            busy = of_class(inside, "rect", "busy")
            busy_samples = [t for t, u in zip(columns["t"], columns["util_gpu_pct"])
                            if u is not None and u >= 50]
            panels = 4 if run.get("buffered", {}).get(bus) else 3   # + the driver's power
            assert busy and len(busy) % panels == 0   # each phase shaded in every panel
            for t in busy_samples:
                assert any(float(r["data-start"]) <= t <= float(r["data-end"]) for r in busy)
    assert len(charts) == 1 + 2 * 2       # the runs, then 2 GPUs of each snapshot


def test_the_html_report_draws_every_run_and_sample(cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    result = cli("report", str(STORY / "bad.yaml"), "--vs", str(STORY / "good.yaml"),
                 "--format", "html", "-o", str(out))
    assert result.returncode == 0, result.stderr
    page = out.read_text()
    check_story_charts(charts_in(page))
    # titled by the number's name as the runs printed it and the diff says it ("benchmark:
    # busbw ... GB/s"), never by the regex that found it (`busbw ([0-9.]+) GB/s`)
    (runs,) = re.findall(r'<svg [^>]*data-chart="runs".*?</svg>', page)
    assert "<title>busbw (GB/s): every run</title>" in runs
    assert ">busbw (GB/s) per run (higher is better)</text>" in runs and "[0-9.]" not in runs
    assert "<script" not in page
    assert not re.search(r"(src|href)=\"https?:", page)


def test_the_bundle_holds_each_chart_as_svg(cli: Cli, tmp_path: Path) -> None:
    bundle = tmp_path / "b.tar.gz"
    result = cli("report", str(STORY / "bad.yaml"), "--vs", str(STORY / "good.yaml"),
                 "--bundle", str(bundle))
    assert result.returncode == 0, result.stderr
    with tarfile.open(bundle) as tar:
        svgs = {member.name.split("/charts/")[1]: tar.extractfile(member).read().decode()
                for member in tar.getmembers() if "/charts/" in member.name}
    assert sorted(svgs) == ["runs.svg", "telemetry-bad-GPU0.svg", "telemetry-bad-GPU1.svg",
                            "telemetry-good-GPU0.svg", "telemetry-good-GPU1.svg"]
    assert all(text.startswith("<?xml") for text in svgs.values())
    check_story_charts({name: inside for text in svgs.values()
                        for name, inside in charts_in(text).items()})


def test_a_phase_shorter_than_the_polling_is_shaded_from_the_drivers_power(
        cli: Cli, tmp_path: Path) -> None:
    """The H200 burst recording: a 0.2 s matmul that polling at 0.2 s mostly misses."""
    burst = ROOT / "tests" / "data" / "h200-telemetry" / "snapshots" / "burst.yaml"
    out = tmp_path / "burst.html"
    assert cli("report", str(burst), "-o", str(out)).returncode == 0
    record = yaml.safe_load(burst.read_text())["bench"]
    run = median_run(record)
    ((bus, buffered),) = run["buffered"].items()
    threshold = run["gpus"][bus]["power_busy"]["threshold_w"]
    inside = charts_in(out.read_text())["telemetry-burst-GPU0"]
    drawn = [p for p in of_class(inside, "polyline", "series")
             if p["data-metric"] == "power_buffered"]
    assert sum(int(p["data-count"]) for p in drawn) == len(buffered["t"])
    busy = of_class(inside, "rect", "busy")
    above = [t for t, w in zip(buffered["t"], buffered["power_w"]) if w >= threshold]
    assert above and all(any(float(r["data-start"]) <= t <= float(r["data-end"]) for r in busy)
                         for t in above)
    assert all(float(r["data-end"]) - float(r["data-start"]) < 1.0 for r in busy)


def test_a_snapshot_without_bench_runs_has_no_charts(cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    plain = ROOT / "tests" / "data" / "h200" / "snapshot.yaml"
    assert cli("report", str(plain), "-o", str(out)).returncode == 0
    assert "<svg" not in out.read_text()


def test_bisect_plot_marks_every_tested_commit_and_the_first_bad(cli: Cli,
                                                                 tmp_path: Path) -> None:
    history = History(tmp_path / "story")
    history.capture(cli, "good")
    shas = history.commits(regression_at(6, 8), slow_at=6)
    history.capture(cli, "bad")
    plot = tmp_path / "bisect.svg"
    result = bisect(cli, history, "--plot", str(plot))
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"plot: {plot}" in result.stdout
    steps = re.findall(r"^(good|bad|step \d+)\s+([0-9a-f]{7,})\s.*\[(\d+) runs", result.stdout,
                       re.MULTILINE)
    inside = charts_in(plot.read_text())["bisect"]
    points = of_class(inside, "circle", "run")
    assert sorted({p["data-commit"] for p in points}) == sorted(sha for _, sha, _ in steps)
    assert len(points) == sum(int(runs) for _, _, runs in steps)
    assert [r["data-commit"] for r in of_class(inside, "rect", "first-bad")] == \
        [shas[5][:len(steps[0][1])]]
    # in commit order: the good commit's points first, the bad commit's last
    assert points[0]["data-commit"] == history.good[:len(steps[0][1])]
    assert points[-1]["data-commit"] == shas[-1][:len(steps[0][1])]
    assert SLOW in plot.read_text()
    # titled by the metric as the runs' output names it, as the diff does, not the regex
    assert re.findall(r'class="title"[^>]*>([^<]*)<', plot.read_text()) == [
        "gen throughput (token/s) at each tested commit, in commit order (higher is better)"]
    glance = re.search(r"^medians in commit order: (\S+) [\d.]+ \.\. [\d.]+ \((\d+) commits\)$",
                       result.stdout, re.MULTILINE)
    assert glance is not None, result.stdout
    # fast at the good end, slow from the culprit on
    assert glance[1][0] == "█" and glance[1][-1] == "▁" and int(glance[2]) == len(steps)


def test_bisect_plot_must_be_an_svg_in_a_folder_that_exists(cli: Cli, tmp_path: Path) -> None:
    for bad, why in (("plot.png", "name it FILE.svg"),
                     (str(tmp_path / "nowhere" / "p.svg"), "is not a folder")):
        result = cli("bisect", "good", "bad", "--cmd", "true", "--metric", "x", "--plot", bad)
        assert result.returncode == 2 and why in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1


SLOW_BENCH = "import time; time.sleep(1.3); print('gen throughput (token/s): 91.0')"


def test_bench_status_line_is_live_on_a_terminal(cli: Cli, tmp_path: Path) -> None:
    script = tmp_path / "slow.py"
    script.write_text(SLOW_BENCH)
    code, stdout, text = stderr_at_a_terminal(
        [sys.executable, "-m", "envsnap", "bench", "local", "--cmd",
         f"{sys.executable} {script}", "--metric", r"token/s\): ([0-9.]+)", "--repeat", "3",
         "--label", "tty", "--sample-interval", "0"], cli.cwd, cli.env, timeout=60)
    assert code == 0, (code, text[-1500:], stdout)
    assert "\r\x1b[K" in text
    assert re.search(r"local: run 1 of 3, \d+s elapsed, ETA after the first run", text)
    assert re.search(r"local: run 2 of 3, \d+s elapsed, ETA ~\d+s", text)
    assert text.count("local: run 3 of 3: ") == 1      # each run's own line, once
    # the status erased at the end, before the first run's one note (the signing key made)
    status, _, note = text.rpartition("\r\x1b[K")
    assert note.startswith("envsnap: created your signing key") and status
    assert re.search(r"^runs: ▄▄▄ 91 \.\. 91 \(3 runs\)$", stdout, re.MULTILINE)


def test_bench_off_a_terminal_writes_plain_lines(cli: Cli, tmp_path: Path) -> None:
    command = write_bench(tmp_path / "bench")
    result = cli("bench", "local", "--cmd", command, "--metric",
                 r"gen throughput \(token/s\): ([0-9.]+)", "--repeat", "4", "--label", "plain",
                 "--sample-interval", "0")
    assert result.returncode == 0, result.stderr
    assert "\r" not in result.stderr and "\x1b" not in result.stderr
    *runs, note = result.stderr.splitlines()    # the first run's note: the signing key made
    assert [line.split(":")[1] for line in runs] == [f" run {n} of 4" for n in range(1, 5)]
    assert note.startswith("envsnap: created your signing key")
    # the values 91.0, 91.7, 92.4, 93.1 as one line, lowest to highest
    assert "runs: ▁▃▆█ 91 .. 93.1 (4 runs)\n" in result.stdout


# ---- the pure parts ----------------------------------------------------------------------------

def test_sparkline_scales_between_the_extremes() -> None:
    assert sparkline([]) == ""
    assert sparkline([5.0, 5.0]) == "▄▄"
    assert sparkline([296.8, 26.8, 297.0]) == "█▁█"
    assert sparkline([0, 1, 2, 3, 4, 5, 6, 7]) == "▁▂▃▄▅▆▇█"


def test_busy_phases_cover_their_samples_and_a_lone_one() -> None:
    times = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert phases(times, [False, True, True, False, True, False], 0.2) == \
        ((0.1, 0.5), (0.7, 0.9))
    assert phases(times, [True] * 6, 0.2) == ((0.0, 1.0),)
    assert phases(times, [False] * 6, 0.2) == ()


def test_status_text_counts_runs_and_estimates_what_is_left() -> None:
    assert status_text(Tally(0, 5, False, 12, 0)) == \
        "run 1 of 5, 12s elapsed, ETA after the first run"
    assert status_text(Tally(2, 5, False, 62, 50)) == "run 3 of 5, 1m02s elapsed, ETA ~1m03s"
    assert status_text(Tally(7, None, False, 62, 50)) == "run 8, 1m02s elapsed"
    assert status_text(Tally(7, 25, True, 62, 50)) == "run 8 of ~25, 1m02s elapsed, ETA ~1m57s"


def test_an_svg_escapes_what_it_shows() -> None:
    from envsnap.report.charts import RunsChart, RunsSide, svg

    drawn = svg(RunsChart("a<b>&\"c", False, (RunsSide("<x>", (1.0, 2.0)),)))
    assert "<b>" not in drawn and "&lt;x&gt;" in drawn
    assert elements(drawn)[0][0] == "svg"
