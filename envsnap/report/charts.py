"""Charts as hand-written SVG: pure functions from typed chart data to one <svg> element.

Three charts, each a picture of numbers that a table makes a reader work for:

- RunsChart: every benchmark run of each snapshot as a point, side by side, medians marked;
- TelemetryChart: one GPU's SM clock, power and utilization over one run, busy phases shaded;
- BisectChart: the metric at each tested commit, in commit order, the first bad commit marked.

No plotting library (docs/guide/reference.md, "Dependencies": matplotlib would add ~170 MB
installed and ~0.3 s of import for three kinds of chart made of circles, lines and
rectangles). The SVG needs nothing to show: no script, no font or stylesheet to fetch;
every text is escaped.
Every point a reader sees is an element a test can count: <circle class="run" data-value>,
<line class="median" data-value>, <polyline class="series" data-count>, <rect class="busy">.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import Union

from envsnap.text import number
from envsnap.verdicts import BAD, CANT_TELL, GOOD, REGRESSION

GOOD_COLOR = "#1a7f37"
BAD_COLOR = "#cf222e"
UNCLEAR_COLOR = "#8c959f"
INK = "#1f2328"
GRID = "#d0d7de"
BUSY_FILL = "#fff1c2"
SIDE_COLORS = ("#0969da", "#bf3989")       # the --vs snapshot, then the subject
SERIES_COLORS = {"sm_mhz": "#0969da", "power_w": "#bc4c00", "util_gpu_pct": "#8250df",
                 "power_buffered": "#953800"}
FONT = "font-family=\"-apple-system,Segoe UI,Helvetica,Arial,sans-serif\""


# ---- the data --------------------------------------------------------------------------------

@dataclass(frozen=True)
class RunsSide:
    label: str
    values: tuple[float, ...]


@dataclass(frozen=True)
class RunsChart:
    """Each snapshot's benchmark runs: the older (--vs) side first, as in a diff."""

    metric: str
    lower_is_better: bool
    sides: tuple[RunsSide, ...]

    @property
    def name(self) -> str:
        return "runs"


@dataclass(frozen=True)
class Series:
    key: str                          # the sample column: sm_mhz, power_w, util_gpu_pct
    title: str                        # "SM clock (MHz)"
    values: tuple[float | None, ...]  # one per sample; None where the reading failed
    times: tuple[float, ...] | None = None   # its own times (the driver's power buffer),
                                             # else the chart's


@dataclass(frozen=True)
class TelemetryChart:
    """One GPU during one run of one snapshot."""

    label: str                         # the snapshot
    gpu: str                           # "GPU0 (00000000:00:06.0)"
    run: int
    runs: int
    times: tuple[float, ...]           # seconds since the run started
    series: tuple[Series, ...]
    busy: tuple[tuple[float, float], ...]   # busy phases as (start, end) seconds

    @property
    def name(self) -> str:
        return f"telemetry-{self.label}-{self.gpu.split(' ')[0]}"


@dataclass(frozen=True)
class TestedCommit:
    position: int                # on the line of commits: 0 is the good commit
    short: str
    subject: str
    values: tuple[float, ...]    # empty when the commit was skipped
    verdict: str                 # good, bad, can't tell, skip (the bad endpoint: regression)


@dataclass(frozen=True)
class BisectChart:
    metric: str
    lower_is_better: bool
    commits: tuple[TestedCommit, ...]   # in commit order
    first_bad: str | None               # short sha of the first bad commit, when found

    @property
    def name(self) -> str:
        return "bisect"


Chart = Union[RunsChart, TelemetryChart, BisectChart]


# ---- scales ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Scale:
    """A linear map from a value range onto a pixel range (pixels may run backwards)."""

    lo: float
    hi: float
    start: float
    end: float

    def __call__(self, value: float) -> float:
        span = self.hi - self.lo
        fraction = (value - self.lo) / span if span else 0.5
        return round(self.start + fraction * (self.end - self.start), 1)


def nice_step(span: float, ticks: int = 4) -> float:
    """1, 2 or 5 times a power of ten, so that about `ticks` ticks cover the span."""
    raw = span / ticks if 0 < span < math.inf else 1.0
    power = 10.0 ** math.floor(math.log10(raw))
    return next(float(m * power) for m in (1, 2, 5, 10) if m * power >= raw)


