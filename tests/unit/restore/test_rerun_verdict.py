"""restore --rerun's result is a named Rerun: its verdict is the one against good, and that
verdict alone turns an otherwise clean restore into exit 1 (drift)."""
from __future__ import annotations

from envsnap.bench import stats
from envsnap.cli.restore import restore_exit
from envsnap.errors import EXIT_DRIFT, EXIT_OK
from envsnap.playbook.run import RunResult
from envsnap.restore.rerun import BadSide, Rerun
from envsnap.restore.run import RestoreReport

GOOD = [100.0, 101.0, 99.5, 100.5]
SLOW = [60.0, 61.0, 59.5, 60.5]


def rerun_of(values: list[float]) -> Rerun:
    return Rerun(record={"values": values}, vs_good=stats.compare(GOOD, values))


def test_the_verdict_is_the_one_against_good() -> None:
    slow = rerun_of(SLOW)
    assert slow.verdict == "regression" == slow.vs_good["verdict"]
    # against the bad side the same runs are "same": the verdict does not read that one
    with_bad = Rerun(slow.record, slow.vs_good,
                     BadSide("bad", SLOW, stats.compare(SLOW, SLOW)))
    assert with_bad.vs_bad is not None and with_bad.vs_bad.verdict["verdict"] == "same"
    assert with_bad.verdict == "regression"


def test_a_regression_after_a_clean_restore_exits_drift() -> None:
    clean = RestoreReport(host="gpu-box", plan=RunResult(), applied=RunResult())
    assert restore_exit(clean) == EXIT_OK
    clean.rerun = rerun_of(GOOD)
    assert restore_exit(clean) == EXIT_OK
    clean.rerun = rerun_of(SLOW)
    assert restore_exit(clean) == EXIT_DRIFT
