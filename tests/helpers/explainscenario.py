"""Randomized regressions built for real, for explain's and bisect's scenario tests
(tests/e2e/test_scenarios_for_real.py).

`draw(seed)` picks a scenario; `build(scenario, root, cli, env)` makes it on this machine: a
bare origin and a clone of it (the user's checkout), a benchmark whose metric comes from the
real state, a venv of its own with startup .pth files (and a package when drawn), GOOD
recorded with `envsnap bench`, commits pushed upstream and pulled, the env, .pth files and
package moved, BAD recorded, and the user's own work left in the checkout (an untracked notes
file, a stash, sometimes an unstaged edit).

Where the slowdown lives, and how the benchmark sees it (bench.py, outside the checkout, run
there with the venv's python; it imports the checkout's speed.py, which imports each module
of kernels/: bytecode is written into the checkout, as for every user):
- commits: a slow pulled commit adds a kernel module whose FACTOR is below one; a harmless
  one a kernel of FACTOR one or a note under docs/; the commit of an interaction a flag.
- env: a variable named NCCL_SCN_<seed>_<i> (a prefix the env collector records), slow at
  BAD's value (added, removed or changed); harmless ones change and are never read.
- .pth: a startup line (`import os; os.environ[...]`) added since GOOD, or dropped since.
- package (drawn only where asked): scnpkg<seed> upgraded, slow when its SLOW is true;
  explain searches it with --pip, from a folder of wheels made here.
- an interaction: two differences, each harmless alone, slow together.
The benchmark writes results.json into the checkout at every run.

Noise and drift are the benchmark's own: a seeded RNG per run gives noise uniform within
+/- noise; a run counter in a file outside the checkout gives drift, compounding by `drift`
every REPEAT runs (one invocation of explain or bisect). Every run is reproducible.

What the noise can resolve (`Scenario.resolvable`): a cause whose size (the share of GOOD's
metric it takes alone; of an interaction, the two together) is at least the largest of
RESOLVABLE_FLOOR, NOISE_TIMES x noise and DRIFT_TIMES x |drift per invocation|. Smaller
causes may be named or not; none may ever be called "no effect" unless measured so.
"""
from __future__ import annotations

import base64
import hashlib
import json
import math
import random
import subprocess
import sys
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from helpers.gitrepos import Repo, clone, git_env, init

Kind = Literal["commits", "env", "pth", "package", "patch"]
Change = Literal["added", "removed", "changed"]
METRIC = r"throughput: ([0-9.]+) tok/s"
BASE = 100.0
REPEAT = 3
# What the noise can resolve (Scenario.threshold). Below a tenth, three runs a state cannot
# size a cause even at the lowest noise drawn; at four times the noise the extreme runs of
# two states cannot overlap; at two and a half times the drift of an invocation, a trial
# measured an invocation or two from the endpoint it is judged against still shows more
# than the drift moved it.
RESOLVABLE_FLOOR = 0.10
NOISE_TIMES = 4.0
DRIFT_TIMES = 2.5
# What explain and bisect may leave in the checkout: the benchmark's own files.
WRITTEN_BY_BENCHMARK = ("results.json", "__pycache__")


@dataclass(frozen=True)
class Factor:
    """One difference between GOOD and BAD, as explain will see it. `size`: the share of
    the metric it takes alone (none: harmless alone)."""

    kind: Kind
    name: str            # the variable, the .pth file's stem, the package; "commits", "patch"
    size: float
    change: Change = "changed"

    @property
    def flag(self) -> str:
        return f"{self.kind}:{self.name}"


@dataclass(frozen=True)
class SlowCommit:
    position: int        # 0-based among the pulled commits
    size: float


@dataclass(frozen=True)
class Interaction:
    first: str           # Factor.flag of each part
    second: str
    size: float          # the share the two take together
    position: int = -1   # where a part is "commits": the pulled commit that reads the other


