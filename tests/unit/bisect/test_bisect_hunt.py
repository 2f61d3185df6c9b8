"""search.Hunt, the bisect search, on benchmark models with fixed seeds: drift, two slow
commits, skipped commits, a step the noise never places, GOOD's recorded runs."""
from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence

import pytest

from envsnap.bisect.search import Hunt, HuntEvent, Remeasure, Trial
from envsnap.verdicts import CANT_TELL, FOUND, NO_REGRESSION, ONLY_SKIPPED

Model = Callable[[int, int, str], "Sequence[float] | str"]


def model(levels: Callable[[int], float], rate: float = 0.0, sigma: float = 0.01,
          seed: int = 1, roles: list[str] | None = None) -> Model:
    rng = random.Random(seed)
    clock = [0]

    def measure(position: int, count: int, role: str) -> list[float]:
        at = clock[0]
        clock[0] += 1
        if roles is not None:
            roles.append(role)
        return [levels(position) * math.exp(rate * at + rng.gauss(0, sigma))
                for _ in range(count)]

    return measure


@pytest.mark.parametrize("seed", range(10))
def test_a_machine_slowing_by_three_percent_an_invocation_names_the_culprit(seed: int) -> None:
    """The issue's story as a model: GOOD 5640, BAD 1370, docs commits 1-8, the culprit 9."""
    events: list[HuntEvent] = []
    hunt = Hunt(11, model(lambda p: 5640.0 if p < 9 else 1370.0, rate=-0.03, seed=seed),
                repeat=3, max_repeat=20, on_event=events.append)
    result = hunt.run()
    assert result.outcome == FOUND and [c.position for c in result.culprits] == [9]
    assert result.culprits[0].change == pytest.approx(1370 / 5640 - 1, abs=0.03)
    assert result.drift.detected and -0.04 < result.drift.rate < -0.02
    assert result.remeasures >= 1 and any(isinstance(e, Remeasure) for e in events)
    assert result.whole_drop


def test_two_slow_commits_are_found_one_after_the_other_with_their_sizes() -> None:
    result = Hunt(20, model(lambda p: 94.0 if p < 6 else 70.0 if p < 15 else 49.0),
                  repeat=3, max_repeat=20).run()
    assert result.outcome == FOUND
    assert [c.position for c in result.culprits] == [6, 15]
    assert [c.before for c in result.culprits] == [0, 6]
    assert result.culprits[0].change == pytest.approx(70 / 94 - 1, abs=0.02)
    assert result.culprits[1].change == pytest.approx(49 / 70 - 1, abs=0.02)
    assert result.culprits[0].placement.place == "between" and result.whole_drop


def test_a_slow_commit_left_part_of_the_way_is_not_the_whole_drop() -> None:
    result = Hunt(8, model(lambda p: 94.0 if p < 3 else 70.0 if p < 7 else 49.0),
                  repeat=3, max_repeat=20, max_rounds=1).run()
    assert [c.position for c in result.culprits] == [3] and not result.whole_drop


def test_a_step_between_the_ends_is_measured_again_before_it_counts() -> None:
    events: list[HuntEvent] = []
    Hunt(4, model(lambda p: 94.0 if p < 2 else 70.0 if p < 4 else 49.0), repeat=3,
         max_repeat=20, on_event=events.append).run()
    first = next(e for e in events if isinstance(e, Trial))
    assert first.placement is not None and first.placement.place == "between"
    assert first.invocations == 2 and len(first.runs) == 6


def test_an_unmeasurable_commit_is_skipped_and_its_neighbour_tried() -> None:
    def measure(position: int, count: int, role: str) -> Sequence[float] | str:
        if position == 2:
            return "the build failed"
        return [94.0 if position < 4 else 60.0] * count

    result = Hunt(4, measure, repeat=3, max_repeat=9).run()
    assert result.outcome == FOUND and [c.position for c in result.culprits] == [4]
    only = Hunt(3, lambda p, c, r: "broken" if 0 < p < 3 else [94.0 if p == 0 else 60.0] * c,
                repeat=3, max_repeat=9).run()
    assert only.outcome == ONLY_SKIPPED and only.suspects == [1, 2, 3]


