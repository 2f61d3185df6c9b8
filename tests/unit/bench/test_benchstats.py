"""The pure statistics of benchmark runs: metric parsing, summaries, Mann-Whitney, Welch and
Yuen, verdicts (their calibration: test_bench_calibration.py)."""
from __future__ import annotations

import itertools
import math

import pytest

from envsnap.bench.stats import (
    compare,
    compile_metric,
    mann_whitney,
    midranks,
    min_p_value,
    parse_metric,
    shift_interval,
    summarise,
    t_quantile,
    t_two_sided_p,
    trimmed,
    u_critical,
    welch,
    welch_and_yuen,
)
from envsnap.errors import UsageError

GOOD = [94.0, 92.0, 95.0, 93.0, 96.0]       # STORY: EAGLE-3 before the pull
BAD = [60.0, 59.0, 61.0, 60.0, 62.0]        # STORY: after it
NOISY_A = [84.0, 118.0, 95.0, 101.0, 90.0]  # STORY: 84-118 tok/s within one run
NOISY_B = [92.0, 110.0, 86.0, 115.0, 99.0]
METRIC = r"gen throughput \(token/s\): ([0-9.]+)"


# ---- parse_metric ----------------------------------------------------------------------

def test_parse_metric_takes_the_first_group_of_the_last_match() -> None:
    text = ("gen throughput (token/s): 12.0\nwarm-up done\n"
            "gen throughput (token/s): 93.1\nbye\n")
    assert parse_metric(text, METRIC) == 93.1


def test_parse_metric_without_a_group_uses_the_whole_match() -> None:
    assert parse_metric("verify 19.1 ms\nverify 18.7 ms\n", r"\d+\.\d+(?= ms)") == 18.7


def test_parse_metric_no_match_is_none() -> None:
    assert parse_metric("Traceback: CUDA out of memory\n", METRIC) is None


def test_parse_metric_non_number_is_a_clear_value_error() -> None:
    with pytest.raises(ValueError, match="'n/a', not a number"):
        parse_metric("throughput: n/a\n", r"throughput: (\S+)")


@pytest.mark.parametrize("printed", ["nan", "inf", "-Infinity"])
def test_parse_metric_refuses_values_that_are_not_finite(printed: str) -> None:
    with pytest.raises(ValueError, match=f"'{printed}', not a finite number"):
        parse_metric(f"throughput: {printed}\n", r"throughput: (\S+)")


def test_parse_metric_accepts_a_compiled_pattern_and_exponents() -> None:
    assert parse_metric("loss 1.5e-3", compile_metric(r"loss (\S+)")) == 0.0015


def test_invalid_regex_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match=r"invalid --metric regex '\(\[0-9\]': "):
        compile_metric("([0-9]")


# ---- summarise -------------------------------------------------------------------------

def test_summarise_story_values() -> None:
    summary = summarise(GOOD)
    assert summary["n"] == 5 and summary["median"] == 94 and summary["mean"] == 94
    assert (summary["min"], summary["max"]) == (92, 96)
    assert summary["spread"] == pytest.approx(4 / 94)
    assert summary["stdev"] == pytest.approx(math.sqrt(2.5))


def test_summarise_edges() -> None:
    assert summarise([]) == {"n": 0}
    one = summarise([7.0])
    assert one["stdev"] == 0.0 and one["spread"] == 0.0
    assert summarise([0.0, 0.0, 0.0])["spread"] is None


# ---- Mann-Whitney U --------------------------------------------------------------------

def test_midranks_share_ties() -> None:
    assert midranks([10, 20, 20, 30, 10]) == [1.5, 3.5, 3.5, 5.0, 1.5]


def test_mann_whitney_exact_known_value() -> None:
    # scipy.stats.mannwhitneyu's documented example: U1 = 17, exact p = 1/9
    test = mann_whitney([19, 22, 16, 29, 24], [20, 11, 17, 12])
    assert test.exact and test.u == 17
    assert test.p_value == pytest.approx(1 / 9, abs=1e-12)


