"""bench/between.py over its input space, from a seeded generator: where runs fall between
two ends, and the drift fitted from the good end measured again."""
from __future__ import annotations

import math
import random

import pytest

from envsnap.bench.between import (
    BETWEEN,
    LIKE_BAD,
    LIKE_GOOD,
    NO_DRIFT,
    UNPLACED,
    Timed,
    detrended,
    fit_drift,
    place,
    share_of_drop,
)

SEEDS = range(200)


def runs(rng: random.Random, center: float, sigma: float, count: int) -> list[float]:
    return [center * math.exp(rng.gauss(0, sigma)) for _ in range(count)]


@pytest.mark.parametrize("lower_is_better", [False, True])
def test_a_state_like_an_end_is_never_placed_at_the_other(lower_is_better: bool) -> None:
    """Whatever the drop (15%..90%) and noise (0.5%..3%): runs drawn like GOOD are never
    "bad" nor "between", runs like BAD never "good" nor "between"."""
    wrong = 0
    for seed in SEEDS:
        rng = random.Random(seed)
        good_center = rng.uniform(10, 5000)
        drop = rng.uniform(0.15, 0.9)
        bad_center = good_center / (1 - drop) if lower_is_better else good_center * (1 - drop)
        sigma = rng.uniform(0.005, 0.03)
        good, bad = runs(rng, good_center, sigma, 5), runs(rng, bad_center, sigma, 5)
        like_good = place(good, bad, runs(rng, good_center, sigma, 5), lower_is_better)
        like_bad = place(good, bad, runs(rng, bad_center, sigma, 5), lower_is_better)
        wrong += like_good.place in (LIKE_BAD, BETWEEN) or like_bad.place in (LIKE_GOOD, BETWEEN)
    assert wrong <= len(SEEDS) * 0.02, wrong   # each side a test at alpha 0.05, and a threshold


def test_a_state_half_way_down_is_between_and_its_share_is_measured() -> None:
    for seed in SEEDS:
        rng = random.Random(seed)
        good_center, sigma = rng.uniform(10, 5000), rng.uniform(0.002, 0.01)
        drop = rng.uniform(0.4, 0.9)
        share = rng.uniform(0.3, 0.7)
        middle = good_center * (1 - drop) ** share
        placed = place(runs(rng, good_center, sigma, 5), runs(rng, good_center * (1 - drop),
                                                               sigma, 5),
                       runs(rng, middle, sigma, 5))
        assert placed.place == BETWEEN, (seed, placed.vs_good["why"], placed.vs_bad["why"])
        assert placed.share is not None and abs(placed.share - share) < 0.1


def test_too_few_runs_are_never_placed() -> None:
    assert place([94.0], [61.0], [61.0]).place == UNPLACED
    assert place([94.0, 95.0], [61.0, 60.0], [77.0]).place == UNPLACED


def test_share_needs_positive_medians_and_different_ends() -> None:
    assert share_of_drop([1.0], [1.0], [1.0]) is None
    assert share_of_drop([0.0], [1.0], [0.5]) is None
    assert share_of_drop([100.0], [25.0], [50.0]) == pytest.approx(0.5)


def test_the_fitted_drift_is_the_planted_one_and_detrending_takes_it_out() -> None:
    for seed in SEEDS:
        rng = random.Random(seed)
        rate = rng.uniform(-0.04, 0.04)
        sigma = rng.uniform(0.001, 0.01)
        places = sorted(rng.sample(range(40), rng.randint(3, 8)))
        reference = [Timed(at, tuple(value * math.exp(rate * at)
                                     for value in runs(rng, 100.0, sigma, 3)))
                     for at in places]
        drift = fit_drift(reference)
        assert abs(drift.rate - rate) < 0.01, (seed, drift, rate)
        flat = detrended(reference, drift)
        assert max(flat) / min(flat) < math.exp(8 * sigma + 0.01 * places[-1])


def test_one_measurement_or_one_place_fits_no_drift() -> None:
    assert fit_drift([Timed(0, (1.0, 2.0))]).rate == 0.0
    assert fit_drift([Timed(3, (1.0,)), Timed(3, (2.0,))]).rate == 0.0
    assert not NO_DRIFT.detected
    assert detrended([Timed(5, (2.0, 3.0))], NO_DRIFT) == [2.0, 3.0]


def test_a_machine_that_slows_down_is_detected() -> None:
    reference = [Timed(0, (100.0, 101.0, 99.5)), Timed(10, (80.0, 80.5, 79.6))]
    drift = fit_drift(reference)
    assert drift.detected and drift.rate < 0
    assert drift.over(10) == pytest.approx(-0.2, abs=0.01)
