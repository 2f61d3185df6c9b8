"""The benchmark verdict is calibrated: thousands of synthetic pairs with a known effect and
known noise (bench/bench_calibration.py draws them and prints the full table, the old rank
test beside it). At no effect it rarely calls a change (false-positive rate <= 5%); when
the effect dwarfs the noise it says so at 2-3 runs a side; when the noise is too large for
the runs it says "can't tell", not "same"."""
from __future__ import annotations

import importlib.util
import random
import sys
from types import ModuleType

import pytest
from helpers.paths import ROOT

from envsnap.bench import stats


def load_calibration() -> ModuleType:
    path = ROOT / "bench" / "bench_calibration.py"
    sys.path.insert(0, str(path.parent))   # the ledger module beside it, as when it is run
    spec = importlib.util.spec_from_file_location("bench_calibration", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


cal = load_calibration()
FPR_DRAWS = 1000     # a cell's binomial standard error at 5%: 0.7 points
POWER_DRAWS = 200
SEED = 14


@pytest.mark.parametrize("noise", list(cal.NOISES))
def test_false_positive_rate_at_no_effect_is_at_most_5_percent(noise: str) -> None:
    rates = {n: cal.false_positive_rate(cal.new_verdict, cal.NOISES[noise], n, FPR_DRAWS,
                                        random.Random(SEED + n))
             for n in (2, 3, 5, 10)}
    assert all(rate <= 0.05 for rate in rates.values()), rates


def power(noise: str, n: int, effect: str, judge: object = None) -> float:
    rate: float = cal.power(judge or cal.new_verdict, cal.NOISES[noise], n,
                            cal.EFFECTS[effect], POWER_DRAWS, random.Random(SEED * n))
    return rate


@pytest.mark.parametrize("noise", ["normal cv 1%", "normal cv 3%", "lognormal 5%"])
def test_a_2x_gap_is_a_regression_at_3_runs_when_the_noise_is_low(noise: str) -> None:
    assert power(noise, 3, "2x") >= 0.99
    # the rank test it replaced could never say so at 3 vs 3 (p >= 0.1)
    assert power(noise, 3, "2x", cal.old_verdict) == 0


def test_a_2x_gap_is_a_regression_even_at_2_runs_with_tight_runs() -> None:
    assert power("normal cv 1%", 2, "2x") >= 0.99


@pytest.mark.parametrize("n,effect,floor", [
    (3, "20%", 0.95),    # 20% slower, 3 runs a side, CV 3%
    (5, "10%", 0.95),
    (10, "10%", 0.99),
])
def test_power_grows_with_runs_at_moderate_noise(n: int, effect: str, floor: float) -> None:
    assert power("normal cv 3%", n, effect) >= floor


@pytest.mark.parametrize("noise", ["student-t 2dof 3%", "outliers 1/10 at 3x"])
def test_heavy_tails_and_outliers_still_give_verdicts_at_10_runs(noise: str) -> None:
    assert power(noise, 10, "2x") >= 0.90
    assert power(noise, 10, "10%") >= 0.80


def test_outliers_do_not_drown_a_clear_change_at_5_runs() -> None:
    # trimmed means: one run in ten at 3x no longer hides a 2x regression
    assert power("outliers 1/10 at 3x", 5, "2x") >= 0.75


def test_too_noisy_runs_are_cant_tell_not_same() -> None:
    """CV 10% at 3 runs a side cannot show that a change stays within 5%."""
    same = cal.same_rate(cal.new_verdict, cal.NOISES["normal cv 10%"], 3, POWER_DRAWS,
                         random.Random(SEED))
    assert same <= 0.01


@pytest.mark.parametrize("noise", list(cal.NOISES))
def test_a_regression_is_almost_never_called_an_improvement(noise: str) -> None:
    # only when every new run is an outlier (1 in 1,000 at 3 runs and 1 in 10 at 3x)
    wrong = cal.rate(cal.new_verdict, cal.NOISES[noise], 3, cal.EFFECTS["20%"], POWER_DRAWS,
                     random.Random(SEED), (stats.IMPROVEMENT,))
    assert wrong <= 0.01
