"""Benchmark runs: a command run N times on a host, its metric, statistics and GPU telemetry.

The agent runs the command in its bench mode (agent/benchrun.py) in one SSH exec, sampling
NVML while each run goes on; this module turns what it reports into a plain "bench" record.
`envsnap bench` saves that record inside the snapshot captured just before the runs, so the
snapshot a benchmark ran on is the same document. Library code: never prints.

Record (document["bench"]):
    command, cwd, metric, lower_is_better, repeat, host, sample_interval, run_timeout,
    started_at, finished_at        ISO times on the controller
    values: [float]                one per run, in run order
    summary: {n, median, min, max, mean, stdev, spread}   spread = (max - min) / median
    runs: [{run, value, exit_code, seconds, output_tail,
            gpus: {bus id: {samples, sm_mhz: {min, median, max}, power_w, temp_c, ...,
                            clock_event_reasons: {reason: samples seen}}},
            samples: {bus id: {t: [...], sm_mhz: [...], ...}},    raw, thinned
            sampler: {ticks, cpu_seconds} | None}]                what sampling cost
    telemetry: {available, reason, sample_interval, gpus: {bus id: over all runs}}
    server: {command, argv, pid, ready_after_s, env, stopped: "term"|"kill",   with --serve
             workers: {pid: worker facts, "role": "server"}}   also added to the snapshot's
                                                                workers by capture_and_bench
"""
from __future__ import annotations

import os
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Union, cast
from urllib.parse import urlsplit

from envsnap.agent.redact import holds_marker, redact_text
from envsnap.bench import stats as benchstats
from envsnap.defaults import (
    DEFAULT_REPEAT,
    DEFAULT_RUN_TIMEOUT,
    DEFAULT_SAMPLE_INTERVAL,
    DEFAULT_SERVE_TIMEOUT,
)
from envsnap.errors import BenchError, StoreError, UsageError
from envsnap.hosts import capture
from envsnap.hosts.capture import CaptureOptions
from envsnap.hosts.connect import open_transport
from envsnap.hosts.inventory import Host
from envsnap.hosts.payload import AgentOutput, BenchConfig, ServeConfig
from envsnap.hosts.transport import Transport
from envsnap.snapshot import document as snapshot
from envsnap.snapshot.entries import write_entry
from envsnap.snapshot.store import SUFFIX, Store, dump_yaml
from envsnap.text import now_utc, plural, timestamp

if TYPE_CHECKING:
    from envsnap.snapshot.records import (
        Bench,
        BenchGpu,
        BenchGpuBusy,
        BenchRun,
        Process,
        Snapshot,
        Stats,
        Telemetry,
    )

Progress = Callable[[str], None]   # "run 2 of 5: 61.3 s, exit 0, metric 91.7"
DEFAULT_MAX_SAMPLES = 600
RECORD_TAIL_CHARS = 2000   # the agent sends 64 KiB to parse; the snapshot keeps the end
SLACK_SECONDS = 60.0
STOP_SECONDS = 30.0   # the agent's grace period to stop a server, and then some

# (name, value) sets, (name, None) unsets; applied on top of the environment the agent runs in
EnvChanges = tuple[tuple[str, "str | None"], ...]


@dataclass(frozen=True)
class ServeSpec:
    """A server the agent starts before the runs and stops after them (agent/benchserve.py)."""

    cmd: str                  # shell command line that starts the server (like --cmd)
    ready: str                # a regex searched in the server's output (stdout+stderr), or an
                              # http:// or https:// URL that must answer (any status < 500)
    timeout: float = DEFAULT_SERVE_TIMEOUT   # seconds to become ready
    env: EnvChanges = ()

    def check(self) -> None:
        """Refuse bad input before any host is contacted (exit 2)."""
        if not self.cmd.strip():
            raise UsageError("--serve is empty")
        check_ready(self.ready)
        if not self.timeout > 0 or self.timeout == float("inf"):
            raise UsageError(f"--serve-timeout must be a positive number of seconds, "
                             f"not {self.timeout:g}")

    def config(self) -> ServeConfig:
        return {"cmd": self.cmd, "ready": self.ready, "timeout": self.timeout,
                "env": [list(change) for change in self.env]}


