"""The pure half of bisect: the line of commits, the halving with skips, the verdicts."""
from __future__ import annotations

import math
import random
from collections.abc import Collection

import pytest

from envsnap.bisect.search import (
    BAD,
    CANT_TELL,
    GOOD,
    SKIP,
    Commit,
    Search,
    classify,
    line_of_commits,
    parse_log,
)


def test_parse_log_reads_sha_parents_and_subject() -> None:
    text = "c3 c2\tThird: with a tab\tinside\nc2 c1 s1\tMerge side\n"
    assert parse_log(text) == [Commit("c3", "Third: with a tab\tinside", ("c2",)),
                               Commit("c2", "Merge side", ("c1", "s1"))]


def test_a_linear_history_is_every_commit_oldest_first() -> None:
    ancestry = [Commit("c3", "", ("c2",)), Commit("c2", "", ("c1",)), Commit("c1", "", ("g",))]
    assert [c.sha for c in line_of_commits(ancestry, "g", "c3")] == ["c1", "c2", "c3"]


def test_across_a_merge_the_line_follows_first_parents() -> None:
    #  g - m1 - M - m2        (M merges s1 - s2, branched from g)
    #   \       /
    #    s1 - s2
    ancestry = [Commit("m2", "", ("M",)), Commit("M", "", ("m1", "s2")),
                Commit("s2", "", ("s1",)), Commit("s1", "", ("g",)), Commit("m1", "", ("g",))]
    assert [c.sha for c in line_of_commits(ancestry, "g", "m2")] == ["m1", "M", "m2"]


def test_a_good_commit_on_a_merged_branch_is_reached_through_the_merge() -> None:
    #  b - m1 - M - m2        good is s1, on the branch M merged
    #   \       /
    #    s1 - s2
    ancestry = [Commit("m2", "", ("M",)), Commit("M", "", ("m1", "s2")), Commit("s2", "", ("s1",))]
    assert [c.sha for c in line_of_commits(ancestry, "s1", "m2")] == ["s2", "M", "m2"]


def run_search(size: int, first_bad: int, skipped: Collection[int] = ()) -> tuple[Search, int]:
    state, steps = Search(size), 0
    index = state.next()
    while index is not None:
        steps += 1
        verdict = SKIP if index in skipped else BAD if index >= first_bad else GOOD
        state.record(index, verdict)
        index = state.next()
    return state, steps


@pytest.mark.parametrize("size", [1, 2, 3, 7, 8, 9, 16, 63, 64, 65, 100])
def test_halving_finds_every_position_in_at_most_log2_steps(size: int) -> None:
    for first_bad in range(size):
        state, steps = run_search(size, first_bad)
        assert state.bad == first_bad and state.suspects() == [first_bad]
        assert steps <= math.ceil(math.log2(size))


def test_a_skipped_commit_is_replaced_by_its_neighbour() -> None:
    state = Search(8)
    assert state.next() == 3
    state.record(3, SKIP)
    assert state.next() == 2       # nearest the middle, the older one on a tie
    state.record(2, GOOD)
    assert state.next() == 4


def test_when_only_skipped_commits_are_left_they_are_the_suspects() -> None:
    state, steps = run_search(6, first_bad=5, skipped={0, 1, 2, 3, 4})
    assert steps == 5 and state.suspects() == [0, 1, 2, 3, 4, 5]
    state, _ = run_search(10, first_bad=6, skipped={5})
    assert state.suspects() == [5, 6]


def test_steps_left_is_ceil_log2_of_the_untested_plus_one() -> None:
    assert Search(64).steps_left() == 6
    assert Search(1).steps_left() == 0


def noisy(level: float, n: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [level * rng.uniform(0.98, 1.02) for _ in range(n)]


def test_classify_like_good_like_bad_and_part_way() -> None:
    good, bad = noisy(94, 5, 1), noisy(60, 5, 2)
    assert classify(good, bad, noisy(94, 5, 3), False)[0] == GOOD
    assert classify(good, bad, noisy(60, 5, 4), False)[0] == BAD
    assert classify(good, bad, noisy(77, 5, 5), False)[0] == BAD    # already worse than good
    assert classify(bad, good, noisy(94, 5, 6), True)[0] == BAD     # latencies: higher is worse


def test_classify_cannot_tell_from_wide_noise_or_too_few_runs() -> None:
    good, bad = noisy(94, 5, 1), noisy(60, 5, 2)
    verdict, why = classify(good, bad, [10, 150, 77, 40, 115] * 3, False)
    assert verdict == CANT_TELL and "too noisy to tell" in why
    verdict, why = classify(good, bad, noisy(94, 1, 3), False)
    assert verdict == CANT_TELL and "too few runs (5 vs 1)" in why


def test_classify_needs_only_two_runs_when_the_gap_dwarfs_the_noise() -> None:
    good, bad = noisy(94, 3, 1), noisy(60, 3, 2)
    assert classify(good, bad, noisy(94, 2, 3), False)[0] == GOOD
    assert classify(good, bad, noisy(60, 2, 4), False)[0] == BAD
