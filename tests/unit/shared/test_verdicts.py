"""The verdict and outcome words (envsnap/verdicts.py): each word of each Literal has its
constant there, and the words never change (they are in --json and in saved bench records)."""
from __future__ import annotations

from typing import get_args

from envsnap import verdicts

KINDS = {
    "BenchVerdict": {"regression", "improvement", "same", "can't tell"},
    "TrialVerdict": {"good", "bad", "can't tell"},
    "Classification": {"good", "bad", "can't tell", "skip"},
    "ExplainOutcome": {"found", "no regression", "can't tell"},
    "BisectOutcome": {"found", "skipped", "can't tell", "no regression",
                      "can't tell at the endpoints"},
    "RerunOutcome": {"back to good", "still bad", "part way back", "can't tell"},
}


def words(kind: object) -> set[str]:
    found: set[str] = set()
    for arg in get_args(kind):
        found |= words(arg) if get_args(arg) else {arg}
    return found


def test_each_kind_has_its_words_and_each_word_its_constant() -> None:
    constants = {value for name, value in vars(verdicts).items()
                 if name.isupper() and isinstance(value, str)}
    for name, expected in KINDS.items():
        assert words(getattr(verdicts, name)) == expected, name
        assert expected <= constants, name