def test_mann_whitney_normal_approximation_known_value() -> None:
    # the same example, asymptotic with continuity correction, as scipy gives it
    test = mann_whitney([19, 22, 16, 29, 24], [20, 11, 17, 12], exact=False)
    assert not test.exact and test.u == 17
    assert test.p_value == pytest.approx(0.11134688653314041, rel=1e-9)


def test_mann_whitney_complete_separation_of_five_and_five() -> None:
    test = mann_whitney(GOOD, BAD)
    assert test.u == 25
    assert test.p_value == pytest.approx(2 / 252)   # 2 of C(10, 5) orderings are as extreme


def brute_force_p(first: list[float], second: list[float]) -> float:
    """Two-sided permutation p of the rank sum, by enumerating every split."""
    ranks = midranks(first + second)
    observed = sum(ranks[:len(first)])
    sums = [sum(c) for c in itertools.combinations(ranks, len(first))]
    below = sum(1 for s in sums if s <= observed + 1e-9)
    above = sum(1 for s in sums if s >= observed - 1e-9)
    return min(1.0, 2 * min(below, above) / len(sums))


@pytest.mark.parametrize("first,second", [
    ([1, 2, 2, 3, 5], [2, 3, 3, 4, 6, 6]),
    ([93.1, 93.1, 94.0, 92.5], [60.0, 93.1, 61.0, 59.9]),
    ([1, 1, 1], [1, 1, 2]),
])
def test_mann_whitney_exact_with_ties_matches_enumeration(first: list[float],
                                                          second: list[float]) -> None:
    assert mann_whitney(first, second).p_value == pytest.approx(brute_force_p(first, second))


def test_mann_whitney_all_equal_large_sample_is_p_one() -> None:
    assert mann_whitney([5.0] * 20, [5.0] * 20).p_value == 1.0


def test_mann_whitney_large_samples_use_the_normal_approximation() -> None:
    test = mann_whitney(list(range(20)), [v + 100 for v in range(20)])
    assert not test.exact and test.u == 0 and test.p_value < 1e-6


def test_mann_whitney_needs_values_on_both_sides() -> None:
    with pytest.raises(ValueError):
        mann_whitney([], [1.0])


def test_min_p_value_of_the_rank_test() -> None:
    assert min_p_value(3, 3) == pytest.approx(0.1)   # why it was replaced: never < 0.05
    assert min_p_value(4, 4) == pytest.approx(2 / 70)


def test_u_critical_matches_tables() -> None:
    # two-sided 0.05 critical values of U from the standard tables
    assert u_critical(5, 5, 0.05) == 2
    assert u_critical(8, 8, 0.05) == 13
    assert u_critical(3, 3, 0.05) is None
    assert u_critical(20, 20, 0.05) == 127   # normal approximation: tables give 127


def test_shift_interval_brackets_the_shift() -> None:
    low, high = shift_interval(GOOD, BAD, 0.05) or (0, 0)
    assert low <= -34 <= high < 0
    assert shift_interval([1.0, 2.0], [3.0, 4.0], 0.05) is None


# ---- the verdict -----------------------------------------------------------------------

def test_story_regression() -> None:
    verdict = compare(GOOD, BAD)
    assert verdict["verdict"] == "regression"
    assert verdict["ratio"] == pytest.approx(60 / 94)
    assert verdict["p_value"] < 1e-4
    assert "94 -> 60 (-36.2%)" in verdict["why"] and "\n" not in verdict["why"]


def test_story_recovery_is_an_improvement() -> None:
    assert compare(BAD, GOOD)["verdict"] == "improvement"


def test_lower_is_better_flips_the_direction() -> None:
    slower = [29.0, 28.5, 29.5, 30.0, 28.8]   # STORY: verify 19 ms -> 29 ms
    faster = [19.0, 18.5, 17.5, 19.1, 18.7]
    assert compare(faster, slower, lower_is_better=True)["verdict"] == "regression"
    assert compare(slower, faster, lower_is_better=True)["verdict"] == "improvement"


