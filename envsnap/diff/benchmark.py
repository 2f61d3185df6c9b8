"""Both sides' benchmark runs, compared: the number a diff, a fleet diff and a report lead with.

A snapshot's `bench` record (bench/run.py) is no fact and never drift, but when two snapshots
hold runs of one command and one metric, how the numbers moved is what the reader came for
(issue 14: busbw 296.8 -> 26.8 GB/s, unsaid by a diff that named the culprit commit). The
verdict is bench/stats.py's, through its public compare(), never one median against the
other. What the number is called and its unit come from the runs' own output, the line that
printed the value ("busbw 286.4 GB/s"); the metric regex is not run again here (a stranger's
snapshot may carry a regex that backtracks: agent/patterns.py). Pure; nothing here prints.
"""
from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple, Union

from envsnap.diff.findings import short
from envsnap.snapshot.document import bench as bench_of
from envsnap.text import plural
from envsnap.verdicts import CANT_TELL, IMPROVEMENT, REGRESSION, SAME, BenchVerdict

if TYPE_CHECKING:
    from envsnap.snapshot.records import Bench, BenchRun, Snapshot
COMMAND_WIDTH = 60   # a command in a one-line "not compared" note
NAME_WIDTH = 40      # what the output calls the number, at most
# A number as a benchmark prints it; linear (no nested repetition).
NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")
# A unit right after the number: one with a slash or a percent sign ("GB/s", "tok/s",
# "ms/cycle", "%") is a unit wherever it appears; a plain word only when it is a known one,
# so "286 on 2 GPUs" gives no unit "on".
RATE_UNIT = re.compile(r"%|[A-Za-zµ]+[0-9]?(?:/[A-Za-zµ]+[0-9]?)+")
PLAIN_UNITS = frozenset([
    "s", "sec", "secs", "seconds", "ms", "us", "µs", "ns", "min", "h", "b", "kb", "kib",
    "mb", "mib", "gb", "gib", "tb", "tib", "w", "mhz", "ghz", "flops", "gflops", "tflops",
    "pflops", "x"])


class BenchSide(NamedTuple):
    """One snapshot's runs as a comparison needs them."""

    label: str
    command: str
    metric: str
    lower_is_better: bool
    values: tuple[float, ...]
    name: str | None    # what the output calls the number ("busbw"), if it says
    unit: str | None    # what follows the number in the output ("GB/s"), if it is a unit

    @property
    def median(self) -> float:
        return median_of(self.values)

    @property
    def runs(self) -> int:
        return len(self.values)

    def same_benchmark(self, other: BenchSide) -> bool:
        return (self.command, self.metric, self.lower_is_better) == \
            (other.command, other.metric, other.lower_is_better)

    def as_json(self) -> dict[str, object]:
        return {"label": self.label, "command": self.command, "metric": self.metric,
                "lower_is_better": self.lower_is_better, "median": self.median,
                "runs": self.runs, "values": list(self.values)}


class BenchmarkChange(NamedTuple):
    """The same benchmark on both sides: medians, change, stats' verdict."""

    before: BenchSide
    after: BenchSide
    verdict: BenchVerdict
    why: str               # stats' one line of why
    change: float | None   # after median / before median - 1; None when before's is 0
    threshold: float       # stats' "a change under this is the same"

    @property
    def compared(self) -> bool:
        return True   # the same benchmark on both sides (a BenchmarkMismatch: False)

    @property
    def name(self) -> str | None:
        return self.before.name or self.after.name

    @property
    def unit(self) -> str | None:
        return self.before.unit or self.after.unit

    @property
    def moved(self) -> bool:
        """The numbers changed: a verdict that says so, or a change past the threshold that
        the runs are too few or too noisy to call. Then "nothing else changed" is never said."""
        if self.verdict in (REGRESSION, IMPROVEMENT):
            return True
        return self.verdict == CANT_TELL and self.change is not None and \
            abs(self.change) > self.threshold

    @property
    def regression(self) -> bool:
        return self.verdict == REGRESSION

    def line(self) -> str:
        """"benchmark: busbw 286.05 -> 26.3 GB/s (-91%, regression, 4 vs 4 runs)"."""
        name = f"{self.name} " if self.name else ""
        unit = f" {self.unit}" if self.unit else ""
        return (f"benchmark: {name}{number(self.before.median)} -> "
                f"{number(self.after.median)}{unit} ({change_text(self.change)}, "
                f"{self.verdict}, {self.before.runs} vs {plural(self.after.runs, 'run')})")

    def as_json(self) -> dict[str, object]:
        return {"compared": True, "line": self.line(), "name": self.name, "unit": self.unit,
                "command": self.before.command, "metric": self.before.metric,
                "lower_is_better": self.before.lower_is_better,
                "before": self.before.as_json(), "after": self.after.as_json(),
                "change_pct": None if self.change is None else round(100 * self.change, 2),
                "verdict": self.verdict, "why": self.why, "moved": self.moved,
                "threshold": self.threshold}


