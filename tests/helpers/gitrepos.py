"""Real git repositories for the git collector's tests: an upstream, clones, pulls, stashes.

Every repository is made by the real `git` binary with a fixed identity, fixed dates and a
private HOME, so runs are reproducible and the user's own git config never leaks in.
"""
from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Union

Content = Union[str, bytes]
PYNCCL = "python/sglang/srt/distributed/device_communicators/pynccl.py"
PARALLEL_STATE = "python/sglang/srt/distributed/parallel_state.py"
START_TIME = 1_760_000_000


def git_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(HOME=str(home), LC_ALL="C", GIT_CONFIG_NOSYSTEM="1",
               GIT_AUTHOR_NAME="Ada Tester", GIT_AUTHOR_EMAIL="ada@example.com",
               GIT_COMMITTER_NAME="Ada Tester", GIT_COMMITTER_EMAIL="ada@example.com")
    return env


class Repo:
    """A working tree driven through the git command line; each commit is one second later."""

    clock = START_TIME

    def __init__(self, path: Path, env: dict[str, str]) -> None:
        self.path = path
        self.env = env

    def git(self, *args: str | bytes) -> str:
        return self.git_bytes(*args).decode("utf-8", "replace").strip()

    def git_bytes(self, *args: str | bytes) -> bytes:
        Repo.clock += 1
        when = f"@{Repo.clock} +0000"
        env = dict(self.env, GIT_AUTHOR_DATE=when, GIT_COMMITTER_DATE=when)
        proc = subprocess.run(["git", *args], cwd=self.path, env=env, capture_output=True)
        if proc.returncode != 0:
            raise AssertionError(f"git {args!r} failed: {proc.stderr.decode()}")
        return proc.stdout

    def write(self, name: str | bytes, content: Content) -> Path:
        target = os.path.join(os.fsencode(self.path), os.fsencode(name))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as handle:
            handle.write(content.encode() if isinstance(content, str) else content)
        return Path(os.fsdecode(target))

    def commit(self, message: str, files: Mapping[str | bytes, Content] | None = None) -> str:
        for name, content in (files or {}).items():
            self.write(name, content)
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self.head()

    def commits(self, series: list[tuple[str, Mapping[str, str]]]) -> list[str]:
        """Commits on the current branch, as commit() would make them one by one (the files
        written, each one second later), in one `git fast-import`: three processes a commit
        made a pull of hundreds slow. Their shas, oldest first."""
        branch = self.git("symbolic-ref", "HEAD")
        stream, marks = [], self.path / ".git" / "envsnap-test-marks"
        for number, (message, files) in enumerate(series, 1):
            Repo.clock += 1
            who = f"{self.env['GIT_AUTHOR_NAME']} <{self.env['GIT_AUTHOR_EMAIL']}> " \
                  f"{Repo.clock} +0000"
            body = (message + "\n").encode()
            stream += [f"commit {branch}\nmark :{number}\nauthor {who}\ncommitter {who}\n"
                       .encode(), b"data %d\n" % len(body), body]
            if number == 1:
                stream.append(f"from {self.head()}\n".encode())
            for name, content in files.items():
                data = content.encode()
                stream += [f"M 100644 inline {name}\n".encode(), b"data %d\n" % len(data),
                           data, b"\n"]
        proc = subprocess.run(["git", "fast-import", "--quiet", f"--export-marks={marks}"],
                              cwd=self.path, env=self.env, input=b"".join(stream),
                              capture_output=True)
        if proc.returncode != 0:
            raise AssertionError(f"git fast-import failed: {proc.stderr.decode()}")
        self.git("reset", "-q", "--hard")   # the worktree and index at the new HEAD
        shas = dict(line.split() for line in marks.read_text().splitlines())
        marks.unlink()
        return [shas[f":{number}"] for number in range(1, len(series) + 1)]

    def head(self) -> str:
        return self.git("rev-parse", "HEAD")

    def shas(self, rev_range: str) -> Iterable[str]:
        return self.git("rev-list", rev_range).split()


def init(path: Path, env: dict[str, str], bare: bool = False) -> Repo:
    path.mkdir(parents=True)
    repo = Repo(path, env)
    repo.git("init", "-q", "-b", "main", *(["--bare"] if bare else []))
    return repo


def clone(source: Path, path: Path, env: dict[str, str], *options: str) -> Repo:
    Repo(source.parent, env).git("clone", "-q", *options, f"file://{source}", str(path))
    return Repo(path, env)


