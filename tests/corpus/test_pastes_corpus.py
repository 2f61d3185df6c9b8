"""`envsnap import` on real pastes from public issue threads, each in the three ways people
copy it (tests/data/pastes/threads: the rule that drew them, their threads, the facts labelled
by hand). Every paste goes through the real CLI into a store, then `show`; the stored facts
are compared with the labels. What is read must be read right; how much is read may only
grow (floor.json holds today's count), and nearly every paste must be read right."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import Cli, cli_env
from helpers.pastecorpus import CORPUS, INTERNAL, Outcome, misses, score, table

FLOOR = json.loads((CORPUS / "floor.json").read_text())["read_right"]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> list[Outcome]:
    folder = tmp_path_factory.mktemp("corpus")
    cli = Cli(env=cli_env(folder), cwd=folder)

    def run(argv: list[str]) -> tuple[int, str]:
        result = cli(*argv)
        return result.returncode, result.stderr

    return score(run, Path(folder) / "pastes-store")


def test_every_paste_and_copy_style_is_tried(outcomes: list[Outcome]) -> None:
    files = sorted(p.name for p in (CORPUS / "pastes").glob("*.txt"))
    tried = sorted(f"{o.name}.{o.style}.txt" for o in outcomes)
    assert tried == files and len(files) >= 100


def test_no_fact_is_read_wrong(outcomes: list[Outcome]) -> None:
    wrong = [f"{o.name}.{o.style}: {f.key}: want {f.want!r}, got {f.got!r}"
             for o in outcomes for f in o.wrong]
    assert wrong == []


def test_no_fewer_pastes_are_read_right_than_the_floor(outcomes: list[Outcome]) -> None:
    right = sum(o.read_right for o in outcomes)
    assert right >= FLOOR, table(outcomes) + "\n\n" + misses(outcomes)


def test_no_paste_is_an_internal_error(outcomes: list[Outcome]) -> None:
    crashed = [f"{o.name}.{o.style}: {o.message}" for o in outcomes if o.code == INTERNAL]
    assert crashed == []


def test_nearly_every_paste_is_read_right(outcomes: list[Outcome]) -> None:
    right = sum(o.read_right for o in outcomes)
    assert right >= 0.95 * len(outcomes), table(outcomes) + "\n\n" + misses(outcomes)


def test_the_corpus_holds_at_least_150_threads() -> None:
    """The issue's floor: threads, each one paste in up to three copy styles."""
    index = json.loads((CORPUS / "index.json").read_text())
    assert len({paste["url"] for paste in index}) == len(index) >= 150
