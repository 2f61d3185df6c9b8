"""The explain story recorded on a real H200 (tests/data/h200/explain/, made by
tests/data/record_explain_story.py): bytecode written into the checkout, a results file
left there, a pull costing about a third and NVIDIA_TF32_OVERRIDE=0 costing more.

The recorded run is evidence of what envsnap did on the GPU; the replay feeds the GPU's own
measurements, as its journal holds them, to today's search, so a change to the search that
would have answered differently on that machine fails here."""
from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

import pytest

from envsnap.explain.render import item_lines
from envsnap.explain.search import explain
from envsnap.fold import plain
from tests.helpers.folded import unfolded

STORY = Path(__file__).parents[2] / "data" / "h200" / "explain"


def journal() -> list[dict[str, object]]:
    (path,) = (STORY / "snapshots" / "journals").glob("explain-*.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


def recorded_trials() -> dict[frozenset[int], list[list[float]]]:
    """Each recorded trial's runs by the set of differences it applied (0-based, as the
    search counts them; the journal counts from 1 as the plan prints them)."""
    trials: dict[frozenset[int], list[list[float]]] = defaultdict(list)
    for record in journal():
        if record["event"] == "trial":
            applied = frozenset(int(i) - 1 for i in record["differences"])  # type: ignore[attr-defined]
            trials[applied].append([float(v) for v in record["values"]])  # type: ignore[attr-defined]
    return trials


class Named:
    def __init__(self, name: str) -> None:
        self.name = name

    def describe(self) -> str:
        return self.name


def test_the_recorded_run_named_both_causes_and_left_the_checkout_as_found() -> None:
    story = json.loads((STORY / "story.json").read_text())
    text = "\n".join(unfolded(plain((STORY / "explain.txt").read_text())))
    culprit = next(commit for commit, subject in story["pulled"]
                   if subject.startswith("model:"))
    assert f"first bad commit: {culprit}" in text
    assert re.search(r"^cause: \S+work: 4 commits .*alone [\d.]+ -> [\d.]+ \(-\d+%\)$", text,
                     re.M), text
    assert re.search(r"^cause: NVIDIA_TF32_OVERRIDE=0 added to the benchmark env, alone ",
                     text, re.M), text
    assert re.search(r"^together .*: the whole drop$", text, re.M), text
    assert "no effect" not in text
    assert story["checkout"]["before"] == story["checkout"]["after"]
    assert "__pycache__/model.cpython-312.pyc, results.json) moved aside" in text
    log = json.loads((STORY / "log.json").read_text())
    assert log["explain"]["rc"] == 1      # a regression explained: the documented code


def test_todays_search_gives_the_same_answer_on_the_gpus_measurements() -> None:
    trials = recorded_trials()
    asked: dict[frozenset[int], int] = defaultdict(int)

    def measure(applied: frozenset[int]) -> list[float]:
        if applied not in trials:
            pytest.fail(f"the search asks for differences {sorted(applied)}, which the GPU "
                        "run never measured: record the story again")
        runs = trials[applied][asked[applied] % len(trials[applied])]
        asked[applied] += 1
        return runs

    result = explain(2, measure)
    plan = next(r for r in journal() if r["event"] == "plan")
    items = [Named(str(name)) for name in plan["differences"]]  # type: ignore[attr-defined]
    lines = [plain(line) for line in item_lines(result, items)]
    recorded = [line for line in unfolded(plain((STORY / "explain.txt").read_text()))
                if line.startswith(("cause: ", "together "))]
    assert lines[:3] == recorded, (lines, recorded)
