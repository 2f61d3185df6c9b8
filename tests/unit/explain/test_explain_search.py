"""The pure search of `explain` on synthetic benchmarks with planted causes: which differences
turn good into bad, within the budget it promises, honest about noise."""
from __future__ import annotations

import itertools
import math
import random

import pytest

from envsnap.explain.search import (
    ENDPOINT_REMEASURES,
    MAX_REMEASURES,
    Explanation,
    Measure,
    explain,
    worst_case_invocations,
)

GOOD_RUNS = [94.0, 94.6, 93.5]     # tok/s, STORY's EAGLE-3 before the pull
BAD_RUNS = [61.0, 61.4, 60.5]      # after it


def planted(causes: list[frozenset[int]], calls: list[frozenset[int]] | None = None) -> Measure:
    """A clean benchmark: each planted set applied whole takes it from 94 to 61 tok/s, two
    of them to 39.6 (independent causes multiply)."""
    def measure(applied: frozenset[int]) -> list[float]:
        if calls is not None:
            calls.append(applied)
        slow = (61.0 / 94.0) ** sum(cause <= applied for cause in causes)
        return [value * slow for value in GOOD_RUNS]
    return measure


def noisy(causes: list[frozenset[int]], seed: int, sigma: float) -> Measure:
    """Each run 94 tok/s (61 with a cause applied) times lognormal noise."""
    rng = random.Random(seed)

    def measure(applied: frozenset[int]) -> list[float]:
        base = 61.0 if any(cause <= applied for cause in causes) else 94.0
        return [base * rng.lognormvariate(0, sigma) for _ in range(3)]
    return measure


def check_found(result: Explanation, causes: list[frozenset[int]], n: int) -> None:
    assert result.outcome == "found"
    assert sorted(result.causes, key=sorted) == sorted(causes, key=sorted)
    assert result.unexplained == frozenset()
    k = sum(len(cause) for cause in causes)
    # GOOD measured again to follow drift is counted apart from the search's invocations
    assert result.count("endpoint", "search", "size") <= worst_case_invocations(n, k)
    assert result.whole_drop


def test_one_cause_is_named_with_its_effect_alone() -> None:
    calls: list[frozenset[int]] = []
    result = explain(8, planted([frozenset({5})], calls))
    check_found(result, [frozenset({5})], 8)
    assert [t.applied for t in result.trials] == calls      # one trial per invocation
    assert result.trials[0].applied == frozenset() and result.trials[0].values == GOOD_RUNS
    assert result.trials[1].applied == frozenset(range(8))
    assert result.good[:3] == GOOD_RUNS and result.bad == pytest.approx(BAD_RUNS, rel=0.01)
    assert set(result.good) == set(GOOD_RUNS)      # GOOD measured again: the same runs
    alone = result.alone(frozenset({5}))
    assert alone is not None and alone.verdict == "bad"
    effect = result.effect(frozenset({5}))
    assert effect is not None and effect.after == pytest.approx(61.0, rel=0.01)


def test_two_independent_causes_are_both_named() -> None:
    causes = [frozenset({1}), frozenset({6})]
    result = explain(8, planted(causes))
    check_found(result, causes, 8)
    for cause in causes:
        alone = result.alone(cause)
        assert alone is not None and alone.verdict == "bad"


def test_two_interacting_differences_are_one_cause_only_together() -> None:
    result = explain(8, planted([frozenset({2, 5})]))
    check_found(result, [frozenset({2, 5})], 8)
    alone = result.alone(frozenset({2, 5}))
    assert alone is not None and alone.verdict == "bad"
    assert all(t.verdict != "bad" for t in result.trials if t.applied in ({2}, {5}))


def test_no_regression_stops_after_the_two_endpoints() -> None:
    result = explain(16, planted([]))
    assert result.outcome == "no regression"
    assert result.causes == [] and result.unexplained == frozenset()
    assert [t.applied for t in result.trials] == [frozenset(), frozenset(range(16))]
    assert result.count("drift") == 0


def test_an_improvement_is_no_regression_either_way_round() -> None:
    assert explain(4, planted([frozenset({0})]), lower_is_better=True).outcome == "no regression"


def test_lower_is_better_finds_what_made_it_higher() -> None:
    def latency(applied: frozenset[int]) -> list[float]:
        return [30.1, 30.4, 29.8] if 3 in applied else [19.0, 19.2, 18.9]
    result = explain(6, latency, lower_is_better=True)
    assert result.outcome == "found" and result.causes == [frozenset({3})]


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13, 16, 17, 32])
def test_every_single_cause_is_found_within_the_bound(n: int) -> None:
    for position in range(n):
        check_found(explain(n, planted([frozenset({position})])), [frozenset({position})], n)


@pytest.mark.parametrize("n", [2, 3, 8, 11, 16])
def test_every_interacting_pair_is_found_within_the_bound(n: int) -> None:
    for pair in itertools.combinations(range(n), 2):
        check_found(explain(n, planted([frozenset(pair)])), [frozenset(pair)], n)