def test_same_when_tight_runs_overlap() -> None:
    verdict = compare(GOOD, [93.0, 95.0, 94.0, 92.0, 96.5])
    assert verdict["verdict"] == "same"
    low, high = verdict["shift_interval"]
    assert -0.05 <= low and high <= 0.05


def test_noisy_overlapping_runs_cannot_tell() -> None:
    verdict = compare(NOISY_A, NOISY_B)
    assert verdict["verdict"] == "can't tell"
    assert "too noisy" in verdict["why"]


def test_significant_but_small_change_is_same() -> None:
    base = [100.0, 101.0, 102.0, 103.0, 104.0, 100.0, 101.0, 102.0]
    new = [98.0, 99.0, 100.0, 99.0, 98.0, 97.0, 99.0, 100.0]
    verdict = compare(base, new)
    assert verdict["p_value"] < 0.05 and verdict["verdict"] == "same"


def test_three_runs_a_side_far_apart_are_a_regression() -> None:
    verdict = compare([94.0, 95.0, 93.0], [60.0, 61.0, 59.0])
    assert verdict["verdict"] == "regression" and verdict["test"] == "welch-log"
    assert verdict["p_value"] < 1e-4 and verdict["ratio"] == pytest.approx(60 / 94)
    low, high = verdict["shift_interval"]
    assert low < 60 / 94 - 1 < high < -0.3


def test_issue_14_rerun_is_back_to_good_and_far_from_bad() -> None:
    # restore --rerun on the 2 x H200: good 296.8 GB/s, bad 26.8, the rerun after restore
    good, bad, now = [296.8, 295.9, 297.4], [26.8, 26.9, 26.6], [297.2, 298.9, 296.6]
    assert compare(good, now)["verdict"] == "same"
    assert compare(bad, now)["verdict"] == "improvement"
    assert compare(good, bad)["verdict"] == "regression"


def test_h200_story_runs_at_two_a_side_are_a_regression() -> None:
    # tests/data/h200x2-story: bench.values of good.yaml and bad.yaml, first two runs
    verdict = compare([286.4, 287.0], [26.2, 26.4])
    assert verdict["verdict"] == "regression" and verdict["p_value"] < 0.01


def test_one_run_a_side_cannot_tell() -> None:
    verdict = compare([94.0], [60.0, 61.0, 59.0])
    assert verdict["verdict"] == "can't tell"
    assert "too few runs (1 vs 3)" in verdict["why"] and "at least 2" in verdict["why"]
    assert verdict["ratio"] == pytest.approx(60 / 94) and verdict["p_value"] is None


def test_values_not_all_positive_use_welch_on_the_values() -> None:
    verdict = compare([10.0, 11.0, 9.0], [0.0, 0.5, 0.2])   # no log of 0
    assert verdict["test"] == "welch" and verdict["verdict"] == "regression"


def test_runs_that_never_vary_differ_exactly_when_their_values_do() -> None:
    steady = compare([5.0, 5.0, 5.0], [5.0, 5.0, 5.0])
    assert steady["verdict"] == "same" and steady["df"] is None   # JSON has no Infinity
    assert compare([5.0, 5.0, 5.0], [7.0, 7.0, 7.0])["verdict"] == "improvement"


def test_an_outlier_pulling_the_means_against_the_medians_cannot_tell() -> None:
    verdict = compare([100.0, 101.0, 99.0, 100.5], [90.0, 91.0, 400.0, 89.0])
    assert verdict["verdict"] == "can't tell"


# ---- Welch, Yuen, Student's t ------------------------------------------------------------

