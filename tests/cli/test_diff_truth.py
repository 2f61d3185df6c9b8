"""The diff never says something false (issue 24): a verdict speaks only of the sections it
compared and names those left out, and its sentences never point where nothing stands. Real
local captures and real `envsnap bench local` runs of a real git pull."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import Cli
from helpers.folded import item, joined, paragraph
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
    """The verdict paragraph (after a benchmark line, if any), its folded lines joined."""
    lines = stdout.split("\n\n")[1].splitlines()
    return " ".join(" ".join(line for line in lines if not line.startswith("benchmark:")).split())


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


# ---- a cut value shows where the two differ -------------------------------------------------

TOPOLOGIES = "/opt/cluster/config/nccl/topologies/"
GOOD_TOPO = TOPOLOGIES + "h200-nvl8-ib-rail-optimised.xml"
BAD_TOPO = TOPOLOGIES + "h100-sxm5-ib-rail-optimised.xml"


def capture(cli: Cli, label: str, **env: str) -> Path:
    cli.env.update(env)
    result = cli("capture", "local", "--label", label)
    assert result.returncode == 0, result.stderr
    return Path(cli.env["ENVSNAP_STORE"]) / f"{label}.yaml"


def row(stdout: str, where: str) -> str:
    """The finding's row at `where` and what stands under it, joined: its value may be
    folded onto the next line (80 columns)."""
    return item(stdout, where)


def test_a_cut_value_shows_where_the_two_differ(cli: Cli) -> None:
    capture(cli, "good", NCCL_TOPO_FILE=GOOD_TOPO)
    capture(cli, "bad", NCCL_TOPO_FILE=BAD_TOPO)
    line = row(cli("diff", "good", "bad").stdout, "shell.NCCL_TOPO_FILE")
    assert line.endswith("...logies/h200-nvl8-ib-rail... -> ...logies/h100-sxm5-ib-rail...")
    for form in ("--all", "--markdown"):   # whole, though a text row folds at 80 columns
        assert f"{GOOD_TOPO} -> {BAD_TOPO}" in " ".join(cli("diff", "good", "bad",
                                                            form).stdout.split())


def test_a_fleet_shows_where_a_long_value_differs(cli: Cli) -> None:
    path = cli.env["PATH"]
    files = [str(capture(cli, f"n{n}", PATH=f"/opt/sites/cluster-a/toolchains/{tool}/bin:"
                                            f"{path}"))
             for n, tool in enumerate(("cuda-12.8", "cuda-12.8", "cuda-12.4"))]
    line = row(cli("diff", "--fleet", *files).stdout, "shell.PATH")
    assert "majority ...cuda-12.8/bin:" in line and "... (2 of 3)" in line
    assert "n2: ...cuda-12.4/bin:" in line
    markdown = row(cli("diff", "--fleet", *files, "--markdown").stdout, "shell.PATH")
    assert f"/opt/sites/cluster-a/toolchains/cuda-12.4/bin:{path}" in markdown


def test_a_fleet_section_summary_names_what_it_left_out(cli: Cli) -> None:
    files = [str(capture(cli, f"n{n}")) for n in range(2)]
    summary = joined(paragraph(cli("diff", "--fleet", *files, "--section", "nvidia").stdout, 0))
    assert summary == ("fleet of 2 snapshots: every compared fact agrees (left out by "
                       "--section: cuda_nccl, env, git, python_env, system).")
    shown = json.loads(cli("diff", "--fleet", *files, "--section", "nvidia", "--json").stdout)
    assert shown["left_out"] == ["cuda_nccl", "env", "git", "python_env", "system"]
