"""What restore --pip plans for the packages, and the advice a difference left gets: pure."""
from __future__ import annotations

from typing import Any, cast

from envsnap.diff.findings import ADDED, CHANGED, Finding
from envsnap.restore.advice import PIN, REMOVE, advice_for
from envsnap.restore.packages import changed_names, pip_plan
from envsnap.snapshot.records import Snapshot


def with_packages(**packages: str) -> Snapshot:
    return cast(Snapshot, {"facts": {"python_env": {"packages": packages}}})


def package(name: str, kind: Any, before: str | None, after: str | None) -> Finding:
    return Finding("python_env", ("packages", name), before, after, kind)


def test_pins_what_drifted_removes_what_the_snapshot_lacked_keeps_pip() -> None:
    good = with_packages(torch="2.4.0", tinypkg="1.0")
    now = with_packages(torch="2.5.1", tabulate="0.9.0", pip="24.0")
    plan = pip_plan(good, now)
    assert plan.pins == ["tinypkg==1.0", "torch==2.4.0"]
    assert plan.removals == ["tabulate"]
    assert list(plan.kept) == ["pip"] and "installer" in plan.kept["pip"]
    assert changed_names(plan) == {"tinypkg", "torch", "tabulate"}


def test_advice_fits_the_kind_of_package_difference() -> None:
    good, now = with_packages(torch="2.4.0"), with_packages(torch="2.5.1", tabulate="0.9.0")
    assert advice_for(package("torch", CHANGED, "2.4.0", "2.5.1"), good, now, {}) == PIN
    assert advice_for(package("tabulate", ADDED, None, "0.9.0"), good, now, {}) == REMOVE
    kept = {"tabulate": "pip left it installed: Not uninstalling tabulate at /x"}
    assert advice_for(package("tabulate", ADDED, None, "0.9.0"), good, now, kept) == \
        "tabulate: pip left it installed: Not uninstalling tabulate at /x"
    shadowed = Finding("python_env", ("customize_shadowed", "/venv/sitecustomize.py"),
                       {"sha256": "a"}, {"sha256": "b"}, CHANGED)
    assert "pin the packages" not in advice_for(shadowed, good, now, {})