def check_ready(ready: str) -> None:
    """--ready: an http(s) URL with a host, or a regex the agent may match (one line, exit 2)."""
    if not ready.strip():
        raise UsageError("--ready is empty: give a regex of the server's ready line or an "
                         "http:// URL that answers once it is up")
    # a value that starts like a URL is one; anything else is a regex (`listening on http://`)
    starts = re.match(r"([A-Za-z][A-Za-z0-9+.-]*)://", ready)
    scheme = starts.group(1).lower() if starts else None
    if scheme is None:
        try:
            benchstats.compile_metric(ready)
        except UsageError as exc:
            raise UsageError(str(exc).replace("--metric", "--ready")) from None
        return
    if scheme not in ("http", "https") or not ready.startswith(f"{scheme}://"):
        raise UsageError(f"--ready {ready!r}: a URL must be http:// or https:// (lower "
                         "case), else give a regex of the server's ready line")
    try:
        parts = urlsplit(ready)
        parts.port   # noqa: B018 (raises ValueError for a port that is not a number)
    except ValueError as exc:
        raise UsageError(f"--ready {ready!r} is not a URL: {exc}") from None
    if not parts.hostname:
        raise UsageError(f"--ready {ready!r} names no host")


@dataclass(frozen=True)
class BenchSpec:
    cmd: str
    metric: str
    repeat: int = DEFAULT_REPEAT
    lower_is_better: bool = False
    cwd: str | None = None
    sample_interval: float | None = DEFAULT_SAMPLE_INTERVAL   # 0 or None: no sampling
    run_timeout: float = DEFAULT_RUN_TIMEOUT
    max_samples: int = DEFAULT_MAX_SAMPLES
    serve: ServeSpec | None = None
    env: EnvChanges = ()   # env changes for the benchmark command itself

    def check(self) -> None:
        """Refuse bad input before any host is contacted (exit 2)."""
        if not self.cmd.strip():
            raise UsageError("--cmd is empty")
        benchstats.compile_metric(self.metric)
        if self.repeat < 1:
            raise UsageError(f"--repeat must be at least 1, not {self.repeat}")
        if self.run_timeout <= 0:
            raise UsageError(f"--run-timeout must be positive, not {self.run_timeout:g}")
        if self.sample_interval is not None and self.sample_interval < 0:
            raise UsageError(f"--sample-interval must be 0 (off) or more, "
                             f"not {self.sample_interval:g}")
        if self.serve is not None:
            self.serve.check()


def agent_config(spec: BenchSpec, host: Host) -> BenchConfig:
    # `local` runs where the user stands; a remote host in the login home, as ssh would.
    cwd = spec.cwd or (os.getcwd() if host.is_local else None)
    return {"mode": "bench", "cmd": spec.cmd, "repeat": spec.repeat, "cwd": cwd,
            "metric": spec.metric, "sample_interval": spec.sample_interval or 0,
            "timeout": spec.run_timeout, "max_samples": spec.max_samples,
            "env": [list(change) for change in spec.env],
            "serve": spec.serve.config() if spec.serve is not None else None}


def ignore(progress: str) -> None:
    pass


def bench_on(transport: Transport, host: Host, spec: BenchSpec,
             progress: Progress = ignore) -> Bench:
    """Run the benchmark through an open transport; the record, or BenchError. The agent
    is followed: `progress` gets a line as each run ends, and the runs stop if this process
    goes away (Ctrl-C, a dropped connection)."""
    spec.check()
    started_at = timestamp()
    timeout = spec.repeat * (spec.run_timeout + 10) + SLACK_SECONDS
    if spec.serve is not None:
        timeout += spec.serve.timeout + STOP_SECONDS
    output = capture.run_agent(transport, host, agent_config(spec, host), timeout, progress)
    reported = output.get("bench")   # an object where it is (capture.agent_shaped)
    if reported is None:
        raise BenchError(f"{host.name}: the agent did not run the benchmark "
                         "(an agent older than bench mode?)")
    record = build_record(spec, reported, host.name)
    record["started_at"] = started_at
    record["finished_at"] = timestamp()
    return record