def test_t_distribution_matches_tables() -> None:
    assert t_quantile(0.05, 1) == pytest.approx(12.7062, abs=1e-4)
    assert t_quantile(0.05, 4) == pytest.approx(2.7764, abs=1e-4)
    assert t_quantile(0.01, 10) == pytest.approx(3.1693, abs=1e-4)
    assert t_quantile(0.05, 1e6) == pytest.approx(1.95996, abs=1e-4)
    # closed forms at 1, 2 and 3 degrees of freedom
    assert t_two_sided_p(3.0, 1) == pytest.approx(1 - 2 * math.atan(3.0) / math.pi, rel=1e-9)
    assert t_two_sided_p(3.0, 2) == pytest.approx(1 - 3.0 / math.sqrt(2 + 9.0), rel=1e-9)
    root3 = math.sqrt(3)
    assert t_two_sided_p(2.0, 3) == pytest.approx(
        1 - 2 / math.pi * (2.0 / root3 / (1 + 4 / 3) + math.atan(2.0 / root3)), rel=1e-9)


def test_t_tail_at_fractional_degrees_of_freedom_matches_integration() -> None:
    # Welch's df is fractional: integrate the density (Simpson) out to where it is negligible
    from envsnap.bench.stats import t_density
    t, df, steps, far = 3.885, 3.5245, 200_000, 4000.0
    width = (far - t) / steps
    tail = width / 3 * sum((1 if i in (0, steps) else 4 if i % 2 else 2)
                           * t_density(t + i * width, df) for i in range(steps + 1))
    assert t_two_sided_p(t, df) == pytest.approx(2 * tail, rel=1e-4)


def test_welch_known_value() -> None:
    # by hand: variances 19/3 and 10/3, so se^2 = 19/9 + 5/6 = 53/18, t = (20/3) / sqrt(53/18),
    # df = (53/18)^2 / ((19/9)^2 / 2 + (5/6)^2 / 3)
    test = welch([20.0, 22.0, 25.0], [27.0, 28.0, 30.0, 31.0], 0.05)
    error = math.sqrt(53 / 18)
    df = (53 / 18) ** 2 / ((19 / 9) ** 2 / 2 + (5 / 6) ** 2 / 3)
    assert test.difference == pytest.approx(20 / 3) and test.df == pytest.approx(df)
    assert test.p_value == pytest.approx(t_two_sided_p(20 / 3 / error, df))
    assert test.p_value < 0.05
    margin = t_quantile(0.05, df) * error
    assert test.interval == pytest.approx((20 / 3 - margin, 20 / 3 + margin))


def test_from_five_runs_yuens_test_joins_welchs_at_half_the_alpha_each() -> None:
    base, new = [100.0, 101.0, 99.0, 100.5, 300.0], [80.0, 81.0, 79.0, 80.5, 80.2]
    plain, robust = welch(base, new, 0.025, trim=0), welch(base, new, 0.025)
    both = welch_and_yuen(base, new, 0.05)
    assert plain.p_value > 0.05 > robust.p_value     # the outlier hides it from Welch's
    assert both.p_value == pytest.approx(2 * robust.p_value)
    assert both.interval == (max(plain.interval[0], robust.interval[0]),
                             min(plain.interval[1], robust.interval[1]))
    assert compare(base, new)["verdict"] == "regression"
    three = welch_and_yuen(base[:3], new[:3], 0.05)  # under 5 runs: Welch's alone, at alpha
    assert three == welch(base[:3], new[:3], 0.05, trim=0)


def test_trimmed_sets_aside_one_run_in_five_at_each_end() -> None:
    mean, _, kept = trimmed([1.0, 2.0, 3.0], 0.2)
    assert (mean, kept) == (2.0, 3)                       # under 5 runs: nothing trimmed
    mean, squared_error, kept = trimmed([10.0, 10.2, 9.9, 10.1, 30.0], 0.2)
    assert kept == 3 and mean == pytest.approx(10.1)      # the 30 is set aside
    assert squared_error < 0.05


def test_zero_baseline_median_cannot_tell() -> None:
    assert compare([0.0] * 5, [1.0] * 5)["verdict"] == "can't tell"