class Story:
    """docs/STORY.md in miniature: a clone at a good commit A, then a pull of nine commits."""

    def __init__(self, root: Path) -> None:
        self.env = git_env(root / "home")
        (root / "home").mkdir(parents=True)
        self.upstream = init(root / "upstream.git", self.env, bare=True).path
        self.dev = clone(self.upstream, root / "dev", self.env)
        self.good = self.dev.commit("Initial sglang", {
            PYNCCL: "def all_reduce(x):\n    return x\n", PARALLEL_STATE: "WORLD = 8\n",
            "python/sglang/srt/entrypoints/engine.py": "ENGINE = 1\n",
            "python/sglang/srt/managers/scheduler.py": "SCHED = 1\n", "README.md": "sglang\n"})
        self.dev.git("push", "-q", "origin", "main")
        self.checkout = clone(self.upstream, root / "sglang", self.env)

    def upstream_moves(self, count: int = 9) -> str:
        """Nine commits upstream; the fifth touches the NCCL all-reduce path."""
        for number in range(1, count + 1):
            if number == 5:
                self.dev.commit("Fix PCG MoE Error", {
                    PYNCCL: "def all_reduce(x):\n    return x * 1\n",
                    PARALLEL_STATE: "WORLD = 8\nGROUP = None\n"})
            else:
                self.dev.commit(f"Change {number}", {f"docs/change_{number}.md": f"{number}\n"})
        self.dev.git("push", "-q", "origin", "main")
        return self.dev.head()

    def pull(self) -> None:
        self.checkout.git("-c", "pull.rebase=false", "pull", "origin", "main")

    def big_pull_upstream(self, total: int = 121, hot: int = 13) -> list[str]:
        """`total` commits upstream; the `hot` oldest touch the NCCL path, so a window of the
        newest commits holds none of them. The hot shas, newest first."""
        shas = self.dev.commits([
            (f"NCCL tweak {number}", {PYNCCL: f"def all_reduce(x):\n    return x * {number}\n"})
            if number <= hot else
            (f"Change {number}", {f"docs/change_{number}.md": f"{number}\n"})
            for number in range(1, total + 1)])
        self.dev.git("push", "-q", "origin", "main")
        return shas[:hot][::-1]


# ---- shapes of real histories (issue 13) ------------------------------------------------------

def count(repo: Repo, rev_range: str) -> int:
    """What `git rev-list --count` says: the truth every count envsnap prints is checked on."""
    return int(repo.git("rev-list", "--count", rev_range))


def changed_files(repo: Repo, rev_range: str) -> list[str]:
    return repo.git("diff", "--name-only", rev_range).split("\n")


class ShallowMerge:
    """A depth-3 clone of main, then a pull at depth 3 of a merge whose 19-commit side branch
    forked below the clone's shallow edge: the fetch stops two commits into the side branch."""

    SIDE = 19

    def __init__(self, root: Path) -> None:
        self.env = git_env(root / "home")
        (root / "home").mkdir(parents=True)
        self.upstream = init(root / "upstream.git", self.env, bare=True).path
        self.dev = clone(self.upstream, root / "dev", self.env)
        self.dev.commit("base", {PYNCCL: "def all_reduce(x):\n    return x\n",
                                 "README.md": "sglang\n", "src/engine.py": "E = 0\n"})
        for number in range(1, 5):
            self.dev.commit(f"main {number}", {f"docs/main_{number}.md": f"{number}\n"})
        self.dev.git("checkout", "-q", "-b", "side", "HEAD~3")
        for number in range(1, self.SIDE + 1):
            # The commit the depth-3 fetch cuts at changes README.md and one source file only.
            files = {"README.md": "sglang, side\n", "src/engine.py": "E = 18\n"} \
                if number == self.SIDE - 1 else {f"docs/side_{number}.md": f"{number}\n"}
            self.dev.commit(f"side {number}", files)
        self.dev.git("checkout", "-q", "main")
        self.dev.git("push", "-q", "origin", "main")
        self.checkout = clone(self.upstream, root / "shallow", self.env, "--depth", "3")
        self.old = self.checkout.head()

    def merge_and_pull(self) -> str:
        self.dev.git("merge", "-q", "--no-ff", "side", "-m", "Merge side branch")
        self.dev.git("push", "-q", "origin", "main")
        self.checkout.git("-c", "pull.rebase=false", "pull", "-q", "--depth", "3",
                          "origin", "main")
        return self.checkout.head()