def value_range(values: Sequence[float]) -> tuple[float, float]:
    """The axis range: from zero when the values are positive and far apart (a 10x gap reads
    as one), else around the values, padded so no point sits on the frame."""
    lo, hi = min(values), max(values)
    if lo >= 0 and lo <= 0.5 * hi:
        lo = 0.0
    pad = (hi - lo) * 0.08 or abs(hi) * 0.05 or 1.0
    if not math.isfinite(hi - lo + 2 * pad):   # values near the float limits: no padding
        return lo, hi
    step = nice_step(hi - lo + 2 * pad)
    bottom = 0.0 if lo == 0.0 else math.floor((lo - pad) / step) * step
    return bottom, math.ceil((hi + pad) / step) * step


def ticks(lo: float, hi: float) -> list[float]:
    step = nice_step(hi - lo)
    if not math.isfinite(hi - lo) or (hi - lo) / step > 50:
        return []
    first = math.ceil(lo / step) * step
    count = int(math.floor((hi - first) / step + 1e-9)) + 1
    return [round(first + i * step, 10) for i in range(max(count, 0))]


# ---- SVG pieces ------------------------------------------------------------------------------

def attr(value: object) -> str:
    return escape(str(value), quote=True)


def text(x: float, y: float, body: str, anchor: str = "start", size: int = 11,
         css: str = "label", color: str = INK) -> str:
    return (f"<text class=\"{css}\" x=\"{x}\" y=\"{y}\" font-size=\"{size}\" "
            f"text-anchor=\"{anchor}\" fill=\"{color}\">{attr(body)}</text>")


def svg_open(name: str, kind: str, width: int, height: int, title: str) -> str:
    return (f"<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" data-chart=\"{kind}\" "
            f"data-name=\"{attr(name)}\" width=\"{width}\" height=\"{height}\" "
            f"viewBox=\"0 0 {width} {height}\" role=\"img\" {FONT}>"
            f"<title>{attr(title)}</title><rect width=\"{width}\" height=\"{height}\" "
            f"fill=\"#ffffff\"/>")


def y_axis(scale: Scale, left: float, right: float) -> list[str]:
    """Grid lines and tick labels at nice values."""
    out = []
    for tick in ticks(scale.lo, scale.hi):
        y = scale(tick)
        out.append(f"<line x1=\"{left}\" x2=\"{right}\" y1=\"{y}\" y2=\"{y}\" "
                   f"stroke=\"{GRID}\" stroke-width=\"1\"/>")
        out.append(text(left - 4, y + 4, number(tick), "end", 10, "tick"))
    return out


def circle(x: float, y: float, color: str, css: str, data: dict[str, object],
           hollow: bool = False, radius: float = 4.5) -> str:
    fill = "#ffffff" if hollow else color
    extra = "".join(f" data-{key}=\"{attr(value)}\"" for key, value in data.items())
    return (f"<circle class=\"{css}\" cx=\"{x}\" cy=\"{y}\" r=\"{radius}\" fill=\"{fill}\" "
            f"fill-opacity=\"0.8\" stroke=\"{color}\" stroke-width=\"1.2\"{extra}/>")


def jitter(index: int, count: int, width: float) -> float:
    """Points of one column spread across it in run order, so equal values stay visible."""
    return 0.0 if count <= 1 else round((index / (count - 1) - 0.5) * width, 1)


# ---- runs: good vs bad -------------------------------------------------------------------------

def runs_svg(chart: RunsChart) -> str:
    # the right margin holds the last column's median label
    width, height, left, right, top, bottom = 460, 280, 56, 84, 34, 236
    values = [v for side in chart.sides for v in side.values]
    scale = Scale(*value_range(values), bottom, top)
    column = (width - left - right) / max(len(chart.sides), 1)
    better = "lower" if chart.lower_is_better else "higher"
    out = [svg_open(chart.name, "runs", width, height, f"{chart.metric}: every run"),
           text(left, 18, f"{chart.metric} per run ({better} is better)", size=12, css="title")]
    out += y_axis(scale, left, width - right)
    for index, side in enumerate(chart.sides):
        center = left + column * (index + 0.5)
        color = SIDE_COLORS[min(index, len(SIDE_COLORS) - 1)]
        out += side_points(side, center, min(column * 0.35, 70.0), scale, color)
        out.append(text(center, bottom + 18, side.label, "middle", 11, "side"))
        out.append(text(center, bottom + 32, f"{len(side.values)} runs", "middle", 10,
                        "count", UNCLEAR_COLOR))
    return "".join(out + ["</svg>"])


