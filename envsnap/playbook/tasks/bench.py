"""`bench`: run a benchmark N times on the host (envsnap.bench: metric regex, statistics,
GPU telemetry while it runs) and, given a baseline, a verdict: regression / same / can't tell.

A regression fails the task as drift (exit 1), not as an error: the host ran fine, the
numbers did not come back. In check mode nothing runs.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

from envsnap.bench import run as bench
from envsnap.bench import stats as benchstats
from envsnap.defaults import (
    DEFAULT_REPEAT,
    DEFAULT_RUN_TIMEOUT,
    DEFAULT_SAMPLE_INTERVAL,
    DEFAULT_SERVE_TIMEOUT,
)
from envsnap.errors import ArgError, BenchError
from envsnap.hosts.capture import save_snapshot
from envsnap.playbook.tasks.base import (
    Context,
    Module,
    ModuleResult,
    TaskData,
    as_bool,
    as_number,
    as_str,
    failed,
    finite_number,
)
from envsnap.playbook.tasks.facts import CaptureFields, load_document, take_snapshot
from envsnap.snapshot import document as snapshot
from envsnap.text import plural
from envsnap.verdicts import REGRESSION

if TYPE_CHECKING:
    from envsnap.snapshot.records import Bench

NUMBERS = ("repeat", "sample_interval", "run_timeout", "threshold", "serve_timeout")


class _Required(TypedDict):
    cmd: object          # the benchmark's command on the host
    metric: object       # a regex whose first group is the number


class BenchArgs(_Required, total=False):
    """`envsnap bench`'s options; repos, procs and python for the snapshot `label` saves."""

    repeat: object
    lower_is_better: object
    cwd: object
    sample_interval: object
    run_timeout: object
    baseline: object     # a snapshot with a recorded bench, or a list of values
    threshold: object
    fail_on_regression: object
    label: object        # save the host's snapshot with the runs under this name
    force: object
    serve: object        # a server started before the runs
    ready: object        # its ready line (a regex) or URL
    serve_timeout: object
    repos: object
    procs: object
    python: object


def serve_of(args: BenchArgs, numbers: dict[str, float]) -> bench.ServeSpec | None:
    """serve/ready/serve_timeout: a server started before the runs (like --serve)."""
    if not args.get("serve"):
        if args.get("ready") or "serve_timeout" in numbers:
            raise ArgError("bench: ready and serve_timeout are about a server: give serve too")
        return None
    if not args.get("ready"):
        raise ArgError("bench: serve needs ready (a regex of its ready line, or a URL)")
    return bench.ServeSpec(cmd=as_str(args, "serve"), ready=as_str(args, "ready"),
                           timeout=numbers.get("serve_timeout", DEFAULT_SERVE_TIMEOUT))


def spec_of(args: BenchArgs) -> bench.BenchSpec:
    numbers = {name: as_number(args, name, 0.0) for name in NUMBERS if args.get(name) is not None}
    spec = bench.BenchSpec(cmd=as_str(args, "cmd"), metric=as_str(args, "metric"),
                           repeat=int(numbers.get("repeat", DEFAULT_REPEAT)),
                           lower_is_better=as_bool(args, "lower_is_better"),
                           cwd=str(args["cwd"]) if args.get("cwd") else None,
                           sample_interval=numbers.get("sample_interval",
                                                       DEFAULT_SAMPLE_INTERVAL),
                           run_timeout=numbers.get("run_timeout", DEFAULT_RUN_TIMEOUT),
                           serve=serve_of(args, numbers))
    try:
        spec.check()
    except Exception as exc:  # UsageError for a bad regex or count: the playbook's fault
        raise ArgError(f"bench: {exc}") from None
    return spec


def baseline_values(ctx: Context, value: object) -> list[float] | None:
    """A snapshot (label, file or document) with a recorded bench, or a list of values."""
    if value is None or value == "":
        return None
    if isinstance(value, list):
        numbers = [finite_number(item) for item in value]
        if None in numbers:
            raise ArgError(f"bench: baseline must be a snapshot or a list of numbers, "
                           f"not {value!r}")
        return [number for number in numbers if number is not None]
    document = load_document(ctx, value)
    recorded = snapshot.bench(document)
    if recorded is None or not recorded.get("values"):
        raise ArgError("bench: the baseline snapshot has no recorded benchmark")
    return [float(v) for v in recorded["values"]]


def run_benchmark(ctx: Context, args: BenchArgs) -> ModuleResult:
    spec = spec_of(args)
    baseline = baseline_values(ctx, args.get("baseline"))
    if ctx.check:
        return ModuleResult(skipped=True,
                            msg=f"would run {spec.cmd!r} {plural(spec.repeat, 'time')}")
    label = str(args.get("label") or "")
    if label and ctx.store.exists(label) and not as_bool(args, "force"):
        return failed(f"snapshot {label!r} already exists (force: true replaces it)")
    try:
        record = bench.bench_on(ctx.transport, ctx.host, spec)
    except BenchError as exc:  # a run failed or printed no metric: the task fails, the host is fine
        return failed(str(exc))
    data = TaskData(record=record, values=record["values"],
                    median=record["summary"]["median"])
    said = summary_text(record)
    if args.get("label"):
        data["label"] = save(ctx, args, record)
        said += f"; saved as {data['label']}"
    if baseline is None:
        return ModuleResult(changed=True, msg=said, data=data)
    return judged(args, spec, baseline, record, said, data)


def summary_text(record: Bench) -> str:
    summary = record["summary"]
    spread = "-" if summary["spread"] is None else f"{summary['spread']:.1%}"
    return (f"median {summary['median']:g} over {plural(int(summary['n'] or 0), 'run')} "
            f"(min {summary['min']:g}, max {summary['max']:g}, spread {spread})")


def judged(args: BenchArgs, spec: bench.BenchSpec, baseline: list[float],
           record: Bench, said: str, data: TaskData) -> ModuleResult:
    threshold = as_number(args, "threshold", 0.0) or benchstats.DEFAULT_THRESHOLD
    verdict = benchstats.compare(baseline, record["values"], spec.lower_is_better, threshold)
    data["verdict"] = verdict
    said += f"; vs baseline: {verdict['verdict']} ({verdict['why']})"
    regressed = verdict["verdict"] == REGRESSION and \
        as_bool(args, "fail_on_regression", True)
    return ModuleResult(changed=True, failed=regressed, drift=regressed, msg=said, data=data)


def save(ctx: Context, args: BenchArgs, record: Bench) -> str:
    """As `envsnap bench --label`: the host's snapshot with the runs inside it."""
    label = str(args["label"])
    document = take_snapshot(ctx, CaptureFields(repos=args.get("repos"),
                                                procs=args.get("procs"),
                                                python=args.get("python")), label)
    snapshot.set_bench(document, record)
    snapshot.add_workers(document, bench.server_workers(record))
    return save_snapshot(ctx.store, document, label, replace=as_bool(args, "force")).label


MODULE = Module[BenchArgs](name="bench", run=run_benchmark, required=("cmd", "metric"),
                optional=("repeat", "lower_is_better", "cwd", "sample_interval", "run_timeout",
                          "baseline", "threshold", "fail_on_regression", "label", "force",
                          "repos", "procs", "python", "serve", "ready", "serve_timeout"),
                free_form=None)
