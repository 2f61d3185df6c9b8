"""`envsnap bisect` through the real CLI on real git repositories, locally and over sshd.

A checkout is captured as `good` at a fast commit; commits follow, one of which slows the
benchmark (speed.txt, which tests/data/bisect_bench.py reads, goes from 94 to 60); the new
HEAD is captured as `bad`. Bisect must name that commit in about log2(commits) steps, and
leave the checkout, its branch and the user's uncommitted work exactly as they were.
"""
from __future__ import annotations

import math
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Cli
from helpers.bisecthistory import BENCH, METRIC, SLOW, History, bisect, regression_at
from helpers.folded import item, words
from helpers.sshd import Sshd

from envsnap.bisect.render import event_line
from envsnap.bisect.run import RunEnded, Step
from envsnap.bisect.search import Commit


def step_rows(output: str) -> list[str]:
    table = output.split("step     commit")[1]
    return re.findall(r"^step \d+ .*$", table, re.MULTILINE)


@pytest.fixture
def history(tmp_path: Path, cli: Cli) -> History:
    made = History(tmp_path / "story")
    made.capture(cli, "good")
    return made


def test_finds_the_commit_in_log2_steps_and_keeps_the_users_work(cli: Cli,
                                                                  history: History) -> None:
    shas = history.commits(regression_at(11, 16), slow_at=11)
    history.capture(cli, "bad")
    history.dirty()
    before = history.state()
    result = bisect(cli, history)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"first bad commit: {shas[10]} {SLOW} speed.txt src/module_11.py " \
        in words(result.stdout)
    measured = re.search(r"measured again (\d+) times?", words(result.stdout))
    assert measured, result.stdout
    again = int(measured.group(1))
    assert again >= 1
    assert len(step_rows(result.stdout)) == math.ceil(math.log2(16))
    assert "benchmark invocations: " \
        f"{2 + again} at the endpoints ({again} of them again during the search), 4 at 4 " \
        "steps over 16 commits" in words(result.stdout)
    assert "envsnap: work saved before bisect good..bad (HEAD was main at" in words(result.stdout)
    assert "your work is back" in words(result.stdout)
    assert history.state() == before
    assert history.repo.git("diff", "--cached", "--name-only") == "README.md"  # still staged
    # every run reported as it ended, on stderr: 5 runs at each end, at each of 4 steps and
    # at each end measured again, each saying where it ran (the endpoints come before any
    # step line names a commit)
    runs = [line for line in result.stderr.splitlines() if ": run " in line]
    assert len(runs) == (2 + 4 + again) * 5
    assert runs[0].startswith(f"  good ({history.good[:12]}): run 1 of 5: ")
    assert runs[5].startswith(f"  bad ({shas[-1][:12]}): run 1 of 5: ")
    assert re.match(r"  step 1 \([0-9a-f]{12}\): run 1 of 5: ", runs[10])
    assert "run " not in result.stdout.replace("runs", "")


def test_a_large_gap_is_found_with_3_runs_per_commit_by_default(cli: Cli,
                                                                 history: History) -> None:
    """94 -> 60 with 2% noise: 3 runs at each commit tell it (issue 14: no more runs than
    the gap needs), and the total is reported."""
    shas = history.commits(regression_at(6, 8), slow_at=6)
    history.capture(cli, "bad")
    result = cli("bisect", "good", "bad", "--cmd", BENCH, "--metric", METRIC,
                 "--cwd", str(history.repo.path), timeout=180)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"first bad commit: {shas[5]} {SLOW}" in words(result.stdout)
    rows = step_rows(result.stdout)
    # 3 runs tell each step; a first step judged before any drift is known may take 3 more
    assert len(rows) == 3 and all(re.search(r"\s(3|6)\s+[0-9.]+\s+(good|bad)\s", row)
                                  for row in rows), rows
    counted = re.search(r"benchmark invocations: (\d) at the endpoints \((\d) of them again "
                        r"during the search\), [34] at 3 steps over 8 commits \(log2 = 3\.0\); "
                        r"\d+ runs in all", words(result.stdout))
    assert counted and int(counted.group(1)) == 2 + int(counted.group(2)) <= 4, result.stdout


def test_no_regression_between_the_endpoints_stops_there(cli: Cli, history: History) -> None:
    history.commits(["94"] * 5)
    history.capture(cli, "bad")
    before = history.state()
    result = bisect(cli, history)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "nothing to bisect: good -> bad: same" in words(result.stdout)
    assert step_rows(result.stdout) == [] and history.state() == before