def run_bench(host: Host, spec: BenchSpec,
              options: CaptureOptions | None = None) -> Bench:
    """Connect, run the benchmark, disconnect: the bench record."""
    options = options or CaptureOptions()
    spec.check()
    with open_transport(host, options.connect_timeout, options.accept_new_host_keys) as transport:
        return bench_on(transport, host, spec)


# ---- the agent's report -> the record (pure) ----------------------------------------------
# The report is the agent's JSON (AgentOutput) until build_record makes it a Bench record,
# as snapshot.build makes a capture's a Snapshot: the agent is the program schema.py's
# description of a bench record was written from, and every later load checks it again.

def last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else "(no output)"


def run_value(run: AgentOutput, total: int, metric: str, limit: float) -> float:
    """The metric of one run, or BenchError naming the run and showing its last line; a run
    stopped at its time limit says the limit (`limit`, --run-timeout), not the seconds the
    stopping took on a busy machine."""
    where = f"run {run['run']} of {total}"
    shown = last_line(run.get("output_tail", ""))
    if run.get("timed_out"):
        raise BenchError(f"benchmark {where} timed out after {limit:g} s (--run-timeout); "
                         f"last output line: {shown}")
    if run.get("exit_code") != 0:
        raise BenchError(f"benchmark {where} exited {run.get('exit_code')}; "
                         f"last output line: {shown}")
    try:
        value = benchstats.parse_metric(run.get("output_tail", ""), metric)
    except ValueError as exc:
        raise BenchError(f"benchmark {where}: {exc}; last output line: {shown}") from None
    if value is None:
        raise BenchError(f"benchmark {where}: no match for --metric {metric!r} in its output; "
                         f"last output line: {shown}")
    return value


def build_record(spec: BenchSpec, reported: AgentOutput, host_name: str) -> Bench:
    if reported.get("error"):
        raise BenchError(f"{host_name}: {reported['error']}")
    runs = reported.get("runs", [])
    values = [run_value(run, spec.repeat, spec.metric, spec.run_timeout) for run in runs]
    if len(values) < spec.repeat:   # the agent stops early only after a bad run
        raise BenchError(f"{host_name}: only {len(values)} of {spec.repeat} runs reported "
                         f"({reported.get('stopped') or 'no reason given'})")
    telemetry = dict(reported.get("telemetry") or {})
    telemetry["gpus"] = telemetry_over_runs(telemetry.get("gpus") or {}, runs)
    # the command as the agent returned it: a secret on it was masked there
    command = reported.get("cmd") if isinstance(reported.get("cmd"), str) else \
        redact_text(spec.cmd)
    record: Bench = {"command": command, "cwd": reported.get("cwd"), "metric": spec.metric,
                     "lower_is_better": spec.lower_is_better, "repeat": spec.repeat,
                     "host": host_name, "sample_interval": spec.sample_interval or 0,
                     "run_timeout": spec.run_timeout, "values": values,
                     # schema.py keeps a summary as statistic -> number, as on disk
                     "summary": cast("dict[str, float | None]",
                                     benchstats.summarise(values)),
                     "runs": [run_entry(run, value) for run, value in zip(runs, values)],
                     "telemetry": cast("Telemetry", telemetry)}
    if reported.get("server") is not None:
        record["server"] = reported["server"]
    return record


def run_entry(run: AgentOutput, value: float) -> BenchRun:
    return {"run": run["run"], "value": value, "exit_code": run["exit_code"],
            "seconds": run["seconds"], "output_tail": run["output_tail"][-RECORD_TAIL_CHARS:],
            "gpus": run.get("gpus", {}), "samples": run.get("samples", {}),
            "buffered": run.get("buffered", {}), "sampler": run.get("sampler")}