@dataclass(frozen=True)
class Scenario:
    seed: int
    pulled: int                          # commits in the pull
    slow_commits: tuple[SlowCommit, ...]
    factors: tuple[Factor, ...]          # every difference, the commit range included
    interaction: Interaction | None
    noise: float                         # half-width of the uniform noise of one run
    drift: float                         # per invocation (REPEAT runs), compounding

    @property
    def threshold(self) -> float:
        """The smallest size the noise and drift can resolve (module docstring)."""
        return max(RESOLVABLE_FLOOR, NOISE_TIMES * self.noise, DRIFT_TIMES * abs(self.drift))

    def resolvable(self, size: float) -> bool:
        return size >= self.threshold

    def causes(self) -> list[Factor]:
        """The differences that alone slow it."""
        return [factor for factor in self.factors if factor.size > 0]

    def harmless(self) -> list[Factor]:
        """The differences that slow nothing, alone or with another."""
        parts = {self.interaction.first, self.interaction.second} if self.interaction else set()
        return [f for f in self.factors if f.size == 0 and f.flag not in parts]

    def total(self) -> float:
        """The share of GOOD's metric all the causes take together."""
        kept = math.prod(1 - factor.size for factor in self.factors)
        if self.interaction is not None:
            kept *= 1 - self.interaction.size
        return 1 - kept

    def env(self, state: Literal["good", "bad"]) -> dict[str, str | None]:
        """The scenario's variables at GOOD or BAD (None: unset)."""
        values: dict[str, str | None] = {}
        for factor in self.factors:
            if factor.kind == "env":
                values[factor.name] = env_value(factor.change, state)
        return values


def env_value(change: Change, state: str) -> str | None:
    good, bad = {"added": (None, "1"), "removed": ("LL", None), "changed": ("Ring", "Tree")}[
        change]
    return good if state == "good" else bad


def env_name(seed: int, index: int) -> str:
    return f"NCCL_SCN_{seed % 97}_{index}"


def pth_var(seed: int, name: str) -> str:
    """The variable a .pth line sets: a name no env collector records (not a difference)."""
    return f"SCNPTH_{seed}_{name.upper()}"


def package_name(seed: int) -> str:
    return f"scnpkg{seed}"


def draw(seed: int, packages: bool = True) -> Scenario:
    """A scenario from its seed alone: one to four causes of a twentieth to four fifths of
    the metric each, among commits, env variables, .pth startup lines and (with `packages`)
    a package, sometimes an interacting pair among them; harmless differences beside them;
    noise and drift within the issue's bounds (NOISE, DRIFT)."""
    rng = random.Random(seed)
    noise, drift = draw_noise(rng)
    pulled = rng.randint(2, 6)
    causes = rng.randint(1, 4)
    interacting = rng.random() < 0.3
    solo = causes - 1 if interacting else causes
    kinds: list[Kind] = []
    pool: list[Kind] = ["commits", "commits", "env", "env", "env", "pth", "pth"]
    if packages:
        pool.append("package")
    for _ in range(solo):
        kind = rng.choice(pool)
        kinds.append(kind)
        if kind in ("commits", "package"):
            pool = [k for k in pool if k != kind]
    sizes = draw_sizes(rng, solo + (1 if interacting else 0))
    factors: list[Factor] = []
    slow: list[SlowCommit] = []
    env_index = 0
    pth_index = 0

    def next_env(size: float) -> Factor:
        nonlocal env_index
        factor = Factor("env", env_name(seed, env_index), size,
                        rng.choice(["added", "removed", "changed"]))
        env_index += 1
        return factor

    def next_pth(size: float) -> Factor:
        nonlocal pth_index
        factor = Factor("pth", f"scn_{pth_index}", size, rng.choice(["added", "removed"]))
        pth_index += 1
        return factor

    commits_size = 0.0
    for kind, size in zip(kinds, sizes):
        if kind == "commits":
            count = 2 if pulled >= 3 and rng.random() < 0.4 else 1
            shares = [size] if count == 1 else split(rng, size)
            positions = sorted(rng.sample(range(pulled), count))
            slow = [SlowCommit(p, s) for p, s in zip(positions, shares)]
            commits_size = size
        elif kind == "env":
            factors.append(next_env(size))
        elif kind == "pth":
            factors.append(next_pth(size))
        else:
            factors.append(Factor("package", package_name(seed), size, "changed"))
    interaction = None
    if interacting:
        parts: list[Kind] = ["commits", "env", "pth"] if commits_size == 0 else \
            ["env", "pth", "env"]
        parts_made = []
        for part in rng.sample(parts, 2):
            if part == "commits":
                parts_made.append("commits:commits")
            elif part == "env":
                made = next_env(0.0)
                factors.append(made)
                parts_made.append(made.flag)
            else:
                made = next_pth(0.0)
                factors.append(made)
                parts_made.append(made.flag)
        taken = {s.position for s in slow}
        free = [p for p in range(pulled) if p not in taken]
        interaction = Interaction(parts_made[0], parts_made[1], sizes[-1],
                                  rng.choice(free) if "commits:commits" in parts_made else -1)
    # harmless differences: always an env variable; sometimes a .pth line, an edit, a package
    factors.append(next_env(0.0))
    if rng.random() < 0.4:
        factors.append(next_pth(0.0))
    if packages and rng.random() < 0.15 and not any(f.kind == "package" for f in factors):
        factors.append(Factor("package", package_name(seed), 0.0))
    if rng.random() < 0.4:
        factors.append(Factor("patch", "patch", 0.0, "added"))
    factors.insert(0, Factor("commits", "commits", commits_size))
    return Scenario(seed, pulled, tuple(slow), tuple(factors), interaction, noise, drift)