def test_a_good_snapshot_that_is_not_an_ancestor_is_refused(cli: Cli, tmp_path: Path) -> None:
    history = History(tmp_path / "story")
    history.repo.git("checkout", "-q", "-b", "side")
    history.repo.commit("Side work", {"side.txt": "side\n"})
    history.capture(cli, "good")
    history.repo.git("checkout", "-q", "main")
    history.commits(regression_at(2, 3), slow_at=2)
    history.capture(cli, "bad")
    history.dirty()
    before = history.state()
    result = bisect(cli, history)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "is not an ancestor of" in result.stderr and "nothing was changed" in result.stderr
    assert history.state() == before


def test_two_snapshots_of_one_commit_have_nothing_between_them(cli: Cli,
                                                              history: History) -> None:
    history.capture(cli, "bad")
    result = bisect(cli, history)
    assert result.returncode == 2
    assert "have the same HEAD" in result.stderr


def test_a_range_where_every_benchmark_fails_lists_the_candidates(cli: Cli,
                                                                 history: History) -> None:
    shas = history.commits(["broken"] * 5 + ["60"])
    history.capture(cli, "bad")
    before = history.state()
    result = bisect(cli, history)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "only skipped commits are left: the first bad commit is one of these 6:" \
        in words(result.stdout)
    for sha in shas:
        assert f" {sha} Change" in words(result.stdout)
    assert len(step_rows(result.stdout)) == 5
    assert all(" skip " in row for row in step_rows(result.stdout))
    assert "error: the build failed" in words(result.stdout)
    assert history.state() == before


def test_noise_that_never_lets_a_verdict_form_stops_at_the_cap(cli: Cli,
                                                               history: History) -> None:
    history.commits(["noisy"] * 3 + ["60"])
    history.capture(cli, "bad")
    before = history.state()
    result = bisect(cli, history, "--max-repeat", "15")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "can't tell after 15 runs (--max-repeat 15): the noise never let a verdict form" \
        in words(result.stdout)
    (row,) = step_rows(result.stdout)
    assert "  15  " in row and "can't tell" in row
    assert history.state() == before


def test_with_patch_reapplies_the_good_local_patch_and_skips_where_it_conflicts(
        cli: Cli, tmp_path: Path) -> None:
    history = History(tmp_path / "story")
    history.repo.write("tune.txt", "1.0\n")          # the local tuning the engineer carried
    history.capture(cli, "good")
    history.repo.git("checkout", "--", "tune.txt")
    shas = history.commits(["94"] * 3)
    shas.append(history.repo.commit("Retune", {"tune.txt": "0.7\n"}))   # the patch conflicts
    shas.append(history.repo.commit("Untune", {"tune.txt": "0.5\n"}))
    history.commits(["60"] * 3, slow_at=6)
    history.capture(cli, "bad")
    history.dirty()
    before = history.state()
    result = bisect(cli, history, "--with-patch")
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"first bad commit: {shas[5]} {SLOW}" in words(result.stdout)
    good_row = next(line for line in result.stdout.splitlines() if line.startswith("good "))
    assert re.search(r"median 9[0-9]", good_row), good_row      # 94 x 1.0: the patch is in
    retune = next(row for row in step_rows(result.stdout) if "Retune" in row)
    assert " skip " in retune
    assert "the good snapshot's patch does not apply here" in words(result.stdout)
    assert history.state() == before


def test_tracked_files_the_benchmark_changes_are_stashed_not_lost(cli: Cli,
                                                                 history: History) -> None:
    history.repo.commit("Add a generated file", {"build.txt": "source\n"})
    shas = history.commits(regression_at(3, 4), slow_at=3)
    history.capture(cli, "bad")
    history.dirty()
    result = bisect(cli, history)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"first bad commit: {shas[2]} {SLOW}" in words(result.stdout)
    assert "the benchmark changed tracked files at" in words(result.stdout)
    kept = history.repo.git("stash", "list", "--format=%s").splitlines()
    assert kept and all("envsnap bisect: changes the benchmark made at" in s for s in kept)
    assert (history.repo.path / "build.txt").read_text() == "source\n"
    assert history.repo.head() == shas[-1]
    assert "unstaged line" in (history.repo.path / "README.md").read_text()
    assert (history.repo.path / "notes.txt").read_text() == "my notes\n"


