"""A bug report of one snapshot, optionally compared with another: the model and its JSON.

build_report gathers what a report shows (facts.py: the summary rows; parts.py: the
folded long parts; the diff module and its own renderers for the comparison) and masks it
(snapshot/mask.py) as one last step, so every rendering (render.py: markdown and html; as_json
here; render.render picks one by format) shows the same masked text. Library code: never prints.

A report is a rendering, not a check: `envsnap report --vs` exits 0 whatever drifted;
`envsnap diff` is the command whose exit code says "drift".
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envsnap import __version__
from envsnap.bench.run import reasons_text, sm_clock_text
from envsnap.diff.compare import DiffOptions, DiffReport, diff, side_of
from envsnap.diff.render_formats import as_json as diff_json
from envsnap.diff.render_formats import markdown as diff_markdown
from envsnap.diff.render_text import blocks, change_text, verdict
from envsnap.errors import StoreError, UsageError
from envsnap.report.charts import Chart
from envsnap.report.facts import Fact, summary
from envsnap.report.figures import report_charts
from envsnap.report.parts import Part, parts
from envsnap.report.timeline_part import TimelineSection, section_of
from envsnap.snapshot import document as snapshot
from envsnap.snapshot.document import problems
from envsnap.snapshot.mask import Masker
from envsnap.snapshot.store import atomic_write, holds_snapshot
from envsnap.text import dump_json, plural, visible

if TYPE_CHECKING:
    from envsnap.snapshot.records import Bench, Snapshot, Telemetry
    from envsnap.timeline.model import Timeline

REPORT_FORMAT = 1


@dataclass(frozen=True)
class ReportOptions:
    mask: bool = True    # hardware ids and home paths; secrets are redacted regardless
    full: bool = False   # patches and long diff parts in full


@dataclass(frozen=True)
class FindingRow:
    """One diff finding as a table row, with its long parts (commits, patches)."""

    rank: int
    section: str
    where: str
    change: str
    why: str
    parts: list[Part] = field(default_factory=list)


@dataclass(frozen=True)
class Comparison:
    """The diff against an older snapshot, in the diff's own renderings."""

    against: str
    drift: bool
    verdict: str               # the benchmark's line first when both sides hold runs
    benchmark: str | None      # that line ("benchmark: busbw 286 -> 26.3 GB/s (...)"), which
                               # the report leads with
    findings: list[FindingRow]
    unchanged: list[str]
    markdown: str              # render_formats.markdown: the same text `diff --markdown` prints
    envelope: dict[str, Any]   # render_formats.as_json: the same document `diff --json` prints


@dataclass(frozen=True)
class Report:
    label: str
    subject: dict[str, Any]    # label, host, hostname, captured_at, source, envsnap version
    masked: bool
    not_captured: list[str]    # failed collectors and unreadable repos
    summary: list[Fact]
    bench: list[Fact]
    comparison: Comparison | None
    parts: list[Part]
    generated_by: str = f"envsnap {__version__}"
    charts: list[Chart] = field(default_factory=list)   # drawn by html and the bundle
    timeline: TimelineSection | None = None   # --timeline: the host's changes (timeline_part)


def build_report(document: Snapshot, vs: Snapshot | None = None,
                 options: ReportOptions | None = None,
                 sources: tuple[str, str] = ("", ""),
                 timeline: Timeline | None = None) -> Report:
    """sources: what the user named the snapshot and the --vs one (labels or paths);
    timeline: the host's timeline, when asked (read by the caller: a report reaches no
    host), laid out as a section and masked with the rest."""
    options = options or ReportOptions()
    masker = Masker(options.mask)
    # Tables are laid out from masked facts, so their columns line up; the diff runs on the
    # facts as captured (a masked id would hide a change), and its text is masked after.
    shown = masker.tree(document)
    side = side_of(shown, sources[0])
    report = Report(
        label=side.label,
        subject=dict(side.as_json(), envsnap_version=snapshot.envsnap_version(shown)),
        masked=options.mask, not_captured=problems(shown), summary=summary(shown),
        bench=bench_facts(snapshot.bench(shown)),
        comparison=compare(vs, document, sources[1], sources[0], options.full) if vs else None,
        parts=parts(shown, options.full),
        # from the facts as captured: the last step below masks their labels like the rest
        charts=report_charts(document, vs,
                             (side.label, side_of(vs, sources[1]).label if vs else "")),
        timeline=section_of(timeline) if timeline is not None else None)
    masked: Report = masker.tree(report)
    return masked


