"""bench/between.py's noise of one run (within invocations, so drift is no noise) and the
threshold it asks for, from a seeded generator."""
from __future__ import annotations

import math
import random

import pytest

from envsnap.bench.between import Timed, noise_of, place, threshold_for
from envsnap.bench.stats import DEFAULT_THRESHOLD


def test_the_noise_is_the_planted_one_whatever_the_drift() -> None:
    for seed in range(100):
        rng = random.Random(seed)
        sigma, rate = rng.uniform(0.005, 0.05), rng.uniform(-0.04, 0.04)
        invocations = [Timed(at, tuple(100 * math.exp(rate * at + rng.gauss(0, sigma))
                                       for _ in range(3))) for at in range(40)]
        assert noise_of(invocations) == pytest.approx(sigma, rel=0.25), seed


def test_no_noise_without_two_positive_runs_an_invocation() -> None:
    assert noise_of([]) == 0.0
    assert noise_of([Timed(0, (5.0,)), Timed(1, (0.0, 3.0))]) == 0.0


def test_the_threshold_widens_with_the_noise_only() -> None:
    assert threshold_for(0.0) == threshold_for(0.02) == DEFAULT_THRESHOLD
    assert threshold_for(0.05) == pytest.approx(math.expm1(0.1))


def test_a_wider_threshold_places_a_noisy_state_like_its_end() -> None:
    # six runs a side at 4% noise: the interval is wider than 5% but well inside 11%
    good = [89.7, 89.8, 96.6, 85.8, 93.5, 85.9]
    bad = [61.0, 64.0, 58.0, 60.2, 62.5, 59.1]
    # a little below GOOD: "not worse" is one-sided, so the interval must be open towards worse
    like_good = [86.0, 89.0, 84.5, 91.0, 87.5, 85.0]
    assert place(good, bad, like_good).place == "can't tell"
    assert place(good, bad, like_good, threshold=threshold_for(0.05)).place == "good"