def test_the_good_snapshots_recorded_runs_can_be_the_baseline(cli: Cli,
                                                              tmp_path: Path) -> None:
    history = History(tmp_path / "story")
    repo = str(history.repo.path)
    recorded = cli("bench", "local", "--cmd", BENCH, "--metric", METRIC, "--repeat", "5",
                   "--cwd", repo, "--repo", repo, "--label", "good")
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    shas = history.commits(regression_at(2, 4), slow_at=2)
    history.capture(cli, "bad")
    result = bisect(cli, history, "--good-from-snapshot")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "good: recorded in the good snapshot" in words(result.stdout)
    assert f"first bad commit: {shas[1]} {SLOW}" in words(result.stdout)
    assert "benchmark invocations: 1 at the endpoints" in words(result.stdout)
    other = bisect(cli, history, "--good-from-snapshot", "--lower-is-better", "--metric", "x(1)")
    assert other.returncode == 2 and "recorded another benchmark" in other.stderr


def test_an_untracked_benchmark_script_needs_keep_untracked(cli: Cli,
                                                            history: History) -> None:
    shas = history.commits(regression_at(2, 3), slow_at=2)
    history.capture(cli, "bad")
    script = history.repo.write("bench_one.py", Path(BENCH.split()[-1]).read_text())
    before = history.state()
    command = ("bisect", "good", "bad", "--cmd", f"{sys.executable} bench_one.py", "--metric",
               METRIC, "--cwd", str(history.repo.path))
    stashed = cli(*command)
    assert stashed.returncode == 3, stashed.stdout + stashed.stderr
    assert "the benchmark fails at the good commit" in stashed.stderr
    assert "--keep-untracked leaves them" in stashed.stderr
    assert history.state() == before and script.exists()
    kept = cli(*command, "--keep-untracked")
    assert kept.returncode == 1, kept.stdout + kept.stderr
    assert f"first bad commit: {shas[1]} {SLOW}" in words(kept.stdout)
    assert history.state() == before


def test_ctrl_c_puts_the_checkout_and_the_work_back(cli: Cli, history: History) -> None:
    history.commits(regression_at(5, 8), slow_at=5)
    history.capture(cli, "bad")
    history.dirty()
    before = history.state()
    running = subprocess.Popen(
        [sys.executable, "-m", "envsnap", "bisect", "good", "bad", "--cmd", f"{BENCH} 0.2",
         "--metric", METRIC, "--repeat", "4", "--cwd", str(history.repo.path)],
        cwd=cli.cwd, env=cli.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert running.stdout is not None
    seen = []
    for line in running.stdout:          # interrupt once the first step is done
        seen.append(line)
        if line.startswith("step 1 "):
            running.send_signal(signal.SIGINT)
            break
    out, err = running.communicate(timeout=60)
    said = words("".join(seen) + out)   # folded to 80 columns
    assert running.returncode == 130, said + err
    assert err.endswith(f"envsnap: interrupted: local: {history.repo.path} is as bisect found "
                        "it (HEAD, its branch and your work put back, its lock released): "
                        "nothing to roll back; run the same envsnap bisect again to start "
                        "over\n"), err
    assert "HEAD back to main at" in said and "your work is back" in said
    assert history.state() == before
    assert not list((Path(cli.env["HOME"]) / ".cache" / "envsnap").glob("locks/*.lock"))


@pytest.mark.ssh
def test_bisect_over_ssh(ssh_cli: Cli, sshd: Sshd, tmp_path: Path) -> None:
    host = sshd.addresses[0]
    history = History(tmp_path / "story")
    history.capture(ssh_cli, "good", host)
    shas = history.commits(regression_at(3, 8), slow_at=3)
    history.capture(ssh_cli, "bad", host)
    history.dirty()
    before = history.state()
    result = bisect(ssh_cli, history)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"first bad commit: {shas[2]} {SLOW}" in words(result.stdout)
    assert f"on {host}" in item(result.stdout, "bisect ")
    assert history.state() == before


def test_run_and_step_lines_say_where_and_count_in_the_singular() -> None:
    run = RunEnded("run 1 of 1: 0.1 s, exit 0, metric 94.00", "good (aec95928498c)")
    assert event_line(run) == "  good (aec95928498c): run 1 of 1: 0.1 s, exit 0, metric 94.00"
    step = Step("step", 2, Commit("48b2f8be7d7a" * 3, "Docs: change 6"), 6, [63.9], "bad",
                "worse than good", left=1, steps_left=1)
    assert event_line(step).endswith("[1 run, median 63.9]  bad: worse than good  "
                                     "(1 left, ~1 step)")