# ---- the comparison -------------------------------------------------------------------------

def compare(older: Snapshot, newer: Snapshot, older_source: str,
            newer_source: str, full: bool) -> Comparison:
    result = diff(older, newer, DiffOptions(), (older_source, newer_source))
    return Comparison(against=result.a.label, drift=result.drift, verdict=verdict(result),
                      benchmark=result.benchmark.line() if result.benchmark else None,
                      findings=finding_rows(result, full), unchanged=result.unchanged,
                      markdown=diff_markdown(result, full),
                      envelope=json.loads(diff_json(result, full)))


def finding_rows(result: DiffReport, full: bool) -> list[FindingRow]:
    names = (result.a.label, result.b.label)
    width = None if full else 60   # values whole with --all
    return [FindingRow(f.rank, f.section, f.where or "(section)", change_text(f, width), f.why,
                       [Part(b.title, b.lines, b.code) for b in blocks(f, names, full)])
            for f in result.findings]


# ---- the benchmark ----------------------------------------------------------------------------

def bench_facts(record: Bench | None) -> list[Fact]:
    if record is None or "summary" not in record:
        return []
    s = record["summary"]
    spread = "-" if s.get("spread") is None else f"{s['spread']:.1%}"
    better = "lower" if record.get("lower_is_better") else "higher"
    rows = [Fact("command", str(record.get("command"))),
            Fact("metric", f"{record.get('metric')} ({better} is better)"),
            Fact("runs", f"{plural(int(s.get('n') or 0), 'run')}: "
                         + ", ".join(f"{v:g}" for v in record["values"])),
            Fact("median", f"{s.get('median'):g} (min {s.get('min'):g}, max {s.get('max'):g}, "
                           f"spread {spread}, stdev {s.get('stdev', 0):.3g})"),
            Fact("when", f"{record.get('started_at', '?')} to {record.get('finished_at', '?')}")]
    return rows + telemetry_facts(record.get("telemetry"))


def telemetry_facts(telemetry: Telemetry | None) -> list[Fact]:
    if telemetry is None or not telemetry.get("available"):
        reason = telemetry.get("reason") if telemetry is not None else None
        return [Fact("GPU telemetry", f"none ({reason or 'not sampled'})")]
    gpus = telemetry.get("gpus", {})
    reasons = reasons_text(gpus) if reasons_text(gpus) != "-" else "none"
    clocks = sm_clock_text(gpus)
    if clocks == "short":
        seen = "GPU busy for less than the sampling interval: its clocks under load were not read"
    elif clocks in ("idle", "-"):
        seen = "no GPU was busy while the benchmark ran"
    else:
        seen = f"SM clock median {clocks} MHz while busy"
    return [Fact("GPU telemetry", f"{seen}, {plural(len(gpus), 'GPU')}; "
                                  f"clock event reasons seen: {reasons}")]


# ---- JSON ----------------------------------------------------------------------------------------

def part_json(part: Part) -> dict[str, Any]:
    return {"title": part.title, "lines": part.lines, "code": part.code}


def envelope(report: Report) -> dict[str, Any]:
    """The versioned JSON form: {"envsnap_report": 1, ...}; the comparison is the diff's own
    envelope ({"envsnap_diff": 1, ...}), so a consumer of `diff --json` reads it as is."""
    return {
        "envsnap_report": REPORT_FORMAT, "generated_by": report.generated_by,
        "label": report.label, "subject": report.subject, "masked": report.masked,
        "not_captured": report.not_captured,
        "summary": [{"fact": f.name, "value": f.value} for f in report.summary],
        "bench": [{"fact": f.name, "value": f.value} for f in report.bench] or None,
        "diff": report.comparison.envelope if report.comparison else None,
        "details": [part_json(p) for p in report.parts],
    } | ({"timeline": asdict(report.timeline)} if report.timeline else {})


def as_json(report: Report) -> str:
    return dump_json(envelope(report))


def save_text(path: str | Path, text: str) -> Path:
    """A report written for people (`-o`), with its control characters escaped as stdout
    escapes them (text.visible): a file is read in a terminal (`cat`) or an editor too, where
    ESC, a bidi override or an 8-bit CSI from a paste or a commit subject would act."""
    target = Path(path)
    if holds_snapshot(target):   # a report written over a snapshot would lose it for good
        raise UsageError(f"{target} holds a snapshot: write the report elsewhere")
    try:
        atomic_write(target, visible(text))
    except OSError as exc:
        raise StoreError(f"cannot write {target}: {exc.strerror or exc}") from None
    return target