@pytest.mark.parametrize("n", [4, 8, 16])
def test_every_two_independent_causes_are_found_within_the_bound(n: int) -> None:
    for first, second in itertools.combinations(range(n), 2):
        causes = [frozenset({first}), frozenset({second})]
        check_found(explain(n, planted(causes)), causes, n)


def test_a_three_way_interaction_and_a_lone_cause_together() -> None:
    causes = [frozenset({1, 9, 14}), frozenset({6})]
    check_found(explain(16, planted(causes)), causes, 16)


def test_the_bound_is_2_k_log2_n_plus_one_size_per_cause_plus_the_endpoints() -> None:
    assert worst_case_invocations(64, 1) == 2 * 6 + 1 + 2
    assert worst_case_invocations(9, 2) == 2 * 2 * 4 + 2 + 2
    assert worst_case_invocations(1, 1) == 3
    assert worst_case_invocations(0, 0) == worst_case_invocations(5, 0) == 2


def test_noisy_runs_still_find_the_cause() -> None:
    right = 0
    for seed in range(20):
        result = explain(16, noisy([frozenset({11})], seed, sigma=0.03))
        right += result.outcome == "found" and result.causes == [frozenset({11})]
        assert result.outcome != "no regression"
    assert right >= 18


def test_noise_that_never_settles_is_can_t_tell_not_a_guess() -> None:
    # One difference's runs swing from 40 to 140 tok/s around a mid-way 75: neither like
    # good (94) nor like bad (61), however often it is measured again.
    def measure(applied: frozenset[int]) -> list[float]:
        if applied == frozenset({1}):
            return [40.0, 140.0, 76.0]
        return BAD_RUNS if applied == frozenset({0, 1}) else GOOD_RUNS
    result = explain(2, measure)
    assert result.outcome == "can't tell"
    assert result.causes == []
    assert result.unexplained == frozenset({0, 1})
    # the undecided set was measured again, its runs pooled, and no more than allowed
    again = [t for t in result.trials if t.applied == frozenset({1})]
    assert 1 < len(again) <= 1 + MAX_REMEASURES
    assert len(result.runs(frozenset({1}))) == 3 * len(again)


def test_endpoints_too_noisy_to_compare_are_can_t_tell_after_a_few_measures() -> None:
    rng = random.Random(3)

    def measure(applied: frozenset[int]) -> list[float]:
        return [94.0 * rng.lognormvariate(0, 0.4) for _ in range(2)]
    result = explain(8, measure)
    assert result.outcome == "can't tell"
    assert result.unexplained == frozenset(range(8))
    assert len(result.trials) == 2 * (1 + ENDPOINT_REMEASURES)


def test_a_small_cause_beside_a_large_one_is_named_with_its_size() -> None:
    # Difference 0 makes it 7% slower (resolvably, with runs this tight), difference 1
    # 94 -> 61: both are named, each with its size, and together they are the whole drop.
    def measure(applied: frozenset[int]) -> list[float]:
        factor = (61.0 / 94.0 if 1 in applied else 1.0) * (0.93 if 0 in applied else 1.0)
        return [value * factor for value in GOOD_RUNS]
    result = explain(2, measure)
    assert result.outcome == "found"
    assert sorted(result.causes, key=sorted) == [frozenset({0}), frozenset({1})]
    sizes = {min(cause): result.effect(cause) for cause in result.causes}
    assert all(effect is not None for effect in sizes.values())
    assert sizes[0].after / sizes[0].before == pytest.approx(0.93, abs=0.005)  # type: ignore
    assert sizes[1].after / sizes[1].before == pytest.approx(61 / 94, abs=0.005)  # type: ignore
    assert result.whole_drop and result.unexplained == frozenset()


def test_two_causes_that_each_bring_half_the_drop_are_both_named() -> None:
    def measure(applied: frozenset[int]) -> list[float]:
        speed = 94.0 * (61.0 / 94.0) ** (len(applied & {2, 6}) / 2)   # 94, 75.7, 61
        return [speed * factor for factor in (1.0, 1.006, 0.994)]
    result = explain(8, measure)
    assert result.outcome == "found"
    assert sorted(result.causes, key=sorted) == [frozenset({2}), frozenset({6})]


def test_a_cause_that_is_the_whole_drop_ends_the_search() -> None:
    # GOOD + the cause is like BAD: nothing else is searched, the rest never measured.
    calls: list[frozenset[int]] = []
    result = explain(8, planted([frozenset({5})], calls))
    assert result.outcome == "found" and result.causes == [frozenset({5})]
    assert result.whole_drop and result.unexplained == frozenset()
    assert frozenset(range(8)) - {5} not in calls


def test_max_invocations_stops_the_search_and_leaves_the_rest_unexplained() -> None:
    calls: list[frozenset[int]] = []
    result = explain(32, planted([frozenset({3}), frozenset({20})], calls), max_invocations=12)
    assert len(calls) == len(result.trials) == 12
    assert result.outcome == "found" and result.causes == [frozenset({3})]
    assert result.unexplained == frozenset(range(32)) - {3}


