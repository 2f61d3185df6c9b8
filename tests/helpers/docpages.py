"""The commands of README.md and docs/guide/*.md, found and run as a reader would run them.

The convention (docs/guide/README.md says it to writers):
- A ```console block is run. Each line `$ envsnap ...` or `$ git ...` is a command (a line
  ending in `\\` goes on). The lines under it, up to the next `$`, are its output.
- A command exits 0, or the code its trailing comment names: `$ envsnap diff a b   # exit 1`.
- Each output line shown must appear in what the command printed (stdout or stderr), spaces
  and line breaks aside. `…` stands for text that differs from machine to machine.
- `NAME=value` words before the command set its environment, as in a shell.
- A block whose first line is `# file: NAME` is written to NAME before the page's commands.
- A ```console block whose first line is `# offline` runs its commands where no name lookup
  leaves the machine (helpers/offline.py): for a name that must not resolve.
- Blocks in any other language (```sh, ```yaml) are read, never run: keep them few.

The sandbox is a reader's machine in miniature: a HOME of its own that is also the login
home of a real sshd on loopback (the aliases gpu-box, node01 and node02 in ~/.ssh/config),
the example snapshots in ./snapshots/examples and the playbooks in ./playbooks, a git
checkout ~/sglang with nine commits waiting upstream (one on the NCCL path, as in
docs/STORY.md), and ~/app, whose benchmark slows at one commit after the tag v1.
"""
from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from conftest import ROOT, Cli

from helpers.gitrepos import PARALLEL_STATE, PYNCCL
from helpers.offline import run_offline
from helpers.sshd import Sshd

