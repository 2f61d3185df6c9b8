"""The answer's lines (render.item_lines, drift_lines) from the pure search, in the exact
form docs/guide/bench.md shows: each cause with its size, all of them together, what is
left, "no effect" only of a difference measured alone within the noise, and the drift."""
from __future__ import annotations

import math
from collections.abc import Sequence

from envsnap.explain.render import Described, percent
from envsnap.explain.render import drift_lines as drift_lines_glued
from envsnap.explain.render import item_lines as item_lines_glued
from envsnap.explain.search import Explanation, Measure, Trial, explain
from envsnap.fold import plain

GOOD_RUNS = (94.0, 94.4, 93.6)


class Item:
    def __init__(self, name: str) -> None:
        self.name = name

    def describe(self) -> str:
        return self.name


ITEMS = [Item("the pull"), Item("NCCL_PROTO=LL missing"), Item("NCCL_DEBUG=INFO"),
         Item("the patch")]


def item_lines(result: Explanation, items: Sequence[Described]) -> list[str]:
    """The lines as printed: each kept phrase's glue a space again."""
    return [plain(line) for line in item_lines_glued(result, items)]


def drift_lines(result: Explanation) -> list[str]:
    return [plain(line) for line in drift_lines_glued(result)]


def bench(slowdowns: dict[int, float], drift: float = 0.0) -> Measure:
    clock = [0]

    def measure(applied: frozenset[int]) -> list[float]:
        factor = math.prod(1 - size for index, size in slowdowns.items() if index in applied)
        moved = math.exp(drift * clock[0])
        clock[0] += 1
        return [value * factor * moved for value in GOOD_RUNS]
    return measure


def test_two_causes_of_unequal_size_are_the_whole_drop() -> None:
    result = explain(4, bench({0: 1 / 3, 1: 1 / 6}))
    lines = item_lines(result, ITEMS)
    assert lines[:3] == ["cause: the pull, alone 94 -> 62.67 (-33%)",
                         "cause: NCCL_PROTO=LL missing, alone 94 -> 78.33 (-17%)",
                         "together 94 -> 52.22 (-44%): the whole drop"]
    for line in lines[3:]:
        assert line.startswith(("no effect: ", "not tested alone: ")), line
        assert "the pull" not in line and "NCCL_PROTO" not in line


def test_no_effect_is_said_with_its_interval_only_when_measured_alone() -> None:
    result = explain(2, bench({1: 0.35}))    # the first half, measured alone: no effect
    lines = item_lines(result, ITEMS[:2])
    assert lines[0] == "cause: NCCL_PROTO=LL missing, alone 94 -> 61.1 (-35%)"
    assert lines[2].startswith("no effect: the pull, alone 94 -> 94 (+0.0%, within the "
                               "noise: +/-"), lines
    result = explain(4, bench({0: 0.35}))
    assert "not tested alone: the patch (within the noise of a set that held it)" in \
        item_lines(result, ITEMS)


def test_an_interaction_is_named_only_together() -> None:
    def measure(applied: frozenset[int]) -> list[float]:
        factor = 0.53 if {1, 3} <= applied else 1.0
        return [value * factor for value in GOOD_RUNS]
    lines = item_lines(explain(4, measure), ITEMS)
    assert lines[:2] == ["cause, only together: NCCL_PROTO=LL missing + the patch, together "
                         "94 -> 49.82 (-47%)", "together 94 -> 49.82 (-47%): the whole drop"]


def test_a_drifting_machine_is_said_and_corrected_for() -> None:
    # 2% slower every invocation: without the correction, every later trial would read as
    # a regression from GOOD's first runs
    result = explain(4, bench({2: 0.4}, drift=-0.02))
    assert result.causes == [frozenset({2})]
    assert item_lines(result, ITEMS)[0] == "cause: NCCL_DEBUG=INFO, alone 94 -> 56.4 (-40%)"
    measured = result.drift.measurements
    assert measured >= 3 and result.remeasured == measured - 1
    assert drift_lines(result) == [
        f"drift: the benchmark moved -2.0% per invocation during the run (GOOD measured "
        f"{measured} times); trials corrected for it"]


def test_a_still_machine_says_nothing_of_drift() -> None:
    assert drift_lines(explain(4, bench({2: 0.4}))) == []


def test_percents_are_whole_from_ten_on() -> None:
    assert [percent(x) for x in (-0.333, -0.0999, 0.002, 0.1, 0.0)] == \
        ["-33%", "-10.0%", "+0.2%", "+10%", "+0.0%"]


def test_a_difference_alone_is_not_a_cause_only_when_faster() -> None:
    """Measured alone: faster is "not a cause"; runs too spread to settle it are "not
    settled alone", never "not a cause" (a cause in the slower direction is not ruled out)."""
    def explained(alone: list[float]) -> list[str]:
        trials = [Trial(frozenset(), list(GOOD_RUNS), "good", "endpoint"),
                  Trial(frozenset({0, 1}), [61.0, 61.2, 60.8], "bad", "endpoint"),
                  Trial(frozenset({0}), [61.1, 61.0, 60.9], "bad", "search"),
                  Trial(frozenset({1}), alone, "can't tell", "search")]
        result = Explanation("found", [frozenset({0})], frozenset(), trials, 2,
                             remainder="same")
        return item_lines(result, ITEMS[:2])[2:]

    assert explained([103.0, 103.4, 102.8]) == [
        "not a cause: NCCL_PROTO=LL missing, alone 94 -> 103 (+9.6%)"]
    assert explained([80.0, 99.0, 112.0]) == [
        "not settled alone: NCCL_PROTO=LL missing, alone 94 -> 99 (+5.3%) (within the noise "
        "of a set that held it)"]