def side_points(side: RunsSide, center: float, spread: float, scale: Scale,
                color: str) -> list[str]:
    if not side.values:
        return []
    out = [circle(center + jitter(i, len(side.values), spread), scale(value), color, "run",
                  {"side": side.label, "run": i + 1, "value": value})
           for i, value in enumerate(side.values)]
    median = statistics.median(side.values)
    y, half = scale(median), spread * 0.85
    out.append(f"<line class=\"median\" data-side=\"{attr(side.label)}\" data-value=\"{median}\" "
               f"x1=\"{center - half}\" x2=\"{center + half}\" y1=\"{y}\" y2=\"{y}\" "
               f"stroke=\"{INK}\" stroke-width=\"2.5\"/>")
    out.append(text(center + half + 4, y + 4, f"median {number(median)}", size=10,
                    css="median-label"))
    return out


# ---- telemetry: one GPU over one run ------------------------------------------------------------

PANEL_HEIGHT = 70
PANEL_GAP = 22
PERCENT = ("util_gpu_pct", "util_mem_pct")


def telemetry_svg(chart: TelemetryChart) -> str:
    width, left, right, top = 420, 56, 12, 40
    height = top + len(chart.series) * (PANEL_HEIGHT + PANEL_GAP) + 24
    end = max([chart.times[-1] if chart.times else 0.0, 1e-9] +
              [series.times[-1] for series in chart.series if series.times])
    x = Scale(0.0, end, left, width - right)
    out = [svg_open(chart.name, "telemetry", width, height,
                    f"{chart.label} {chart.gpu}, run {chart.run} of {chart.runs}"),
           text(left, 16, f"{chart.label}: {chart.gpu}", size=12, css="title"),
           text(left, 30, f"run {chart.run} of {chart.runs}, {number(end)} s; shaded: busy",
                size=10, css="subtitle", color=UNCLEAR_COLOR)]
    for index, series in enumerate(chart.series):
        panel_top = top + index * (PANEL_HEIGHT + PANEL_GAP) + 12
        out += panel(chart, series, x, panel_top, (left, width - right))
    axis_y = top + len(chart.series) * (PANEL_HEIGHT + PANEL_GAP) - PANEL_GAP + 12
    out += [text(x(tick), axis_y + 12, number(tick), "middle", 10, "tick")
            for tick in ticks(0.0, end)]
    out.append(text(width - right, height - 2, "seconds", "end", 10, "axis"))
    return "".join(out + ["</svg>"])


def panel(chart: TelemetryChart, series: Series, x: Scale, top: float,
          edges: tuple[float, float]) -> list[str]:
    bottom = top + PANEL_HEIGHT
    present = [v for v in series.values if v is not None]
    lo, hi = value_range(present) if present else (0.0, 1.0)
    if series.key in PERCENT:      # a percentage reads best on its whole scale
        lo, hi = 0.0, 100.0
    y = Scale(lo, hi, bottom, top)
    out = [text(edges[0], top - 4, series.title, size=10, css="panel-title")]
    out += [f"<rect class=\"busy\" data-start=\"{start}\" data-end=\"{stop}\" x=\"{x(start)}\" "
            f"y=\"{top}\" width=\"{max(round(x(stop) - x(start), 1), 1.0)}\" "
            f"height=\"{PANEL_HEIGHT}\" fill=\"{BUSY_FILL}\"/>" for start, stop in chart.busy]
    out += y_axis(y, edges[0], edges[1])
    color = SERIES_COLORS.get(series.key, INK)
    for piece in segments(series.times or chart.times, series.values):
        points = " ".join(f"{x(t)},{y(v)}" for t, v in piece)
        out.append(f"<polyline class=\"series\" data-metric=\"{attr(series.key)}\" "
                   f"data-count=\"{len(piece)}\" points=\"{points}\" fill=\"none\" "
                   f"stroke=\"{color}\" stroke-width=\"1.5\"/>")
        if len(piece) == 1:   # a lone reading has no line to show it: a dot does
            out.append(circle(x(piece[0][0]), y(piece[0][1]), color, "lone", {}, radius=2))
    return out


def segments(times: Sequence[float],
             values: Sequence[float | None]) -> list[list[tuple[float, float]]]:
    """The readings as unbroken pieces: a failed reading (None) breaks the line."""
    pieces: list[list[tuple[float, float]]] = [[]]
    for t, value in zip(times, values):
        if value is None:
            if pieces[-1]:
                pieces.append([])
        else:
            pieces[-1].append((t, value))
    return [piece for piece in pieces if piece]


def merged(spans: Sequence[tuple[float, float]]) -> tuple[tuple[float, float], ...]:
    """Overlapping or touching spans as one."""
    found: list[tuple[float, float]] = []
    for start, stop in sorted(spans):
        if found and start <= found[-1][1]:
            found[-1] = (found[-1][0], max(found[-1][1], stop))
        else:
            found.append((start, stop))
    return tuple(found)


