"""Every text for a person folded to the terminal's width, through the real CLI on real git
repositories: 80 columns when stdout is not a terminal, COLUMNS when it is set, and a key
phrase ("no drift", "nothing else", a flag with its value) never split across two lines,
wherever the paths around it make the line break (envsnap/fold.py, cli/output.columns)."""
from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from conftest import Cli
from helpers.benchscript import write_bench
from helpers.folded import joined, overlong, paragraph
from helpers.gitrepos import Story
from helpers.restorestory import capture_good, moved_and_dirty

METRIC = r"gen throughput \(token/s\): ([0-9.]+)"


def outputs(cli: Cli, story: Story, tmp_path: Path) -> dict[str, str]:
    """The text form of each command that writes one, on the STORY in miniature: a good
    state captured, a pull and new work, the bad state captured, a benchmark run."""
    repo = str(story.checkout.path)
    capture_good(cli, story, "local")
    moved_and_dirty(story)
    assert cli("capture", "local", "--label", "bad", "--repo", repo).returncode == 0
    store = Path(cli.env["ENVSNAP_STORE"])
    commands = {
        "diff": ("diff", "good", "bad"),
        "diff --all": ("diff", "good", "bad", "--all"),
        "diff --fleet": ("diff", "--fleet", str(store / "good.yaml"), str(store / "bad.yaml"),
                         str(store / "bad.yaml")),
        "timeline": ("timeline", "local", "--repo", repo, "--since", "10m"),
        "restore --check": ("restore", "good", "--check"),
        "show": ("show", "good"),
        "list": ("list",),
        "bench": ("bench", "local", "--cmd", write_bench(tmp_path / "b"), "--metric", METRIC,
                  "--repeat", "3", "--label", "benched"),
        # the plan explain prints before it asks: refused here (no --yes, no terminal)
        "explain": ("explain", "good", "bad", "--repo", repo, "--cmd", "true", "--metric",
                    "x=(\\d+)"),
    }
    said = {}
    for name, args in commands.items():
        result = cli(*args)
        assert result.stdout.strip() and "Traceback" not in result.stderr, (name, result)
        said[name] = result.stdout
    return said


def test_every_text_output_fits_80_columns_when_not_a_terminal(cli: Cli,
                                                               tmp_path: Path) -> None:
    said = outputs(cli, Story(tmp_path / "story-of-a-rather-long-folder-name"), tmp_path)
    for name, text in said.items():
        assert overlong(text, 80) == [], (name, text)
    # what was folded still reads whole: the verdict, the pull, the plan
    verdict = joined(paragraph(said["diff"], 1))
    assert verdict.startswith("code moved: 9 commits pulled into ") and \
        verdict.endswith("minor changes listed.") or "nothing else" in verdict, verdict
    assert "plan for local (check mode: nothing changed):" in said["restore --check"]
    assert "explain on local:" in said["explain"]


def test_columns_sets_the_width(cli: Cli, tmp_path: Path) -> None:
    cli.env["COLUMNS"] = "120"
    said = outputs(cli, Story(tmp_path / "story"), tmp_path)
    for name, text in said.items():
        assert overlong(text, 120) == [], (name, text)
    # lines wider than the pipe's default: the width came from COLUMNS
    assert any(80 < len(line) <= 120 for text in said.values() for line in text.splitlines())
    cli.env["COLUMNS"] = "not a number"   # as shutil reads it: ignored, 80
    assert overlong(cli("diff", "good", "bad").stdout, 80) == []


PHRASES = ("no drift", "nothing else")


def split_phrase(text: str) -> str | None:
    """A key phrase broken across two lines, if any."""
    lines = text.splitlines()
    for line, following in zip(lines, lines[1:]):
        for phrase in PHRASES:
            first, rest = phrase.split(" ", 1)
            if re.search(rf"(^|\s){re.escape(first)}$", line) and \
                    following.lstrip().startswith(rest):
                return f"{line!r} / {following!r}"
    return None


def test_key_phrases_are_never_split_whatever_the_width_and_paths(cli: Cli,
                                                                  tmp_path: Path) -> None:
    """Seeded: clones at paths of random lengths, diffs at random widths 40..200. The verdict
    paragraph reads "... pulled into PATH ...; nothing else that affects performance changed"
    and, across two hosts whose names vary in length, "...; no drift in git: ..."."""
    chance = random.Random(37)
    seen = {phrase: 0 for phrase in PHRASES}
    for case in range(3):
        folder = tmp_path / f"c{case}" / ("d" * chance.randint(1, 60))
        story = Story(folder)
        store = f"s{case}"
        cli.env["ENVSNAP_STORE"] = str(tmp_path / store)
        repo = str(story.checkout.path)
        assert cli("capture", "local", "--label", "good", "--repo", repo).returncode == 0
        story.upstream_moves()
        story.pull()
        assert cli("capture", "local", "--label", "bad", "--repo", repo).returncode == 0
        good = tmp_path / store / "good.yaml"
        other = tmp_path / store / "other.yaml"   # the same checkout on a host of another name
        text = good.read_text()
        name = "node-" + "x" * chance.randint(1, 70)
        other.write_text(re.sub(r"(?m)^(\s+hostname:) .+$", rf"\1 {name}", text))
        for width in chance.sample(range(40, 201), 30):
            cli.env["COLUMNS"] = str(width)
            for args in (("good", "bad"), (str(good), str(other), "--section", "git")):
                result = cli("diff", *args)
                assert result.returncode in (0, 1), result.stderr
                assert split_phrase(result.stdout) is None, (width, result.stdout)
                assert overlong(result.stdout, width) == [], (width, result.stdout)
                said = joined(paragraph(result.stdout, 1))
                seen.update({p: seen[p] + 1 for p in PHRASES if p in said})
    assert all(seen.values()), seen   # both phrases were put to the test


@pytest.mark.parametrize("width", [40, 57, 80])
def test_the_fold_would_split_without_its_glue(width: int) -> None:
    """The check above can fail: the same words, unglued, end a line at "no"."""
    from envsnap.fold import fold, keep, plain

    head = "different hosts: good is vm, other is " + "x" * 10
    for pad in range(width):
        text = f"{head}{'y' * pad}; {keep('no drift')} in git: every compared fact"
        glued, loose = fold(text, width, 0), fold(plain(text), width, 0)
        assert split_phrase("\n".join(glued)) is None
        if split_phrase("\n".join(loose)):
            return
    raise AssertionError("no padding made the unglued phrase split")
