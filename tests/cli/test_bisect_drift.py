"""`envsnap bisect` on the regressions real machines make, through the real CLI on real git
repositories: a machine that slows down while bisect runs, a range with two slow commits,
and the benchmark both snapshots recorded reused without --cmd and --metric."""
from __future__ import annotations

import re
import sys
from pathlib import Path

from conftest import ROOT, Cli
from helpers.bisecthistory import BENCH, METRIC
from helpers.folded import words
from helpers.gitrepos import Repo, git_env, init

DRIFT_BENCH = f"{sys.executable} {ROOT / 'tests' / 'data' / 'bisect_drift_bench.py'}"


def checkout(root: Path, speed: str) -> Repo:
    (root / "home").mkdir(parents=True)
    repo = init(root / "repo", git_env(root / "home"))
    repo.commit("Initial", {"speed.txt": f"{speed}\n", "README.md": "app\n"})
    return repo


def capture(cli: Cli, repo: Repo, label: str) -> None:
    result = cli("capture", "local", "--label", label, "--repo", str(repo.path))
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_machine_that_slows_down_does_not_make_a_docs_commit_the_culprit(
        cli: Cli, tmp_path: Path) -> None:
    """The issue's story: GOOD 5640, BAD 1370 (-76%), docs commits before the culprit, and a
    machine that loses 1.2% a run (3.6% an invocation of 3 runs): judged against GOOD's median
    measured minutes before, the docs commits read as slower and one was named."""
    repo = checkout(tmp_path / "story", "5640")
    capture(cli, repo, "good")
    docs = [repo.commit(f"docs: note {n}", {f"docs/note_{n}.md": f"note {n}\n"})
            for n in range(1, 9)]
    culprit = repo.commit("Use the unfused attention kernel", {"speed.txt": "1370\n"})
    repo.commit("docs: note 9", {"docs/note_9.md": "note 9\n"})
    repo.commit("Tidy the README", {"README.md": "app, tidied\n"})
    capture(cli, repo, "bad")
    result = cli("bisect", "good", "bad", "--cmd", f"{DRIFT_BENCH} -0.012 0.01", "--metric",
                 METRIC, "--cwd", str(repo.path), timeout=300)
    said = words(result.stdout)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"first bad commit: {culprit} Use the unfused attention kernel" in said, said
    assert not any(f"first bad commit: {sha}" in said for sha in docs)
    drift = re.search(r"drift: ([-+][0-9.]+)% per invocation, beyond the noise: taken out of "
                      r"every run \(good and bad measured again (\d+) times? during the search\)",
                      said)
    assert drift, said
    assert -4.5 < float(drift.group(1)) < -1.5 and int(drift.group(2)) >= 1
    assert "alone:" in said and "the whole drop" in said


def test_two_slow_commits_are_both_named_with_their_sizes(cli: Cli, tmp_path: Path) -> None:
    """94 -> 70 at commit 3 (-26%), 70 -> 49 at commit 7 (-30%): the first found part of the
    way down, the search goes on from it, and each is sized against the good state before."""
    repo = checkout(tmp_path / "story", "94")
    capture(cli, repo, "good")
    speeds = ["94", "94", "70", "70", "70", "70", "49", "49", "49", "49"]
    shas = [repo.commit("Fuse the norm" if n == 3 else "Pin NCCL_PROTO" if n == 7
                        else f"Change {n}", {"speed.txt": f"{speed}\n",
                                             f"src/m{n}.py": f"N = {n}\n"})
            for n, speed in enumerate(speeds, 1)]
    capture(cli, repo, "bad")
    result = cli("bisect", "good", "bad", "--cmd", BENCH, "--metric", METRIC, "--repeat", "5",
                 "--cwd", str(repo.path), timeout=300)
    said = words(result.stdout)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"first bad commit: {shas[2]} Fuse the norm speed.txt src/m3.py size: " in said
    first = re.search(r"size: ([0-9.]+) -> ([0-9.]+) \((-\d+)%\) against the good commit", said)
    assert first and -30 <= int(first.group(3)) <= -22, said
    assert f"next slow commit: {shas[6]} Pin NCCL_PROTO speed.txt src/m7.py size: " in said
    second = re.search(r"size: [0-9.]+ -> [0-9.]+ \((-\d+)%\) against the slow commit before "
                       rf"it {shas[2][:12]}", said)
    assert second and -34 <= int(second.group(1)) <= -26, said
    assert re.search(r"together: [0-9.]+ -> [0-9.]+ \(-4\d%\): the whole drop", said), said


def test_the_recorded_benchmark_runs_without_cmd_or_metric_in_the_repository(
        cli: Cli, tmp_path: Path) -> None:
    """Both snapshots hold the same `envsnap bench` record: bisect runs that benchmark, where
    it ran (the checkout, not the folder bisect is started in), without being told."""
    repo = checkout(tmp_path / "story", "94")
    path = str(repo.path)

    def bench(label: str) -> None:
        recorded = cli("bench", "local", "--cmd", BENCH, "--metric", METRIC, "--repeat", "3",
                       "--cwd", path, "--repo", path, "--label", label)
        assert recorded.returncode == 0, recorded.stdout + recorded.stderr

    bench("good")
    shas = [repo.commit(f"Change {n}", {"speed.txt": f"{speed}\n"})
            for n, speed in enumerate(["94", "60", "60"], 1)]
    bench("bad")
    assert not (cli.cwd / "speed.txt").exists()      # run here, the benchmark would fail
    result = cli("bisect", "good", "bad", timeout=300)
    said = words(result.stdout)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"benchmark: as both snapshots recorded it: {BENCH} (metric {METRIC}, in {path})" \
        in said
    assert f"first bad commit: {shas[1]} Change 2" in said


def test_a_benchmark_neither_given_nor_recorded_alike_is_refused_in_one_line(
        cli: Cli, tmp_path: Path) -> None:
    repo = checkout(tmp_path / "story", "94")
    capture(cli, repo, "plain")
    path = str(repo.path)
    recorded = cli("bench", "local", "--cmd", BENCH, "--metric", METRIC, "--repeat", "3",
                   "--cwd", path, "--repo", path, "--label", "good")
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    repo.commit("Change 1", {"speed.txt": "60\n"})
    other = cli("bench", "local", "--cmd", f"{BENCH} 0", "--metric", METRIC, "--repeat", "3",
                "--cwd", path, "--repo", path, "--label", "bad")
    assert other.returncode == 0, other.stdout + other.stderr
    for good, told in (("plain", "bisect needs --cmd and --metric: snapshot 'plain' records no "
                                 "benchmark (envsnap bench HOST --label ... records one)"),
                       ("good", "bisect needs --cmd and --metric: snapshots 'good' and 'bad' "
                                "recorded different benchmarks (command, metric, folder or "
                                "server)")):
        result = cli("bisect", good, "bad")
        assert result.returncode == 2, result.stdout + result.stderr
        assert result.stderr == f"envsnap: error: {told}\n", result.stderr
    metric_only = cli("bisect", "good", "bad", "--metric", METRIC)
    assert metric_only.returncode == 2
    assert "bisect needs --cmd: snapshots 'good' and 'bad' recorded different" \
        in metric_only.stderr
