"""`envsnap explain` through the real CLI on two causes of unequal size: a pull that costs a
third of the throughput and a missing NCCL_PROTO=LL that costs a sixth, with a benchmark
that has no noise at all (its metric is computed from the checkout and its env).

Before, a set counted as bad only with two fifths of the endpoints' drop: the pull was named,
the variable called "no effect" beside its own measurement of 94 -> 78.33, and nothing said
that 62.67 -> 52.22 was left unexplained. Now both are named with their sizes, and together
they are the whole drop."""
from __future__ import annotations

import sys
from pathlib import Path

from conftest import Cli
from helpers.folded import words
from helpers.gitrepos import git_env, init

METRIC = r"throughput: ([0-9.]+) tok/s"
BENCH = """\
import os, pathlib, sys
factor = float(pathlib.Path(sys.argv[1], "speed.txt").read_text())
if os.environ.get("NCCL_PROTO") != "LL":
    factor *= 5 / 6
print(f"throughput: {94 * factor:.2f} tok/s")
"""


def test_a_pull_and_a_missing_variable_are_both_named_with_their_sizes(
        cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "gituser").mkdir()
    repo = init(tmp_path / "repo", git_env(tmp_path / "gituser"))
    good = repo.commit("Initial", {"speed.txt": "1.0\n", "README.md": "toy\n"})
    bench = tmp_path / "bench.py"
    bench.write_text(BENCH)
    cmd = f"{sys.executable} {bench} {repo.path}"

    def snapshot(label: str, env: dict[str, str]) -> None:
        with_env = Cli(env={**cli.env, **env}, cwd=cli.cwd)
        result = with_env("bench", "local", "--label", label, "--repo", str(repo.path),
                          "--cmd", cmd, "--metric", METRIC, "--repeat", "1",
                          "--sample-interval", "0")
        assert result.returncode == 0, result.stdout + result.stderr

    env = {name: value for name, value in cli.env.items() if name != "NCCL_PROTO"}
    snapshot("good", {**env, "NCCL_PROTO": "LL"})
    repo.commit("Tune the kernel", {"speed.txt": str(2 / 3) + "\n"})
    snapshot("bad", env)
    result = Cli(env=env, cwd=cli.cwd)("explain", "good", "bad", "--cmd", cmd, "--metric",
                                       METRIC, "--repeat", "3", "--yes", timeout=300)
    assert result.returncode == 1, result.stdout + result.stderr
    out = words(result.stdout)
    assert f"cause: {repo.path}: 1 commit {good[:12]}..{repo.head()[:12]}, alone " \
        "94 -> 62.67 (-33%)" in out, result.stdout
    assert "cause: NCCL_PROTO=LL missing from the benchmark env, alone 94 -> 78.33 (-17%)" \
        in out, result.stdout
    assert "together 94 -> 52.22 (-44%): the whole drop" in out, result.stdout
    assert "no effect: NCCL_PROTO" not in out