def phases(times: Sequence[float], busy: Sequence[bool], interval: float
           ) -> tuple[tuple[float, float], ...]:
    """Runs of busy samples as (start, end): each sample stands for half an interval either
    side of its time, so a single busy sample still shows as a band."""
    found: list[tuple[float, float]] = []
    start: float | None = None
    last = times[-1] if times else 0.0
    for index, (t, is_busy) in enumerate(zip(times, busy)):
        if is_busy and start is None:
            start = max(0.0, t - interval / 2)
        ends = start is not None and (not is_busy or index == len(times) - 1)
        if ends and start is not None:
            stop = t + interval / 2 if is_busy else times[index - 1] + interval / 2
            found.append((round(start, 3), round(min(stop, last), 3)))
            start = None
    return tuple(found)


# ---- bisect: the metric in commit order ---------------------------------------------------------

VERDICT_COLORS = {GOOD: GOOD_COLOR, BAD: BAD_COLOR, REGRESSION: BAD_COLOR}


def bisect_svg(chart: BisectChart) -> str:
    width, height, left, right, top, bottom = 640, 300, 64, 20, 34, 230
    values = [v for commit in chart.commits for v in commit.values] or [0.0, 1.0]
    y = Scale(*value_range(values), bottom, top)
    last = max((c.position for c in chart.commits), default=1) or 1
    x = Scale(0.0, float(last), left + 12, width - right - 12)
    better = "lower" if chart.lower_is_better else "higher"
    out = [svg_open(chart.name, "bisect", width, height, f"bisect: {chart.metric}"),
           text(left, 18, f"{chart.metric} at each tested commit, in commit order ({better} "
                          "is better)", size=12, css="title")]
    out += first_bad_band(chart, x, top, bottom)
    out += y_axis(y, left, width - right)
    for commit in chart.commits:
        out += commit_points(commit, x, y)
        out.append(text(x(commit.position), bottom + 14, commit.short[:7], "middle", 9, "sha"))
    out.append(text((left + width - right) / 2, bottom + 54,
                    "good commit on the left, bad commit on the right", "middle", 10, "axis",
                    UNCLEAR_COLOR))
    return "".join(out + ["</svg>"])


def first_bad_band(chart: BisectChart, x: Scale, top: float, bottom: float) -> list[str]:
    found = [c for c in chart.commits if c.short == chart.first_bad]
    if not found:
        return []
    center = x(found[0].position)
    # the label grows away from the nearer edge, so it is never cut off
    anchor, at = ("end", center + 14) if center > (x.start + x.end) / 2 else \
        ("start", center - 14)
    return [f"<rect class=\"first-bad\" data-commit=\"{attr(found[0].short)}\" "
            f"x=\"{center - 14}\" y=\"{top}\" width=\"28\" height=\"{bottom - top}\" "
            f"fill=\"{BAD_COLOR}\" fill-opacity=\"0.12\"/>",
            text(at, bottom + 34, f"first bad: {found[0].short[:7]} {found[0].subject[:50]}",
                 anchor, 11, "first-bad-label", BAD_COLOR)]


def commit_points(commit: TestedCommit, x: Scale, y: Scale) -> list[str]:
    color = VERDICT_COLORS.get(commit.verdict, UNCLEAR_COLOR)
    center = x(commit.position)
    if not commit.values:     # skipped: its benchmark failed or the patch did not apply
        return [text(center, y.start - 4, "skip", "middle", 9, "skipped", UNCLEAR_COLOR)]
    out = [circle(center + jitter(i, len(commit.values), 10), y(value), color, "run",
                  {"commit": commit.short, "value": value}, hollow=commit.verdict == CANT_TELL,
                  radius=3.5)
           for i, value in enumerate(commit.values)]
    median = statistics.median(commit.values)
    out.append(f"<line class=\"median\" data-commit=\"{attr(commit.short)}\" "
               f"data-value=\"{median}\" x1=\"{center - 9}\" x2=\"{center + 9}\" "
               f"y1=\"{y(median)}\" y2=\"{y(median)}\" stroke=\"{INK}\" stroke-width=\"2\"/>")
    return out


# ---- any chart -------------------------------------------------------------------------------

def svg(chart: Chart) -> str:
    if isinstance(chart, RunsChart):
        return runs_svg(chart)
    if isinstance(chart, TelemetryChart):
        return telemetry_svg(chart)
    return bisect_svg(chart)


def svg_file(chart: Chart) -> str:
    """A chart as a standalone .svg file."""
    return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" + svg(chart) + "\n"
