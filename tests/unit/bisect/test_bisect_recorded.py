"""bisect's benchmark from the snapshots (inputs.bench_spec): what is given wins, what is
left out comes from the benchmark both recorded alike, and anything else is one line."""
from __future__ import annotations

from typing import Any, cast

import pytest

from envsnap.bisect.inputs import BenchAsked, bench_spec
from envsnap.errors import UsageError
from envsnap.snapshot.records import Snapshot

LABELS = ("good", "bad")
REPO = "/src/app"


def snap(**bench: Any) -> Snapshot:
    record = {"command": "python bench.py", "metric": "tok/s: ([0-9.]+)", "cwd": "/src/app/b",
              "lower_is_better": False, "values": [94.0, 95.0], **bench}
    return cast(Snapshot, {"schema": 1, "meta": {}, "facts": {}, "bench": record})


def asked(**given: Any) -> BenchAsked:
    fields: dict[str, Any] = {"cmd": None, "metric": None, "cwd": None,
                              "lower_is_better": False, "repeat": 3, "run_timeout": 60.0}
    return BenchAsked(**{**fields, **given})


def test_left_out_parts_come_from_the_recorded_benchmark() -> None:
    spec, recorded = bench_spec(asked(), snap(), snap(values=[60.0]), LABELS, REPO)
    assert recorded is not None
    assert (spec.cmd, spec.metric, spec.cwd, spec.repeat) == \
        ("python bench.py", "tok/s: ([0-9.]+)", "/src/app/b", 3)
    timed = bench_spec(asked(metric="([0-9.]+) ms", lower_is_better=True), snap(), snap(),
                       LABELS, REPO)[0]
    assert (timed.cmd, timed.metric, timed.lower_is_better) == \
        ("python bench.py", "([0-9.]+) ms", True)
    assert bench_spec(asked(), snap(lower_is_better=True), snap(lower_is_better=True),
                      LABELS, REPO)[0].lower_is_better


def test_given_cmd_and_metric_run_in_the_repository_unless_the_snapshots_ran_them() -> None:
    mine, recorded = bench_spec(asked(cmd="./b.sh", metric="x"), snap(), snap(), LABELS, REPO)
    assert recorded is None and mine.cwd == REPO
    same = bench_spec(asked(cmd="python bench.py", metric="x"), snap(), snap(), LABELS, REPO)
    assert same[0].cwd == "/src/app/b"
    told = bench_spec(asked(cmd="./b.sh", metric="x", cwd="/tmp"), snap(), snap(), LABELS,
                      REPO)
    assert told[0].cwd == "/tmp"


@pytest.mark.parametrize(("good", "bad", "message"), [
    (snap(), cast(Snapshot, {"schema": 1, "meta": {}, "facts": {}}),
     "bisect needs --cmd and --metric: snapshot 'bad' records no benchmark"),
    (snap(), snap(cwd="/elsewhere"), "recorded different benchmarks"),
    (snap(), snap(metric="other"), "recorded different benchmarks"),
    (snap(command="curl -H 'token: <redacted>' x"), snap(command="curl -H 'token: <redacted>' x"),
     "had a secret masked at capture: give it with --cmd"),
])
def test_no_benchmark_to_take_is_one_line(good: Snapshot, bad: Snapshot, message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace("*", r"\*")):
        bench_spec(asked(), good, bad, LABELS, REPO)


def test_a_recorded_server_starts_again_once_ready_is_given() -> None:
    server = {"server": {"command": "python -m server --port 30000"}}
    with pytest.raises(UsageError, match=r"ran with a server .*: give --ready"):
        bench_spec(asked(), snap(**server), snap(**server), LABELS, REPO)
    spec = bench_spec(asked(ready="http://127.0.0.1:30000/health"), snap(**server),
                      snap(**server), LABELS, REPO)[0]
    assert spec.serve is not None and spec.serve.cmd == "python -m server --port 30000"
    with pytest.raises(UsageError, match="--ready is about a --serve server"):
        bench_spec(asked(cmd="x", metric="y", ready="up"), snap(), snap(), LABELS, REPO)
