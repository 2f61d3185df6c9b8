"""The diff never says something false (issue 24): a verdict speaks only of the sections it
compared and names those left out, and its sentences never point where nothing stands. Real
local captures and real `envsnap bench local` runs of a real git pull."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import Cli
from helpers.gitrepos import Story

METRIC = r"tok/s: ([0-9.]+)"


def bench(cli: Cli, label: str, repo: Path, rate: float, *extra: str) -> None:
    """One benchmark command for both sides; the rate it prints is read from a file."""
    (cli.cwd / "rate").write_text(str(rate))
    printer = "import pathlib; print('tok/s:', pathlib.Path('rate').read_text())"
    result = cli("bench", "local", "--cmd", f'{sys.executable} -c "{printer}"', "--cwd",
                 str(cli.cwd), "--metric", METRIC, "--repeat", "3", "--sample-interval", "0",
                 "--repo", str(repo), "--label", label, *extra)
    assert result.returncode == 0, result.stderr


@pytest.fixture
def pulled(cli: Cli, tmp_path: Path) -> Cli:
    """good at 94 tok/s; then nine commits pulled, one on the NCCL path; bad at 60 tok/s."""
    story = Story(tmp_path / "git")
    bench(cli, "good", story.checkout.path, 94.0)
    story.upstream_moves()
    story.pull()
    bench(cli, "bad", story.checkout.path, 60.0)
    return cli


def verdict_of(stdout: str) -> str:
    return stdout.split("\n\n")[1].splitlines()[-1]


def test_a_section_verdict_speaks_of_what_it_compared(pulled: Cli) -> None:
    result = pulled("diff", "good", "bad", "--section", "env,nvidia")
    assert result.returncode == 0, result.stderr   # nothing compared drifted
    verdict = verdict_of(result.stdout)
    assert "no recorded fact explains it" not in verdict
    assert verdict.startswith("the benchmark moved but nothing in nvidia and env explains it")
    assert "left out by --section: git, which differs (diff without --section shows how); " \
           "system, cuda_nccl and python_env, the same in both." in verdict
    shown = json.loads(pulled("diff", "good", "bad", "--section", "env,nvidia", "--json").stdout)
    assert shown["sections"] == ["nvidia", "env"]
    assert shown["left_out"] == ["system", "cuda_nccl", "python_env", "git"]
    assert shown["left_out_differ"] == ["git"]
    markdown = pulled("diff", "good", "bad", "--section", "env,nvidia", "--markdown").stdout
    assert "left out by --section: git, which differs" in markdown


def test_a_section_verdict_with_findings_names_what_it_left_out(pulled: Cli) -> None:
    verdict = verdict_of(pulled("diff", "good", "bad", "--section", "git").stdout)
    assert verdict.startswith("code moved: 9 commits pulled into ")
    assert verdict.endswith("the benchmark moved; the findings listed are the candidates; "
                            "left out by --section: system, nvidia, cuda_nccl, python_env and "
                            "env, the same in both.")
    everything = verdict_of(pulled("diff", "good", "bad").stdout)
    assert "left out" not in everything and "findings above" not in everything