# Noise of one to five percent a run; drift of up to four percent an invocation, either way,
# and none in a quarter of the scenarios.
NOISE = (0.01, 0.05)
DRIFT = 0.04


def draw_noise(rng: random.Random) -> tuple[float, float]:
    noise = round(rng.uniform(*NOISE), 3)
    drift = 0.0 if rng.random() < 0.25 else round(rng.uniform(-DRIFT, DRIFT), 3)
    return noise, drift


def draw_bisect(seed: int) -> Scenario:
    """A pull for bisect: one or two slow commits among harmless ones (a kernel refactored,
    a note), with noise and drift drawn as for explain."""
    rng = random.Random(seed)
    noise, drift = draw_noise(rng)
    pulled = rng.randint(4, 12)
    count = 1 if rng.random() < 0.6 else 2
    while True:
        sizes = [round(rng.uniform(0.10, 0.80), 3) for _ in range(count)]
        if math.prod(1 - s for s in sizes) >= 0.15:
            break
    positions = sorted(rng.sample(range(pulled), count))
    slow = tuple(SlowCommit(p, s) for p, s in zip(positions, sizes))
    total = 1 - math.prod(1 - s for s in sizes)
    return Scenario(seed, pulled, slow, (Factor("commits", "commits", total),), None, noise,
                    drift)


def draw_sizes(rng: random.Random, count: int) -> list[float]:
    """Sizes whose product leaves a fair share of the metric (no metric near zero)."""
    while True:
        sizes = [round(rng.uniform(0.05, 0.80), 3) for _ in range(count)]
        if math.prod(1 - s for s in sizes) >= 0.15:
            return sizes


def split(rng: random.Random, size: float) -> list[float]:
    """Two slow commits that together take `size`: each takes a share of its log."""
    share = rng.uniform(0.3, 0.7)
    kept = math.log(1 - size)
    return [round(1 - math.exp(kept * share), 4), round(1 - math.exp(kept * (1 - share)), 4)]


# ---- built for real -----------------------------------------------------------------------

SPEED = '''\
"""The checkout's speed: every kernel module's FACTOR, multiplied; their FLAGS, gathered."""
import importlib
import pathlib


def kernels():
    factor, flags = 1.0, set()
    for path in sorted(pathlib.Path(__file__).with_name("kernels").glob("k*.py")):
        module = importlib.import_module("kernels." + path.stem)
        factor *= getattr(module, "FACTOR", 1.0)
        flags.update(getattr(module, "FLAGS", ()))
    return factor, flags
'''

