"""bench/between.py's drift over several states, and its one-sided likeness: a seeded
generator over the input space."""
from __future__ import annotations

import math
import random

from envsnap.bench import stats as benchstats
from envsnap.bench.between import (
    BETWEEN,
    LIKE_BAD,
    LIKE_GOOD,
    Timed,
    fit_drift_pooled,
    not_better,
    not_worse,
    place,
)

SEEDS = range(200)


def timed(rng: random.Random, level: float, rate: float, sigma: float, at: int) -> Timed:
    return Timed(at, tuple(level * math.exp(rate * at + rng.gauss(0, sigma)) for _ in range(3)))


def test_the_rate_over_several_states_is_the_planted_one_whatever_their_levels() -> None:
    """GOOD at 100, BAD at 30, a commit at 60, each measured at its own times: one rate,
    each state about its own level, so the gap between states never reads as drift."""
    for seed in SEEDS:
        rng = random.Random(seed)
        rate, sigma = rng.uniform(-0.04, 0.04), rng.uniform(0.002, 0.01)
        places = rng.sample(range(40), 9)
        series = [[timed(rng, level, rate, sigma, at) for at in sorted(places[i::3])]
                  for i, level in enumerate((100.0, 30.0, 60.0))]
        drift = fit_drift_pooled(series)
        assert abs(drift.rate - rate) < 4 * drift.error + 0.002, (seed, drift, rate)
        assert 0 < drift.error < 0.01
        assert drift.measurements == 9


def test_states_measured_once_fit_no_drift_and_two_invocations_leave_it_unsure() -> None:
    assert fit_drift_pooled([[Timed(0, (1.0,))], [Timed(1, (2.0,))]]).rate == 0.0
    two = fit_drift_pooled([[Timed(0, (100.0, 100.0)), Timed(4, (92.0, 92.0))]])
    assert two.rate < 0 and two.error == abs(two.rate)   # no residual left to judge it by
    assert two.detected


def test_not_worse_is_one_sided() -> None:
    """An interval open only towards better is not worse; one open towards worse is not."""
    base = [100.0, 101.0, 99.0]
    wide_up = benchstats.compare(base, [101.0, 108.0, 104.0])
    assert wide_up["verdict"] == "can't tell" and not_worse(wide_up) and not not_better(wide_up)
    wide_down = benchstats.compare(base, [99.0, 92.0, 96.0])
    assert not not_worse(wide_down) and not_better(wide_down)
    times = benchstats.compare(base, [101.0, 108.0, 104.0], lower_is_better=True)
    assert not not_worse(times) and not_better(times)


def test_a_state_like_good_is_placed_good_before_its_interval_fits_both_sides() -> None:
    good, bad = [94.0, 95.0, 93.5], [30.0, 30.4, 29.8]
    like_good = place(good, bad, [94.5, 101.0, 97.0])
    assert like_good.vs_good["verdict"] == "can't tell" and like_good.place == LIKE_GOOD
    like_bad = place(good, bad, [29.5, 28.0, 29.8])
    assert like_bad.vs_bad["verdict"] == "can't tell" and like_bad.place == LIKE_BAD


def test_an_allowance_keeps_a_drift_sized_dip_from_reading_as_between() -> None:
    good, bad, dipped = [100.0, 100.5, 99.5], [30.0, 30.2, 29.9], [92.0, 92.4, 91.8]
    assert place(good, bad, dipped).place == BETWEEN
    assert place(good, bad, dipped, allowance=(0.05, 0.05)).place == LIKE_GOOD