class BenchmarkMismatch(NamedTuple):
    """Both sides ran a benchmark, not the same one: said in one line, never compared."""

    before: BenchSide
    after: BenchSide
    unfit: str | None = None   # why the runs of one benchmark could not be compared

    @property
    def compared(self) -> bool:
        return False

    @property
    def moved(self) -> bool:
        return False   # nothing compared: no change to speak of

    @property
    def regression(self) -> bool:
        return False

    @property
    def reason(self) -> str:
        a, b = self.before, self.after
        if self.unfit:
            return self.unfit
        if a.command != b.command:
            shown = where_they_differ(a.command, b.command)
            return f"different commands ({a.label}: {shown[0]}; {b.label}: {shown[1]})"
        if a.metric != b.metric:
            shown = where_they_differ(a.metric, b.metric)
            return f"different metrics ({a.label}: {shown[0]}; {b.label}: {shown[1]})"
        return (f"{a.label} counts {direction(a)} as better, {b.label} {direction(b)}")

    def line(self) -> str:
        return f"benchmark: not compared: {self.reason}"

    def as_json(self) -> dict[str, object]:
        return {"compared": False, "line": self.line(), "reason": self.reason,
                "before": self.before.as_json(), "after": self.after.as_json()}


Benchmark = Union[BenchmarkChange, BenchmarkMismatch]


def where_they_differ(first: str, second: str) -> tuple[str, str]:
    """Two long texts shown from a little before where they part ("...one/bench.py" vs
    "...two/bench.py"), each at most COMMAND_WIDTH characters: a shared interpreter path
    would otherwise fill the line and hide the difference."""
    common = 0
    while common < min(len(first), len(second)) and first[common] == second[common]:
        common += 1
    start = max(0, common - 12)

    def shown(text: str) -> str:
        return short(("..." if start else "") + text[start:], COMMAND_WIDTH)
    return shown(first), shown(second)


def direction(side: BenchSide) -> str:
    return "lower" if side.lower_is_better else "higher"