def telemetry_over_runs(gpus: AgentOutput, runs: list[AgentOutput]) -> AgentOutput:
    """Per GPU over every run: lowest min, median of the run medians, highest max, and how
    many samples saw each throttle reason."""
    combined: AgentOutput = {}
    for bus, described in gpus.items():
        per_run = [run["gpus"][bus] for run in runs if bus in run.get("gpus", {})]
        entry = dict(described)
        for name in ("sm_mhz", "mem_mhz", "power_w", "temp_c", "util_gpu_pct",
                     "pcie_rx_kbs", "pcie_tx_kbs"):
            entry[name] = spread_over([summary.get(name) for summary in per_run])
        entry["clock_event_reasons"] = add_counts(
            [summary.get("clock_event_reasons") or {} for summary in per_run])
        entry["samples"] = sum(summary.get("samples", 0) for summary in per_run)
        entry["busy"] = busy_over_runs([summary.get("busy") for summary in per_run])
        power_busy = [summary["power_busy"] for summary in per_run if summary.get("power_busy")]
        if power_busy:
            entry["power_busy"] = {
                "phases": sum(p["phases"] for p in power_busy),
                "seconds": round(sum(p["seconds"] for p in power_busy), 3),
                "threshold_w": max(p["threshold_w"] for p in power_busy),
                "buffered": sum(p["buffered"] for p in power_busy)}
        combined[bus] = entry
    return combined


def busy_over_runs(busy: list[AgentOutput | None]) -> AgentOutput | None:
    present = [summary for summary in busy if summary]
    if not present:
        return None
    combined: AgentOutput = {"samples": sum(s.get("samples", 0) for s in present)}
    for name in ("sm_mhz", "mem_mhz", "power_w", "temp_c"):
        combined[name] = spread_over([summary.get(name) for summary in present])
    combined["clock_event_reasons"] = add_counts(
        [summary.get("clock_event_reasons") or {} for summary in present])
    return combined


def spread_over(spreads: list[AgentOutput | None]) -> Stats | None:
    present = [s for s in spreads if s]
    if not present:
        return None
    return {"min": min(s["min"] for s in present),
            "median": statistics.median(s["median"] for s in present),
            "max": max(s["max"] for s in present)}


def add_counts(counts: Sequence[Mapping[str, float | None]]) -> dict[str, float]:
    total: dict[str, float] = {}
    for one in counts:
        for name, count in one.items():
            total[name] = total.get(name, 0) + (count or 0)
    return total


# ---- capture + bench, saved together; rerun and compare ------------------------------------

@dataclass
class BenchOutcome:
    label: str
    document: Snapshot
    problems: list[str]
    path: Path | None = None
    not_saved: str | None = None   # why the store refused the record; `path` is then its
                                   # fallback copy (keep_unsaved)

    @property
    def record(self) -> Bench:
        record = snapshot.bench(self.document)
        assert record is not None, "a BenchOutcome is made with its record"
        return record


def capture_and_bench(host: Host, spec: BenchSpec, store: Store, options: CaptureOptions,
                      progress: Progress = ignore,
                      fallbacks: Sequence[Path] = ()) -> BenchOutcome:
    """Snapshot the host, run the benchmark on it, save both as one document.

    Nothing is saved unless every run succeeded: a failed benchmark leaves no half record.
    The store must take a file and have room for the record before the first run; if it
    still refuses the record at the end (moved, unmounted, filled by something else), the
    record goes to the first of `fallbacks` that takes it: runs that took hours are not
    thrown away."""
    spec.check()
    label = capture.plan_labels([host], options.label, now_utc())[host.name]
    capture.check_before_capture({host.name: label}, store, options.force)
    with open_transport(host, options.connect_timeout, options.accept_new_host_keys) as transport:
        document = capture.snapshot_document(transport, host, label, options)
        check_room(store, len(dump_yaml(document)) + spec.repeat * RUN_RECORD_BOUND)
        record = bench_on(transport, host, spec, progress)
        snapshot.set_bench(document, record)
        # the server ran on the state this document holds: a worker of it like any --proc one
        snapshot.add_workers(document, server_workers(record))
    try:
        saved = capture.save_snapshot(store, document, label, replace=True)
    except StoreError as exc:
        return BenchOutcome(label=label, path=keep_unsaved(document, label, fallbacks, exc),
                            document=document, problems=snapshot.problems(document),
                            not_saved=str(exc))
    return BenchOutcome(label=label, path=saved.path, document=document, problems=saved.problems)


