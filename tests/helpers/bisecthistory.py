"""A checkout whose benchmark slows at one commit, for bisect's end-to-end tests
(tests/cli/test_bisect_cli.py, tests/cli/test_charts.py): `good` captured at a fast commit, commits
follow, one of which slows the benchmark (speed.txt, which tests/data/bisect_bench.py reads,
goes from 94 to 60), and the new HEAD captured as `bad`."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import ROOT, Cli

from helpers.gitrepos import git_env, init

BENCH = f"{sys.executable} {ROOT / 'tests' / 'data' / 'bisect_bench.py'}"
METRIC = r"token/s\): ([0-9.]+)"
SLOW = "Slow down the all-reduce"


class History:
    """good (captured) -> commits 1..N (commit k slows it, unless told otherwise) -> bad."""

    def __init__(self, root: Path) -> None:
        (root / "home").mkdir(parents=True)
        self.repo = init(root / "repo", git_env(root / "home"))
        self.good = self.repo.commit("Initial", {"speed.txt": "94\n", "README.md": "app\n",
                                                 "tune.txt": "0.5\n"})
        self.shas: list[str] = []

    def commits(self, speeds: list[str], slow_at: int | None = None) -> list[str]:
        for number, speed in enumerate(speeds, len(self.shas) + 1):
            subject = SLOW if number == slow_at else f"Change {number}"
            changes = {f"src/module_{number}.py": f"N = {number}\n", "speed.txt": f"{speed}\n"}
            self.shas.append(self.repo.commit(subject, changes))
        return self.shas

    def capture(self, cli: Cli, label: str, host: str = "local") -> None:
        result = cli("capture", host, "--label", label, "--repo", str(self.repo.path))
        assert result.returncode == 0, result.stdout + result.stderr

    def dirty(self) -> None:
        """The user's work in progress: a staged edit, an unstaged edit, an untracked file."""
        self.repo.write("README.md", "app\nstaged line\n")
        self.repo.git("add", "README.md")
        self.repo.write("README.md", "app\nstaged line\nunstaged line\n")
        self.repo.write("notes.txt", "my notes\n")

    def state(self) -> tuple[str, str, str, str, list[str]]:
        """What bisect must leave as it found it: HEAD, branch, status, the files, stashes."""
        files = "".join(p.read_text() for p in sorted(self.repo.path.glob("*.*")) if p.is_file())
        return (self.repo.head(), self.repo.git("symbolic-ref", "-q", "HEAD"),
                self.repo.git("status", "--porcelain"), files,
                self.repo.git("stash", "list").splitlines())


def regression_at(k: int, total: int) -> list[str]:
    return ["94"] * (k - 1) + ["60"] * (total - k + 1)


def bisect(cli: Cli, history: History, *extra: str) -> subprocess.CompletedProcess[str]:
    """The benchmark runs in the checkout (it reads speed.txt there)."""
    return cli("bisect", "good", "bad", "--cmd", BENCH, "--metric", METRIC, "--repeat", "5",
               "--cwd", str(history.repo.path), *extra, timeout=180)