GUIDE = ROOT / "docs" / "guide"
FENCE = re.compile(r"^```(\S*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
EXIT = re.compile(r"\s+#\s*exit\s+(\d+)\s*$")
ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=")
FILE = re.compile(r"^# file: (\S+)\n")
OFFLINE = re.compile(r"^# offline\b.*\n")
ALIASES = {"gpu-box": "127.0.0.2", "node01": "127.0.0.3", "node02": "127.0.0.4"}
BENCH_PY = ('import pathlib, random\n'
            'speed = float(pathlib.Path("speed.txt").read_text())\n'
            'print(f"gen throughput (token/s): {speed * random.uniform(0.99, 1.01):.2f}")\n')


def pages() -> list[Path]:
    """README.md, the guide's index, then its pages in the order the index links them (a
    later page may use what an earlier one made), then any page the index does not link."""
    linked = re.findall(r"\]\(([a-z-]+\.md)\)", (GUIDE / "README.md").read_text())
    ordered = [GUIDE / name for name in dict.fromkeys(linked)]
    rest = sorted(set(GUIDE.glob("*.md")) - set(ordered) - {GUIDE / "README.md"})
    return [ROOT / "README.md", GUIDE / "README.md", *ordered, *rest]


@dataclass(frozen=True)
class Command:
    page: str
    line: int           # where the command starts on its page, for the failure message
    argv: list[str]
    env: dict[str, str]  # NAME=value words before the command, as the shell reads them
    exit_code: int
    shown: list[str]    # the output lines the page shows under it
    offline: bool = False   # run where no name lookup leaves the machine


@dataclass(frozen=True)
class Page:
    name: str
    files: dict[str, str]
    commands: list[Command]


def read_page(path: Path) -> Page:
    text = path.read_text()
    name = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
    files: dict[str, str] = {}
    commands: list[Command] = []
    for block in FENCE.finditer(text):
        language, body = block.group(1), block.group(2)
        first_line = text.count("\n", 0, block.start(2)) + 1
        named, offline = FILE.match(body), OFFLINE.match(body)
        if named:
            files[named.group(1)] = body[named.end():]
        elif language == "console" and offline:
            commands += parse_console(name, first_line + 1, body[offline.end():], offline=True)
        elif language == "console":
            commands += parse_console(name, first_line, body)
    return Page(name, files, commands)


def parse_console(page: str, first_line: int, body: str,
                  offline: bool = False) -> list[Command]:
    commands: list[Command] = []
    lines = body.splitlines()
    index = 0
    while index < len(lines):
        if not lines[index].startswith("$ "):
            raise ValueError(f"{page}:{first_line + index}: output before any `$ ` command")
        start = index
        command = lines[index][2:]
        while command.endswith("\\"):
            index += 1
            command = command[:-1] + " " + lines[index].strip()
        index += 1
        shown = []
        while index < len(lines) and not lines[index].startswith("$ "):
            if lines[index].strip() not in ("", "…"):
                shown.append(lines[index])
            index += 1
        wanted = EXIT.search(command)
        words = shlex.split(command, comments=True)
        env = dict(word.split("=", 1) for word in words if ASSIGNMENT.match(word))
        argv = words[len(env):]
        runs = ("envsnap",) if offline else ("envsnap", "git")
        if not argv or argv[0] not in runs:
            raise ValueError(f"{page}:{first_line + start}: only {' and '.join(runs)} run here")
        commands.append(Command(page, first_line + start, argv, env,
                                int(wanted.group(1)) if wanted else 0, shown, offline))
    return commands


def pattern(line: str) -> re.Pattern[str]:
    """One shown line as a regex over the printed text with its whitespace runs as one space."""
    parts = [re.escape(part) for part in " ".join(line.split()).split("…")]
    return re.compile(".*?".join(parts).replace(r"\ ", " "))


def missing_lines(command: Command, printed: str, home: Path) -> list[str]:
    """The shown lines not in `printed`, where the sandbox's HOME is shown as `~`."""
    flat = " ".join(printed.replace(str(home), "~").split())
    return [line for line in command.shown if not pattern(line).search(flat)]


@dataclass
class Sandbox:
    home: Path
    env: dict[str, str]

    def expand(self, argv: list[str]) -> list[str]:
        """What the shell does to the words before envsnap sees them: `~/` is HOME."""
        return [str(self.home) + word[1:] if word == "~" or word.startswith("~/") else word
                for word in argv]

    def run(self, command: Command) -> subprocess.CompletedProcess[str]:
        argv = self.expand(command.argv)
        env = {**self.env, **command.env}
        if command.offline:   # a subprocess in namespaces of its own (offline_available)
            return run_offline(argv[1:], env, self.home)
        if argv[0] == "envsnap":
            return Cli(env=env, cwd=self.home)(*argv[1:], timeout=120)
        return subprocess.run(argv, cwd=self.home, env=env, capture_output=True,
                              text=True, timeout=60)

    def write(self, files: dict[str, str]) -> None:
        for name, content in files.items():
            (self.home / name).write_text(content)


def make_sandbox(root: Path, sshd: Sshd) -> Sandbox:
    home = sshd.host_home   # the login home over SSH too: ~/sglang is one path on both sides
    env = sshd.write_home(home)
    config = home / ".ssh" / "config"
    aliases = "".join(f"Host {name}\n  HostName {address}\n" for name, address in ALIASES.items())
    config.write_text(aliases + config.read_text())
    env.update(GIT_CONFIG_NOSYSTEM="1", PYTHONPATH=str(ROOT), LC_ALL="C.UTF-8")
    for name in ("ENVSNAP_STORE", "ENVSNAP_INVENTORY"):
        env.pop(name, None)
    shutil.copytree(ROOT / "snapshots" / "examples", home / "snapshots" / "examples",
                    ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    shutil.copytree(ROOT / "playbooks", home / "playbooks",
                    ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    git = dict(env, GIT_AUTHOR_NAME="Ada Tester", GIT_AUTHOR_EMAIL="ada@example.com",
               GIT_COMMITTER_NAME="Ada Tester", GIT_COMMITTER_EMAIL="ada@example.com")
    make_sglang(root, home, git)
    make_app(home, git)
    return Sandbox(home, env)


class Git:
    """git in one folder with fixed dates, a second apart: the same commits make the same
    shas on every machine, so a page can show them."""

    def __init__(self, path: Path, env: dict[str, str]) -> None:
        self.path, self.env, self.clock = path, env, 1_765_000_000

    def __call__(self, *args: str) -> None:
        self.clock += 1
        when = f"@{self.clock} +0000"
        subprocess.run(["git", *args], cwd=self.path, check=True, capture_output=True,
                       env=dict(self.env, GIT_AUTHOR_DATE=when, GIT_COMMITTER_DATE=when))

    def commit(self, message: str, files: dict[str, str]) -> None:
        for name, content in files.items():
            (self.path / name).parent.mkdir(parents=True, exist_ok=True)
            (self.path / name).write_text(content)
        self("add", "-A")
        self("commit", "-q", "-m", message)


def make_sglang(root: Path, home: Path, env: dict[str, str]) -> None:
    """~/sglang at its first commit; nine commits upstream wait for a `git pull`."""
    upstream, dev = root / "upstream.git", root / "dev"
    upstream.mkdir()
    git = Git(root, env)
    git("init", "-q", "--bare", "-b", "main", str(upstream))
    git("clone", "-q", f"file://{upstream}", str(dev))
    git = Git(dev, env)
    git.commit("Initial sglang", {PYNCCL: "def all_reduce(x):\n    return x\n",
                                  PARALLEL_STATE: "WORLD = 8\n",
                                  "python/sglang/srt/managers/scheduler.py": "SCHED = 1\n",
                                  "README.md": "sglang\n"})
    git("push", "-q", "origin", "main")
    git("clone", "-q", f"file://{upstream}", str(home / "sglang"))
    for number in range(1, 10):
        if number == 5:
            git.commit("Fix PCG MoE Error", {PYNCCL: "def all_reduce(x):\n    return x * 1\n",
                                             PARALLEL_STATE: "WORLD = 8\nGROUP = None\n"})
        else:
            git.commit(f"Change {number}", {f"docs/change_{number}.md": f"{number}\n"})
    git("push", "-q", "origin", "main")


def make_app(home: Path, env: dict[str, str]) -> None:
    """~/app: bench.py prints speed.txt's number; tag v1 is fast, the fourth commit after
    it slows the benchmark from 94 to 60 token/s."""
    (home / "app").mkdir()
    git = Git(home / "app", env)
    git("init", "-q", "-b", "main")
    git.commit("Initial", {"bench.py": BENCH_PY, "speed.txt": "94\n"})
    git("tag", "v1")
    for number in range(1, 7):
        slow = number == 4
        git.commit("Slow down the all-reduce" if slow else f"Change {number}",
                   {f"src/module_{number}.py": f"N = {number}\n",
                    **({"speed.txt": "60\n"} if slow else {})})