def server_workers(record: Bench) -> dict[str, Process]:
    """The managed server's processes, as workers of the snapshot ({} without --serve)."""
    server = record.get("server")
    return server.get("workers", {}) if server is not None else {}


# What one run can add to a record at most: its output tail and its thinned GPU samples
# (DEFAULT_MAX_SAMPLES per GPU, eight GPUs, a few bytes of YAML per number).
RUN_RECORD_BOUND = 512 * 1024


def check_room(store: Store, needed: int) -> None:
    """Refuse before the first run a store without room for the record (free blocks as a
    user sees them: root's reserve is not counted on)."""
    try:
        stats = os.statvfs(store.root)
    except OSError:
        return        # check_writable has just written there: nothing more to learn
    if stats.f_blocks == 0:
        return        # a filesystem that reports no sizes (some network mounts)
    free = stats.f_bavail * stats.f_frsize
    if free < needed:
        raise StoreError(f"store {store.root} has {free // 1024} KiB free; the snapshot and "
                         f"its runs need up to {needed // 1024} KiB: free some space or "
                         "choose another --store")


def keep_unsaved(document: Snapshot, label: str, fallbacks: Sequence[Path],
                 refused: StoreError) -> Path:
    """The record the store refused, written to the first folder of `fallbacks` that takes
    it, under a name not yet used; StoreError (naming each try) when none does."""
    name = label.replace("/", "-")
    text = dump_yaml(document)
    tried = [str(refused)]
    for folder in fallbacks:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{name}{SUFFIX}"
            number = 1
            while os.path.lexists(path):   # a link there is never replaced either
                number += 1
                path = folder / f"{name}-{number}{SUFFIX}"
            write_entry(path, text)
            return path
        except OSError as exc:
            tried.append(f"{folder}: {exc.strerror}")
    raise StoreError(f"the benchmark ran but its record could not be saved anywhere "
                     f"({'; '.join(tried)})")


def spec_from_record(record: Bench) -> BenchSpec:
    """The benchmark a record ran, to run it again the same way."""
    return BenchSpec(cmd=record.get("command") or "", metric=record.get("metric") or "",
                     repeat=int(record.get("repeat") or len(record["values"])),
                     lower_is_better=bool(record.get("lower_is_better")), cwd=record.get("cwd"),
                     sample_interval=record.get("sample_interval", DEFAULT_SAMPLE_INTERVAL),
                     run_timeout=float(record.get("run_timeout") or DEFAULT_RUN_TIMEOUT))


def rerun_and_compare(document: Snapshot, host: Host,
                      options: CaptureOptions | None = None,
                      threshold: float = benchstats.DEFAULT_THRESHOLD,
                      alpha: float = benchstats.DEFAULT_ALPHA, *,
                      command: str | None = None, serve: ServeSpec | None = None
                      ) -> tuple[Bench, benchstats.Comparison]:
    """Run a snapshot's recorded benchmark again on `host`: (the new record, the verdict).
    `command`, the user's own, runs instead of the recorded one (restore --rerun-cmd);
    `serve` starts a server for the runs (restore --rerun --serve)."""
    recorded = snapshot.bench(document)
    if recorded is None:
        raise UsageError(f"snapshot {snapshot.label(document)!r} has no recorded benchmark "
                         "to rerun (record one with envsnap bench HOST --label ...)")
    spec = spec_from_record(recorded)
    if command is not None:
        spec = replace(spec, cmd=command)
    if serve is not None:
        spec = replace(spec, serve=serve)
    elif holds_marker(spec.cmd):
        raise UsageError(f"the recorded benchmark command {spec.cmd!r} had a secret masked "
                         "at capture: give the command to run")
    record = run_bench(host, spec, options)
    verdict = benchstats.compare(recorded["values"], record["values"], spec.lower_is_better,
                                 threshold, alpha)
    return record, verdict