def test_noise_that_never_places_a_step_stops_at_max_repeat() -> None:
    cycle = iter([10.0, 150.0, 77.0, 40.0, 115.0] * 40)

    def measure(position: int, count: int, role: str) -> list[float]:
        if position in (0, 4):
            return [94.0 + i * 0.1 for i in range(count)] if position == 0 \
                else [60.0 + i * 0.1 for i in range(count)]
        return [next(cycle) for _ in range(count)]

    result = Hunt(4, measure, repeat=5, max_repeat=15).run()
    assert result.outcome == CANT_TELL and result.undecided is not None
    assert len(result.undecided.runs) == 15 and result.suspects == [1, 2, 3, 4]


def test_goods_recorded_runs_are_never_measured_and_only_bad_is_again() -> None:
    roles: list[str] = []
    result = Hunt(16, model(lambda p: 94.0 if p < 11 else 60.0, roles=roles), repeat=3,
                  max_repeat=20, good_runs=[94.0, 94.5, 93.6]).run()
    assert result.outcome == FOUND and [c.position for c in result.culprits] == [11]
    assert "good" not in roles and "good again" not in roles and "bad again" in roles


def test_no_regression_between_the_ends_searches_nothing() -> None:
    roles: list[str] = []
    result = Hunt(8, model(lambda p: 94.0, roles=roles), repeat=3, max_repeat=9).run()
    assert result.outcome == NO_REGRESSION and roles == ["good", "bad"]


def test_a_step_judged_like_good_before_the_drift_was_known_is_judged_again() -> None:
    """Two slow commits two apart on a machine gaining speed as the search runs: the commit
    before the second, measured once while the drift was a guess, read like good within
    the guess's allowance; the first slow commit went unnamed and the second stood for
    both. Judged again, with one more set of runs, both are named with their sizes."""
    def levels(position: int) -> float:
        return 1000.0 * (0.8355 if position >= 10 else 1.0) * (0.3724 if position >= 12 else 1.0)

    result = Hunt(13, model(levels, rate=0.01985, sigma=0.01873, seed=441 * 7919 + 1),
                  repeat=3, max_repeat=20).run()
    assert result.outcome == FOUND
    assert [c.position for c in result.culprits] == [10, 12]
    assert result.culprits[0].change == pytest.approx(-0.1645, abs=0.04)
    assert result.culprits[1].change == pytest.approx(-0.6276, abs=0.04)


def test_a_slow_commit_judged_like_good_early_is_found_again_not_its_neighbour() -> None:
    """On a machine losing speed fast, the first slow commit read like good under the early
    allowance and the harmless commit after it was named in its place; judged again, the
    halving goes on to its left and names it."""
    def levels(position: int) -> float:
        return 1000.0 * (0.8694 if position >= 4 else 1.0) * (0.8568 if position >= 16 else 1.0)

    result = Hunt(36, model(levels, rate=-0.0351, sigma=0.0251, seed=709 * 7919 + 1),
                  repeat=3, max_repeat=20).run()
    assert result.outcome == FOUND
    assert [c.position for c in result.culprits] == [4, 16]


def test_the_commit_before_the_one_found_alike_it_is_never_named_in_its_place() -> None:
    """A slow commit within the noise of a noisy, drifting machine, a big one later: the
    halving ended at the commit after the small one's neighbours, the two read alike, and
    a harmless commit was named for it. Compared with the commit before it, the search
    moves left instead, and no harmless commit is named."""
    def levels(position: int) -> float:
        return 1000.0 * (1 - 0.11606821797264617 if position >= 28 else 1.0) \
            * (1 - 0.6574170984168954 if position >= 47 else 1.0)

    events: list[HuntEvent] = []
    result = Hunt(52, model(levels, rate=-0.030659736076541294, sigma=0.04549021457613961,
                            seed=238 * 7919 + 1),
                  repeat=3, max_repeat=20, on_event=events.append).run()
    assert any(isinstance(event, Trial) and event.why.startswith("like the commit after it")
               for event in events)
    assert all(c.position in (28, 47) for c in result.culprits)