BENCH = '''\
"""The scenario's benchmark: its speed from the checkout it runs in (speed.py, kernels/), the
env, the .pth lines that ran at this python's start and the package installed; noise from a
seeded RNG; drift from the run counter outside the checkout."""
import importlib
import json
import os
import pathlib
import random
import sys

CONFIG = json.loads(pathlib.Path(__file__).with_name("scenario.json").read_text())
sys.path.insert(0, os.getcwd())
import speed  # noqa: E402  (the checkout's, its bytecode written there)

counter = pathlib.Path(CONFIG["counter"])
run = int(counter.read_text()) if counter.exists() else 0
counter.write_text(str(run + 1))
factor, flags = speed.kernels()
for flag, (name, slow_when) in CONFIG["variables"].items():
    if os.environ.get(name) == slow_when:
        flags.add(flag)
package = CONFIG["package"]
if package:
    try:
        if importlib.import_module(package).SLOW:
            flags.add("package:" + package)
    except ImportError:
        pass
for flag, kept in CONFIG["solo"].items():
    if flag in flags:
        factor *= kept
for first, second, kept in CONFIG["together"]:
    if first in flags and second in flags:
        factor *= kept
rng = random.Random(CONFIG["seed"] * 1000003 + run)
value = (CONFIG["base"] * factor * (1 + CONFIG["drift"]) ** (run / CONFIG["repeat"])
         * (1 + rng.uniform(-CONFIG["noise"], CONFIG["noise"])))
print("throughput: %.3f tok/s" % value)
pathlib.Path("results.json").write_text(json.dumps({"throughput": value, "run": run}) + "\\n")
'''

@dataclass(frozen=True)
class Built:
    """A scenario made on this machine."""

    scenario: Scenario
    root: Path
    checkout: Repo
    python: str                        # the venv's
    site: Path                         # its site-packages
    good_head: str
    pulled: tuple[str, ...]            # the pulled commits' shas, oldest first
    env: dict[str, str]                # the env now (BAD's), for explain
    cmd: str
    wheels: Path | None                # with a package: the wheels --pip pins from

    def describe(self, factor: Factor) -> str:
        """What explain's output calls the difference (Difference.describe()'s words), or
        the part of it that names it alone."""
        if factor.kind == "commits":
            return f"{self.checkout.path}: {plural(self.scenario.pulled, 'commit')} "
        if factor.kind == "patch":
            return f"{self.checkout.path}: the uncommitted patch"
        if factor.kind == "env":
            return f"{factor.name}="
        if factor.kind == "pth":
            return f"startup lines of {self.site / (factor.name + '.pth')} ("
        return f"package {factor.name} "

    def by_flag(self, flag: str) -> Factor:
        return next(f for f in self.scenario.factors if f.flag == flag)

    def explain_args(self) -> list[str]:
        package = any(f.kind == "package" for f in self.scenario.factors)
        return ["--cmd", self.cmd, "--metric", METRIC, "--repeat", str(REPEAT),
                "--cwd", str(self.checkout.path), *(["--pip"] if package else [])]


def plural(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")


def build(scenario: Scenario, root: Path, cli: Callable[..., subprocess.CompletedProcess[str]],
          base_env: Mapping[str, str]) -> Built:
    """Make `scenario` under `root`; `cli(env, *args)` runs envsnap with that env. GOOD and
    BAD recorded as `good` and `bad`; the checkout left with the user's work in it."""
    home = root / "githome"
    home.mkdir(parents=True)
    genv = git_env(home)
    origin = init(root / "origin.git", genv, bare=True)
    dev = clone(origin.path, root / "dev", genv)
    dev.commit("Initial", {"speed.py": SPEED, "kernels/__init__.py": "",
                           "kernels/k00_base.py": "FACTOR = 1.0\n", "README.md": "scenario\n"})
    dev.git("push", "-q", "origin", "main")
    checkout = clone(origin.path, root / "checkout", genv)
    checkout.write("notes.txt", "my own notes: try a bigger batch\n")   # untracked, mine
    python, site = venv(root / "venv")
    wheels = make_wheels(root / "wheels", scenario) if any(
        f.kind == "package" for f in scenario.factors) else None
    offline = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels),
               "PIP_DISABLE_PIP_VERSION_CHECK": "1"} if wheels else {}
    env = {k: v for k, v in base_env.items() if k != "PYTHONDONTWRITEBYTECODE"
           and not k.startswith("NCCL_SCN_")}
    env.update(offline)
    (root / "scenario.json").write_text(json.dumps(bench_config(scenario, root)))
    (root / "bench.py").write_text(BENCH)
    cmd = f"{python} {root / 'bench.py'}"
    put_python(scenario, site, python, "good", env)
    record(cli, with_state(env, scenario, "good"), "good", checkout, python, cmd)
    checkout.write("README.md", "scenario\nmy stashed edit\n")
    checkout.git("stash", "push", "-q", "-m", "my own stash")
    (good_head, _), shas = push_pull(scenario, dev, checkout)
    put_python(scenario, site, python, "bad", env)
    if any(f.kind == "patch" for f in scenario.factors):
        checkout.write("README.md", "scenario\nmy unstaged edit\n")
    bad_env = with_state(env, scenario, "bad")
    record(cli, bad_env, "bad", checkout, python, cmd)
    return Built(scenario, root, checkout, python, site, good_head, tuple(shas), bad_env, cmd,
                 wheels)