def median_of(values: Sequence[float]) -> float:
    """statistics.median, without importing statistics into every diff (start-up matters:
    cli/diff.py); the verdict itself comes from bench/stats.py."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def number(value: float) -> str:
    return f"{value:g}"


def change_text(change: float | None) -> str:
    """-91%, +4.2%, +0.0%: whole percents once a change is large enough to read that way."""
    if change is None:
        return "no ratio: the first median is 0"
    return f"{change:+.0%}" if abs(change) >= 0.1 else f"{change:+.1%}"


# ---- a snapshot's runs ------------------------------------------------------------------------

def side(document: Snapshot, label: str) -> BenchSide | None:
    """The runs a snapshot holds, or None when it holds none (or none that are numbers)."""
    record = bench_of(document)
    if record is None:
        return None
    values = record["values"]
    # `bench` never records nan or inf (agent/benchrun.py metric_number): such a record was
    # edited by hand and compares to nothing
    if not values or not all(math.isfinite(v) for v in values):
        return None
    name, unit = output_context(record)
    return BenchSide(label=label, command=str(record.get("command") or "?"),
                     metric=str(record.get("metric") or "?"),
                     lower_is_better=bool(record.get("lower_is_better")),
                     values=tuple(float(v) for v in values), name=name, unit=unit)


def output_context(record: Bench) -> tuple[str | None, str | None]:
    """(name, unit) from the last line of the last run's output that printed the run's
    value: "busbw 286.4 GB/s" -> ("busbw", "GB/s"); (None, None) when no line did."""
    runs = record.get("runs", [])
    last: BenchRun = runs[-1] if runs else {}
    output, value = last.get("output_tail"), last.get("value")
    if output is None or value is None:
        return None, None
    for line in reversed(output.splitlines()):
        printed = [m for m in NUMBER.finditer(line) if as_number(m.group()) == value]
        if printed:
            found = printed[-1]
            return name_before(line[:found.start()]), unit_after(line[found.end():])
    return None, None


def as_number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def name_before(text: str) -> str | None:
    """"EAGLE-3 2-step: " -> "EAGLE-3 2-step"; a long prefix keeps its last words."""
    name = text.strip().rstrip(":=").strip()
    while len(name) > NAME_WIDTH and " " in name:
        name = name.split(" ", 1)[1]
    return name if name and len(name) <= NAME_WIDTH else None


def unit_after(text: str) -> str | None:
    """" GB/s" -> "GB/s", "ms," -> "ms", " tok/s (verify 19 ms)" -> "tok/s"; else None."""
    token = re.match(r" ?([^\s,;()]+)", text)
    if token is None:
        return None
    unit = token.group(1).rstrip(".:")
    if RATE_UNIT.fullmatch(unit) or unit.lower() in PLAIN_UNITS:
        return unit
    return None


# ---- two snapshots ----------------------------------------------------------------------------

def compare_benchmarks(a: Snapshot, b: Snapshot,
                       labels: tuple[str, str]) -> Benchmark | None:
    """How the benchmark moved from a to b; None unless both sides hold runs."""
    before, after = side(a, labels[0]), side(b, labels[1])
    if before is None or after is None:
        return None
    if not before.same_benchmark(after):
        return BenchmarkMismatch(before, after)
    from envsnap.bench import stats

    try:
        result = stats.compare(list(before.values), list(after.values), before.lower_is_better)
    except (OverflowError, ZeroDivisionError) as exc:   # 1e308-sized values edited in
        return BenchmarkMismatch(before, after, f"the values cannot be compared ({exc})")
    ratio = result["ratio"]
    return BenchmarkChange(before, after, result["verdict"], result["why"],
                           None if ratio is None else ratio - 1, result["threshold"])


# ---- a fleet ----------------------------------------------------------------------------------

class HostBenchmark(NamedTuple):
    """One host's runs against every other host's of the fleet."""

    side: BenchSide
    change: float | None   # its median / the median of the other hosts' medians - 1
    verdict: BenchVerdict       # stats' verdict of its runs against the others' pooled
    others_runs: int

    @property
    def host(self) -> str:
        return self.side.label

    def line(self, unit: str | None) -> str:
        shown = f" {unit}" if unit else ""
        return (f"{self.host}: {number(self.side.median)}{shown} "
                f"({change_text(self.change)} vs the rest, {self.verdict}, "
                f"{self.side.runs} vs {plural(self.others_runs, 'run')})")

    def as_json(self) -> dict[str, object]:
        return {"host": self.host, "median": self.side.median, "runs": self.side.runs,
                "values": list(self.side.values),
                "change_pct": None if self.change is None else round(100 * self.change, 2),
                "verdict": self.verdict, "others_runs": self.others_runs}


class FleetBenchmark(NamedTuple):
    """The fleet's runs of one benchmark: its median and each host against the rest; or,
    when the hosts ran different benchmarks, why nothing is compared."""

    hosts: list[HostBenchmark]
    without: list[str]            # hosts whose snapshots hold no runs
    different: str | None = None  # why nothing is compared

    @property
    def median(self) -> float:
        return median_of([h.side.median for h in self.hosts])

    @property
    def name(self) -> str | None:
        return next((h.side.name for h in self.hosts if h.side.name), None)

    @property
    def unit(self) -> str | None:
        return next((h.side.unit for h in self.hosts if h.side.unit), None)

    @property
    def regression(self) -> bool:
        return any(h.verdict == REGRESSION for h in self.hosts)

    def lines(self) -> list[str]:
        """The fleet's median first, then every host that is not the same as the others."""
        if self.different:
            return [f"benchmark: not compared: {self.different}"]
        name = f"{self.name} " if self.name else ""
        unit = f" {self.unit}" if self.unit else ""
        without = f"; {plural(len(self.without), 'host')} without runs" if self.without else ""
        out = [f"benchmark: {name}fleet median {number(self.median)}{unit} over "
               f"{plural(len(self.hosts), 'host')} with runs{without}"]
        differing = [h for h in self.hosts if h.verdict != SAME]
        out += [f"  {h.line(self.unit)}" for h in differing]
        if len(differing) < len(self.hosts):
            same = len(self.hosts) - len(differing)
            out.append(f"  {'every host' if not differing else plural(same, 'other host')}: "
                       "the same as the rest")
        return out

    def as_json(self) -> dict[str, object]:
        if self.different:
            return {"compared": False, "reason": self.different, "without": self.without}
        first = self.hosts[0].side
        return {"compared": True, "lines": self.lines(), "name": self.name, "unit": self.unit,
                "command": first.command, "metric": first.metric,
                "lower_is_better": first.lower_is_better, "median": self.median,
                "hosts": [h.as_json() for h in self.hosts], "without": self.without}


def fleet_benchmark(documents: list[Snapshot], hosts: list[str]) -> FleetBenchmark | None:
    """Each host's runs against the others'; None unless two hosts or more hold runs."""
    sides = {host: side(document, host) for host, document in zip(hosts, documents)}
    ran = [s for s in sides.values() if s is not None]
    without = [host for host, s in sides.items() if s is None]
    if len(ran) < 2:
        return None
    kinds = {(s.command, s.metric, s.lower_is_better) for s in ran}
    if len(kinds) > 1:
        return FleetBenchmark([], without, f"the hosts ran {len(kinds)} different benchmarks "
                                           "(command, metric or direction)")
    from envsnap.bench import stats

    rows = []
    for one in ran:
        rest = [s for s in ran if s is not one]
        others = [v for s in rest for v in s.values]
        try:
            result = stats.compare(others, list(one.values), one.lower_is_better)
        except (OverflowError, ZeroDivisionError) as exc:   # 1e308-sized values edited in
            return FleetBenchmark([], without, f"the values cannot be compared ({exc})")
        median = median_of([s.median for s in rest])   # two hosts: the other's
        change = one.median / median - 1 if median else None
        rows.append(HostBenchmark(one, change, result["verdict"], len(others)))
    return FleetBenchmark(rows, without)
