"""The html report in a real browser: headless Chromium, the network blocked, renders the example
story's report (the snapshots `envsnap demo` builds); its DOM holds every chart with every
point, nothing in it points at the network, and the screenshot shows the charts painted."""
from __future__ import annotations

import re
import statistics
from pathlib import Path

import pytest
from conftest import ROOT, Cli
from helpers.browser import dump_dom, near, read_png, screenshot
from helpers.htmlcharts import charts_in, of_class

from envsnap.demo.snapshots import story_documents, write_examples
from envsnap.report.charts import BUSY_FILL, SIDE_COLORS

FETCHING = re.compile(r"\b(src|href|xlink:href|action|poster|data)\s*=\s*[\"']?\s*(https?:)?//",
                      re.IGNORECASE)


@pytest.fixture
def story_report(cli: Cli, tmp_path: Path) -> Path:
    folder = tmp_path / "examples"
    write_examples(folder)
    page = tmp_path / "report.html"
    result = cli("report", str(folder / "story-bad.yaml"), "--vs",
                 str(folder / "story-good.yaml"), "--format", "html", "-o", str(page))
    assert result.returncode == 0, result.stderr
    return page


def median_run(record: dict) -> dict:
    middle = statistics.median(record["values"])
    return min(record["runs"], key=lambda run: abs(run["value"] - middle))


def test_every_chart_holds_every_point_in_the_browsers_dom(story_report: Path,
                                                          tmp_path: Path) -> None:
    dom = dump_dom(story_report, tmp_path / "profile")
    charts = charts_in(dom)
    documents = {side: story_documents()[f"story-{side}"]["bench"] for side in ("good", "bad")}
    points = of_class(charts["runs"], "circle", "run")
    for side, record in documents.items():
        assert [float(p["data-value"]) for p in points
                if p["data-side"] == f"story-{side}"] == record["values"]
        assert len([m for m in of_class(charts["runs"], "line", "median")
                    if m["data-side"] == f"story-{side}"]) == 1
        run = median_run(record)
        for bus, columns in run["samples"].items():
            index = record["telemetry"]["gpus"][bus]["index"]
            inside = charts[f"telemetry-story-{side}-GPU{index}"]
            for key in ("sm_mhz", "power_w", "util_gpu_pct"):
                drawn = [p for p in of_class(inside, "polyline", "series")
                         if p["data-metric"] == key]
                assert sum(len(p["points"].split()) for p in drawn) == len(columns[key])
            assert of_class(inside, "rect", "busy")      # the story's GPUs are busy throughout
    gpus = len(documents["bad"]["runs"][0]["samples"])
    assert len(charts) == 1 + 2 * gpus


def test_nothing_in_the_page_needs_the_network(story_report: Path, tmp_path: Path) -> None:
    dom = dump_dom(story_report, tmp_path / "profile")
    assert "<svg" in dom
    assert not FETCHING.findall(dom)
    assert "url(" not in dom and "@import" not in dom
    for tag in ("<script", "<link", "<img", "<iframe", "<object", "<embed"):
        assert tag not in dom.lower()


def test_the_screenshot_shows_the_charts_painted_offline(story_report: Path, cli: Cli,
                                                         tmp_path: Path) -> None:
    shot = tmp_path / "report.png"
    # half scale: the same layout in a quarter of the pixels to decode
    screenshot(story_report, shot, (1000, 2600), tmp_path / "profile", scale=0.5)
    image = read_png(shot)
    assert (image.width, image.height) == (500, 1300)
    pixels = image.pixels()
    busy = sum(near(p, BUSY_FILL, 3) for p in pixels)
    runs = sum(near(p, SIDE_COLORS[0], 60) for p in pixels)
    assert busy > 2000 and runs > 10, (busy, runs)
    # the same look at a report without charts finds none of their colours
    plain = tmp_path / "plain.html"
    snapshot = ROOT / "tests" / "data" / "h200" / "snapshot.yaml"
    assert cli("report", str(snapshot), "--format", "html", "-o", str(plain)).returncode == 0
    screenshot(plain, shot, (1000, 2600), tmp_path / "profile", scale=0.5)
    assert not any(near(p, BUSY_FILL, 3) for p in read_png(shot).pixels())


def test_the_screenshot_in_docs_is_small_and_shown_in_the_readme() -> None:
    png = ROOT / "docs" / "report.png"
    assert png.stat().st_size < 300_000
    image = read_png(png)
    assert image.width <= 1200 and image.height <= 2000
    assert "![" in (ROOT / "README.md").read_text() and "docs/report.png" in \
        (ROOT / "README.md").read_text()