# ---- what `envsnap bench` shows (lines, printed by envsnap/cli/) ---------------------------------

GpuSummary = Union["BenchGpu", "BenchGpuBusy"]


def under_load(summary: BenchGpu) -> GpuSummary:
    """A GPU's readings while it was busy; {} when no reading was: idle readings lie about
    the part that is measured."""
    if "busy" not in summary:
        return summary   # recorded by an agent that did not yet tell busy readings apart
    return summary.get("busy") or {}


def reading(summary: GpuSummary, name: str) -> Stats | None:
    """One reading's spread (`sm_mhz`): schema.py types a bench GPU's other fields as Stats,
    which a TypedDict has no words for, so they are read by name here."""
    fields: Mapping[str, object] = summary
    return cast("Stats | None", fields.get(name))


def busy_unread(summary: BenchGpu) -> bool:
    """The driver's buffered power saw the GPU busy, yet no polled reading fell inside."""
    return not summary.get("busy") and bool((summary.get("power_busy") or {}).get("phases"))


def sm_clock_text(gpus: dict[str, BenchGpu]) -> str:
    """The run's median SM clock under load: one number, or the range over GPUs; "short"
    when the GPU was busy for less than the sampling interval, "idle" when never busy."""
    medians = sorted(median for s in gpus.values()
                     if (median := (reading(under_load(s), "sm_mhz") or {}).get("median"))
                     is not None)
    if not medians:
        if any(busy_unread(s) for s in gpus.values()):
            return "short"
        return "idle" if gpus else "-"
    low, high = f"{medians[0]:g}", f"{medians[-1]:g}"
    return low if low == high else f"{low}-{high}"


def reasons_text(gpus: dict[str, BenchGpu]) -> str:
    counts = add_counts([under_load(s).get("clock_event_reasons") or {} for s in gpus.values()])
    return ",".join(sorted(counts, key=lambda name: (-counts[name], name))) or "-"


def telemetry_notes(runs: list[BenchRun], interval: float) -> list[str]:
    """What the SM MHz column's words mean, said once under the table."""
    short = [str(run["run"]) for run in runs if sm_clock_text(run.get("gpus", {})) == "short"]
    idle = [str(run["run"]) for run in runs if sm_clock_text(run.get("gpus", {})) == "idle"]
    notes = []
    if short:
        notes.append(f"run {', '.join(short)}: GPU busy for less than the sampling interval "
                     f"({interval:g} s): its clocks under load were not read "
                     f"(busy phases seen in the driver's power samples)")
    if idle:
        notes.append(f"run {', '.join(idle)}: no GPU was busy while the benchmark ran")
    return notes


def format_record(record: Bench) -> list[str]:
    lines = [f"{'run':>4}  {'value':>12}  {'seconds':>9}  {'SM MHz':>9}  throttle reasons"]
    for run in record["runs"]:
        lines.append(f"{run['run']:>4}  {run['value']:>12g}  {run['seconds']:>9.2f}  "
                     f"{sm_clock_text(run['gpus']):>9}  {reasons_text(run['gpus'])}")
    summary = record["summary"]
    spread = "-" if summary["spread"] is None else f"{summary['spread']:.1%}"
    lines.append(f"median {summary['median']:g}  min {summary['min']:g}  "
                 f"max {summary['max']:g}  spread {spread}  stdev {summary['stdev']:.3g}  "
                 f"({plural(int(summary['n'] or 0), 'run')}, "
                 f"{'lower' if record['lower_is_better'] else 'higher'} is better)")
    telemetry = record.get("telemetry") or {}
    if not telemetry.get("available"):
        lines.append(f"GPU telemetry: none ({telemetry.get('reason') or 'not sampled'})")
    else:
        lines += telemetry_notes(record["runs"], record.get("sample_interval") or 0)
    return lines