def test_a_drop_outside_the_differences_is_can_t_tell_with_nothing_named() -> None:
    # Nothing differs that could be put back, yet the second endpoint is slower: the cause
    # lies outside what the search can try, and it says so instead of naming one.
    calls: list[frozenset[int]] = []

    def measure(applied: frozenset[int]) -> list[float]:
        calls.append(applied)
        return GOOD_RUNS if len(calls) == 1 else BAD_RUNS
    result = explain(0, measure)
    assert result.outcome == "can't tell"
    assert result.causes == [] and result.unexplained == frozenset()
    assert len(result.trials) == 2


def test_the_bound_grows_as_log2_n() -> None:
    for n in (4, 8, 16, 32, 64):
        assert worst_case_invocations(n, 1) == 2 * math.ceil(math.log2(n)) + 3


def test_one_low_reading_near_the_base_is_measured_again_not_followed() -> None:
    """A harmless half read once a few per cent low (noise) is near its base, far from BAD:
    measured again before it counts as bad, the search goes on to the other half instead of
    halving the harmless one and starting its round again."""
    seen: dict[frozenset[int], int] = {}

    def measure(applied: frozenset[int]) -> list[float]:
        seen[applied] = seen.get(applied, 0) + 1
        value = 61.0 if 3 in applied else 94.0
        if applied == frozenset({0, 1}) and seen[applied] == 1:
            value = 88.0
        return [value * factor for factor in (0.995, 1.0, 1.005)]

    result = explain(4, measure)
    assert result.causes == [frozenset({3})] and not result.unexplained
    assert frozenset({0}) not in seen and frozenset({1}) not in seen
    assert [t.purpose for t in result.trials if t.applied == frozenset({0, 1})] == \
        ["search", "again"]


def test_the_steps_of_a_round_the_noise_misled_count_apart_from_the_search() -> None:
    """One reading of a harmless half as slow as BAD sends the halving into it; its parts are
    then fine and the half, measured again, is fine too: that round found nothing, and its
    steps are what the noise asked for. The round that finds the cause is the search's own,
    and it keeps within the bound."""
    seen: dict[frozenset[int], int] = {}

    def measure(applied: frozenset[int]) -> list[float]:
        seen[applied] = seen.get(applied, 0) + 1
        value = 61.0 if 5 in applied else 94.0
        if applied == frozenset({0, 1, 2, 3}) and seen[applied] == 1:
            value = 61.0
        return [value * factor for factor in (0.995, 1.0, 1.005)]

    result = explain(8, measure)
    # one reading of 61 among 94s leaves that half undecided: said so, not hidden
    assert result.causes == [frozenset({5})] and result.whole_drop
    purposes = [t.purpose for t in result.trials if t.purpose != "drift"]
    misled = purposes.index("search", 2 + purposes[2:].index("again"))
    assert set(purposes[2:misled]) == {"again"}, purposes   # the misled round, all of it
    assert {"search"} <= set(purposes[misled:]) <= {"search", "again"}, purposes
    assert result.count("endpoint", "search", "size") <= worst_case_invocations(8, 1)
    assert result.noise_asked >= 4


@pytest.mark.parametrize("cause", range(8))
@pytest.mark.parametrize("rate", [0.04, 0.05])
def test_a_half_read_as_good_before_the_drift_was_seen_is_judged_again(cause: int,
                                                                      rate: float) -> None:
    """A machine speeding up by 4-5% an invocation and a cause of 12%: until GOOD's
    measurements show the drift, the half holding the cause reads like GOOD. When neither
    half is bad but the whole is, each half's runs are judged again with the drift known
    by then, before an interaction search: the lone cause is found within the bound."""
    clock = [0]

    def measure(applied: frozenset[int]) -> list[float]:
        speed = 94.0 * math.exp(rate * clock[0]) * (0.88 if cause in applied else 1.0)
        clock[0] += 1
        return [speed * factor for factor in (0.99, 1.0, 1.01)]

    result = explain(8, measure)
    assert result.causes == [frozenset({cause})] and result.corrected
    assert result.count("endpoint", "search", "size") - max(0, result.count("endpoint") - 2) \
        <= worst_case_invocations(8, 1)


def test_whether_the_causes_are_the_whole_drop_is_measured_again_as_the_endpoints_are(
        ) -> None:
    """The cause's state reads wide for a while (runs of 53 to 70 against BAD's steady 61):
    GOOD + the cause against BAD is measured again as often as the endpoints would be, so
    the rest is not left undecided by a few noisy runs."""
    seen: dict[frozenset[int], int] = {}

    def measure(applied: frozenset[int]) -> list[float]:
        seen[applied] = seen.get(applied, 0) + 1
        if applied == frozenset({1}) and seen[applied] <= 3:
            return [61.0, 70.0, 53.0]
        value = 61.0 if 1 in applied else 94.0
        return [value * factor for factor in (0.995, 1.0, 1.005)]

    result = explain(2, measure)
    assert result.causes == [frozenset({1})] and result.whole_drop
    assert not result.unexplained