def with_state(env: Mapping[str, str], scenario: Scenario, state: Literal["good", "bad"]
               ) -> dict[str, str]:
    made = dict(env)
    for name, value in scenario.env(state).items():
        if value is None:
            made.pop(name, None)
        else:
            made[name] = value
    return made


def bench_config(scenario: Scenario, root: Path) -> dict[str, object]:
    """What bench.py reads: which state of each variable slows it, and by how much."""
    variables: dict[str, tuple[str, str | None]] = {}
    solo: dict[str, float] = {}
    package = ""
    for factor in scenario.factors:
        if factor.kind == "env":
            variables[factor.flag] = (factor.name, env_value(factor.change, "bad"))
        elif factor.kind == "pth":
            variables[factor.flag] = (pth_var(scenario.seed, factor.name),
                                      "1" if factor.change == "added" else None)
        elif factor.kind == "package":
            package = factor.name
        if factor.size > 0 and factor.kind != "commits":
            solo[factor.flag] = 1 - factor.size
    together = []
    if scenario.interaction is not None:
        together.append([scenario.interaction.first, scenario.interaction.second,
                         1 - scenario.interaction.size])
    return {"seed": scenario.seed, "base": BASE, "noise": scenario.noise,
            "drift": scenario.drift, "repeat": REPEAT, "counter": str(root / "runs.count"),
            "variables": variables, "package": package, "solo": solo, "together": together}


def venv(folder: Path) -> tuple[str, Path]:
    """A venv of its own (quick: no pip of its own; the system's is seen through
    --system-site-packages for --pip): its python and site-packages."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages",
                    str(folder)], check=True)
    python = str(folder / "bin" / "python")
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path("
                                "'purelib'))"], capture_output=True, text=True,
                               check=True).stdout.strip())
    return python, site


def put_python(scenario: Scenario, site: Path, python: str, state: str,
               env: Mapping[str, str]) -> None:
    """The .pth files and the package as they are at GOOD or BAD."""
    for factor in scenario.factors:
        if factor.kind == "pth":
            line = f"import os; os.environ['{pth_var(scenario.seed, factor.name)}'] = '1'\n"
            present = (factor.change == "added") == (state == "bad")
            (site / f"{factor.name}.pth").write_text(
                f"# {factor.name}: tuning\n" + (line if present else ""))
        elif factor.kind == "package":
            version = "1.0" if state == "good" else "2.0"
            subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps",
                            f"{factor.name}=={version}"], env=dict(env), check=True,
                           capture_output=True)


def make_wheels(folder: Path, scenario: Scenario) -> Path:
    """Both versions of the scenario's package, wheels made by hand (a zip with a RECORD);
    the newer one is slow when the package is a cause."""
    factor = next(f for f in scenario.factors if f.kind == "package")
    for version, slow in (("1.0", False), ("2.0", factor.size > 0)):
        wheel(folder, factor.name, version, f"SLOW = {slow}\n")
    return folder


def wheel(folder: Path, name: str, version: str, code: str) -> None:
    info = f"{name}-{version}.dist-info"
    files = {f"{name}.py": code,
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\n"
                              "Tag: py3-none-any\n"}
    record_lines = [f"{path},sha256={digest(text)},{len(text.encode())}"
                    for path, text in files.items()]
    files[f"{info}/RECORD"] = "\n".join([*record_lines, f"{info}/RECORD,,"]) + "\n"
    folder.mkdir(exist_ok=True)
    with zipfile.ZipFile(folder / f"{name}-{version}-py3-none-any.whl", "w") as made:
        for path, text in files.items():
            made.writestr(path, text)


def digest(text: str) -> str:
    """A wheel RECORD's digest: urlsafe base64 of the sha256, unpadded."""
    return base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).decode().rstrip("=")


