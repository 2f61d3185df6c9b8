"""Which charts a report or a bisect shows, read from snapshots' bench records and from a
bisect's steps (charts.py draws them). Pure functions; anything missing means no chart.

A report shows the runs of both snapshots side by side when both ran the same metric, and
each GPU's telemetry over the median run of each snapshot (the run a reader would pick as
"typical"), busy phases shaded by the rule the agent's busy summaries use
(agent/benchsample.py): utilization >= BUSY_UTIL_PCT at a poll, or the driver's buffered
power above the run's threshold (those samples, when recorded, are drawn as a panel of their
own: a phase shorter than the polling shows there and nowhere else).
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from envsnap.agent.benchsample import BUSY_UTIL_PCT, busy_phases, in_phase
from envsnap.diff.benchmark import output_context
from envsnap.report.charts import (
    BisectChart,
    Chart,
    RunsChart,
    RunsSide,
    Series,
    TelemetryChart,
    TestedCommit,
    merged,
    phases,
)
from envsnap.snapshot import document as snapshot

if TYPE_CHECKING:
    # bisect's run module reaches hosts: not loaded for a report
    from envsnap.bisect.run import Step
    from envsnap.snapshot.records import Bench, BenchRun, Snapshot, Telemetry

SERIES = (("sm_mhz", "SM clock (MHz)"), ("power_w", "power (W)"),
          ("util_gpu_pct", "GPU utilization (%)"))


def report_charts(document: Snapshot, vs: Snapshot | None,
                  labels: tuple[str, str]) -> list[Chart]:
    """labels: (the subject's, the --vs snapshot's). Runs first, then the telemetry of the
    --vs snapshot and of the subject, GPU by GPU."""
    record, other = valid_record(document), valid_record(vs) if vs is not None else None
    found: list[Chart] = []
    runs = runs_chart(record, other, labels)
    if runs is not None:
        found.append(runs)
    for label, each in ((labels[1], other), (labels[0], record)):
        if each is not None:
            found += telemetry_charts(label, each)
    return found


def valid_record(document: Snapshot | None) -> Bench | None:
    """A bench record with runs to draw."""
    record = snapshot.bench(document) if document is not None else None
    return record if record is not None and "runs" in record else None


def finite(value: float | None) -> float | None:
    """A number that can be drawn: a null, NaN or infinity cannot (YAML holds .nan and .inf)."""
    return float(value) if value is not None and math.isfinite(value) else None


def numbers(values: Sequence[float | None]) -> tuple[float, ...]:
    return tuple(n for n in (finite(v) for v in values) if n is not None)


def runs_chart(record: Bench | None, other: Bench | None,
               labels: tuple[str, str]) -> RunsChart | None:
    if record is None or not numbers(record["values"]):
        return None
    sides = [RunsSide(labels[0], numbers(record["values"]))]
    if other is not None and (other.get("metric") != record.get("metric")
                              or not numbers(other["values"])):
        other = None     # another benchmark's runs: not drawn beside these
    if other is not None:
        sides.insert(0, RunsSide(labels[1], numbers(other["values"])))
    return RunsChart(metric=metric_name(record, other),
                     lower_is_better=bool(record.get("lower_is_better")), sides=tuple(sides))


def metric_name(record: Bench, other: Bench | None = None) -> str:
    """The metric as the diff names it (diff/benchmark.output_context: what the runs' output
    calls the number, and its unit: "busbw (GB/s)"), the --vs side's when the subject's
    output does not say; "benchmark", as the diff's line, when neither does. Never the regex:
    `busbw ([0-9.]+) GB/s` is how the number was found, not what it is."""
    name, unit = output_context(record)
    if other is not None and name is None and unit is None:
        name, unit = output_context(other)
    shown = name or "benchmark"
    return f"{shown} ({unit})" if unit else shown


def median_run(record: Bench) -> BenchRun | None:
    """The run whose value is nearest the median (the earlier of two as near)."""
    valued = [(value, run) for run in record.get("runs", [])
              if (value := finite(run.get("value"))) is not None]
    if not valued:
        return None
    middle = statistics.median(value for value, _ in valued)
    return min(valued, key=lambda pair: abs(pair[0] - middle))[1]


def gpu_index(bus: str, telemetry: Telemetry) -> int | None:
    return telemetry.get("gpus", {}).get(bus, {}).get("index")


def gpu_name(bus: str, telemetry: Telemetry) -> str:
    index = gpu_index(bus, telemetry)
    return f"GPU{index} ({bus})" if index is not None else bus


def gpu_order(bus: str, telemetry: Telemetry) -> tuple[int, str]:
    index = gpu_index(bus, telemetry)
    return (index if index is not None else 1 << 30, bus)


def sample_interval(record: Bench, telemetry: Telemetry) -> float:
    """The record's interval, else the one the agent's sampler reported with its telemetry
    (a field schema.py keeps as the telemetry record's rest: read by name)."""
    reported: Mapping[str, Any] = telemetry
    return finite(record.get("sample_interval")) or finite(
        reported.get("sample_interval")) or 0.0


def telemetry_charts(label: str, record: Bench) -> list[Chart]:
    run = median_run(record)
    samples = run.get("samples") if run is not None else None
    if run is None or samples is None:
        return []
    telemetry = record.get("telemetry") or {}     # null: no telemetry for these runs
    interval = sample_interval(record, telemetry)
    number = run.get("run") or 0
    found: list[Chart] = []
    for bus in sorted(samples, key=lambda b: gpu_order(b, telemetry)):
        chart = gpu_chart(label, gpu_name(bus, telemetry), samples[bus], interval,
                          (number, len(record.get("runs", []))), power_phases(run, bus))
        if chart is not None:
            found.append(chart)
    return found


def column(columns: dict[str, list[float | None]], key: str,
           count: int) -> tuple[float | None, ...]:
    values = columns.get(key, [])
    return tuple(finite(v) for v in (values + [None] * count)[:count])


@dataclass(frozen=True)
class PowerBuffer:
    """One GPU's buffered power samples over a run and the busy phases they show."""

    times: tuple[float, ...]
    watts: tuple[float, ...]
    phases: tuple[tuple[float, float], ...]


def power_phases(run: BenchRun, bus: str) -> PowerBuffer | None:
    """From the run's `buffered` power samples and the threshold the agent used for them."""
    buffered = run.get("buffered", {}).get(bus, {})
    pairs = [(t, w) for t, w in ((finite(t), finite(w)) for t, w in
                                 zip(buffered.get("t", []), buffered.get("power_w", [])))
             if t is not None and w is not None]
    busy = run.get("gpus", {}).get(bus, {}).get("power_busy") or {}   # null: not measured
    threshold = finite(busy.get("threshold_w"))
    if not pairs or threshold is None:
        return None
    drawn_t, drawn_w = [t for t, _ in pairs], [w for _, w in pairs]
    found = busy_phases(drawn_t, drawn_w, threshold - min(drawn_w))
    return PowerBuffer(tuple(drawn_t), tuple(drawn_w),
                       tuple((round(a, 3), round(b, 3)) for a, b in found))


def gpu_chart(label: str, gpu: str, columns: dict[str, list[float | None]], interval: float,
              run: tuple[int, int], power: PowerBuffer | None = None) -> TelemetryChart | None:
    times = tuple(t for t in column(columns, "t", len(columns.get("t", []))) if t is not None)
    if len(times) < 2:
        return None
    series = tuple(Series(key, title, column(columns, key, len(times))) for key, title in SERIES
                   if any(v is not None for v in column(columns, key, len(times))))
    if power is not None:
        series += (Series("power_buffered", "power, the driver's buffer (W)", power.watts,
                          power.times),)
    util = column(columns, "util_gpu_pct", len(times))
    found = list(power.phases) if power is not None else []
    # a poll is busy by the agent's rule: utilization high, or inside a buffered-power phase
    busy = [(u is not None and u >= BUSY_UTIL_PCT) or in_phase(t, found)
            for t, u in zip(times, util)]
    step = interval or (times[-1] - times[0]) / (len(times) - 1)
    return TelemetryChart(label=label, gpu=gpu, run=run[0], runs=run[1], times=times,
                          series=series, busy=merged(phases(times, busy, step) + tuple(found)))


# ---- bisect ----------------------------------------------------------------------------------

def bisect_chart(steps: list[Step], first_bad: str | None, metric: str,
                 lower_is_better: bool) -> BisectChart:
    """steps: the endpoints and every step; first_bad: the first bad commit's full sha."""
    tested = sorted(steps, key=lambda step: step.position)
    commits = tuple(TestedCommit(position=step.position, short=step.commit.short,
                                 subject=step.commit.subject, values=numbers(step.values),
                                 verdict=str(step.verdict)) for step in tested)
    short = next((step.commit.short for step in tested
                  if first_bad is not None and step.commit.sha == first_bad), None)
    return BisectChart(metric=metric, lower_is_better=lower_is_better, commits=commits,
                       first_bad=short)