def kernel(scenario: Scenario, position: int) -> tuple[str, dict[str | bytes, str | bytes]]:
    """The pulled commit at `position` (counted from the oldest): its subject and files."""
    number = f"k{position + 1:02d}"
    for slow in scenario.slow_commits:
        if slow.position == position:
            return (f"Fuse the {number} kernel",
                    {f"kernels/{number}.py": f"FACTOR = {1 - slow.size!r}\n"})
    if scenario.interaction is not None and scenario.interaction.position == position:
        return (f"Pick the {number} algorithm from the env",
                {f"kernels/{number}.py": "FLAGS = ('commits:commits',)\n"})
    if position % 2 == 0:
        return (f"Refactor the {number} kernel",
                {f"kernels/{number}.py": "FACTOR = 1.0\n"})
    return (f"Docs: note {position + 1}", {f"docs/note_{position + 1}.md": "a note\n"})


def push_pull(scenario: Scenario, dev: Repo, checkout: Repo
              ) -> tuple[tuple[str, str], list[str]]:
    """The pulled commits made upstream, pushed, pulled into the checkout: (GOOD's HEAD,
    the checkout's new HEAD), and the pulled shas oldest first."""
    good = checkout.head()
    shas = [dev.commit(*kernel(scenario, position)) for position in range(scenario.pulled)]
    dev.git("push", "-q", "origin", "main")
    checkout.git("-c", "pull.rebase=false", "pull", "-q", "--ff-only", "origin", "main")
    return (good, checkout.head()), shas


def record(cli: Callable[..., subprocess.CompletedProcess[str]], env: dict[str, str],
           label: str, checkout: Repo, python: str, cmd: str) -> None:
    """A snapshot of the host with one run of the benchmark, as a user takes it."""
    result = cli(env, "bench", "local", "--label", label, "--repo", str(checkout.path),
                 "--python", python, "--cwd", str(checkout.path), "--cmd", cmd,
                 "--metric", METRIC, "--repeat", "1", "--sample-interval", "0")
    if result.returncode != 0:
        raise AssertionError(f"bench {label}: {result.stdout}{result.stderr}")


def fingerprint(checkout: Repo) -> dict[str, str]:
    """What explain and bisect must leave as they found it: HEAD, branch, index, status,
    stash list, and each worktree file's content, but for what the benchmark itself writes
    (WRITTEN_BY_BENCHMARK: it may be there, rewritten, or not)."""
    def ours(path: str) -> bool:
        return not any(part in WRITTEN_BY_BENCHMARK for part in Path(path).parts)

    files = {}
    for path in sorted(checkout.path.rglob("*")):
        relative = path.relative_to(checkout.path)
        if relative.parts[0] == ".git" or not path.is_file() or not ours(str(relative)):
            continue
        files[str(relative)] = hashlib.sha256(path.read_bytes()).hexdigest()
    status = [line for line in checkout.git("status", "--porcelain", "--ignored",
                                            "--untracked-files=all").splitlines()
              if ours(line[3:])]
    return {"HEAD": checkout.head(), "branch": checkout.git("symbolic-ref", "-q", "HEAD"),
            "index": checkout.git("ls-files", "--stage"), "status": "\n".join(status),
            "stash": checkout.git("stash", "list", "--format=%H %gs"),
            "files": json.dumps(files, sort_keys=True)}


def python_state(built: Built) -> dict[str, str]:
    """The venv's .pth files and the scenario's package version: put back as found."""
    state = {path.name: path.read_text() for path in sorted(built.site.glob("*.pth"))}
    for factor in built.scenario.factors:
        if factor.kind == "package":
            state["package"] = subprocess.run(
                [built.python, "-c", f"import importlib.metadata as m; print(m.version("
                 f"'{factor.name}'))"], capture_output=True, text=True).stdout.strip()
    return state
