"""`envsnap demo`: the STORY, live, in a temp folder on this machine (no SSH, no GPU).

A "sglang" checkout with an upstream, a benchmark whose speed depends on the checked-out
code, a venv with a sitecustomize that sets the NCCL env, and a worker process started with
that env. The engineer's good state is benchmarked; a silent `git pull` brings nine commits,
one of which slows the NCCL path, and the worker is restarted without NCCL_PROTO; the bad
state is benchmarked (all the while `envsnap watch` keeps the host's history, so the
timeline knows the env the restarted worker lost); diff shows the suspects, explain tries
each and names the pull, then restore with a rerun and bisect undo it and find the commit.
Each step is a real `envsnap` command line, so what the demo prints is what a user would see
(only the rollback hint is reworded: see runnable_here). Nothing here prints:
envsnap/cli/demo.py does.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
import venv
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from envsnap.errors import ExitCode
from envsnap.history.store import History
from envsnap.snapshot.store import Store

PYNCCL = "python/sglang/srt/distributed/device_communicators/pynccl.py"
PARALLEL_STATE = "python/sglang/srt/distributed/parallel_state.py"
ENGINE = "python/sglang/srt/entrypoints/engine.py"
NCCL_ENV = {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "NCCL_P2P_LEVEL": "SYS",
            "NCCL_MAX_NCHANNELS": "16"}
# The variable the worker loses when it is restarted beside the pull: the second suspect,
# which diff ranks high and explain clears by experiment (the benchmark does not read it).
DROPPED_VARIABLE = "NCCL_PROTO"
METRIC = r"gen throughput \(token/s\): ([0-9.]+)"
WORKER_TAG = "envsnap-demo-sglang-worker"
# The incident in two sentences, for a reader who has not seen it (docs/STORY.md tells it).
INTRODUCTION = (
    "The STORY (docs/STORY.md): a GPU host served a large model with SGLang at 94 tok/s,\n"
    "using EAGLE-3 speculative decoding (a small draft model guesses tokens, the large model\n"
    "verifies them in one pass: ~19 ms per cycle). A day later, 'nothing changed', yet verify\n"
    "took ~29 ms and speed fell to about 60 tok/s: a silent `git pull` had brought an NCCL\n"
    "change.")
ROLLBACK_HINT = re.compile(r"^rollback point: envsnap restore (\S+)$", re.MULTILINE)

# The verify step dominates a speculative-decoding cycle (docs/STORY.md): ~19 ms when good,
# ~29 ms after the pull. The benchmark turns the checked-out code's verify time into tok/s.
BENCH_ONE = '''\
import os, random, runpy, sys
code = runpy.run_path(os.path.join(sys.argv[1], "PYNCCL"))
verify_ms, draft_ms, accepted = code["VERIFY_MS"], 2.3, 2.0
speed = 1000.0 * accepted / (verify_ms + draft_ms) * random.uniform(0.985, 1.015)
print("EAGLE-3 2-step, verify %.1f ms" % verify_ms)
print("gen throughput (token/s): %.2f" % speed)
'''
SITECUSTOMIZE = "".join(f"os.environ.setdefault({k!r}, {v!r})\n" for k, v in NCCL_ENV.items())


@dataclass
class Step:
    title: str
    argv: list[str]
    expect: tuple[int, ...] = (ExitCode.OK,)      # exit codes that mean the step went as told
    prepare: Callable[[], None] | None = None  # what happens on the host before the command
    note: str = ""

    @property
    def shown(self) -> str:
        return shown(self.argv)


def shown(argv: list[str]) -> str:
    """A command as the user would type it (envsnap instead of python -m envsnap)."""
    words = ["envsnap", *argv[3:]] if argv[1:3] == ["-m", "envsnap"] else argv
    return " ".join(shlex.quote(word) for word in words)


@dataclass
class Scene:
    """The demo's folder and what lives in it."""

    root: Path
    env: dict[str, str] = field(default_factory=dict)
    worker: subprocess.Popen[bytes] | None = None
    watcher: subprocess.Popen[bytes] | None = None   # `envsnap watch`, started by the demo

    @property
    def checkout(self) -> Path:
        return self.root / "sglang"

    @property
    def python(self) -> Path:
        return self.root / "ml-env" / "bin" / "python3"

    @property
    def worker_tag(self) -> str:
        # One per demo folder: a demo (or test suite) running beside this one has a worker
        # and `envsnap --proc` command lines of its own that a shared tag would match too.
        return f"{WORKER_TAG}-{self.root.name.rsplit('-', 1)[-1]}"

    def git(self, *args: str, cwd: Path | None = None) -> str:
        result = subprocess.run(["git", *args], cwd=cwd or self.checkout, env=self.env,
                                capture_output=True, text=True, check=True)
        return result.stdout.strip()

    def write(self, repo: Path, name: str, text: str) -> None:
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    def stop(self, keep: bool = False) -> None:
        if self.watcher is not None:   # SIGTERM: the watcher ends cleanly, its lock let go
            self.watcher.terminate()
            try:
                self.watcher.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.watcher.kill()
                self.watcher.wait()
        if self.worker is not None:
            self.worker.kill()
            self.worker.wait()
        if not keep:
            shutil.rmtree(self.root, ignore_errors=True)


def git_env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_AUTHOR_NAME="Demo Engineer", GIT_AUTHOR_EMAIL="engineer@example.com",
               GIT_COMMITTER_NAME="Demo Engineer", GIT_COMMITTER_EMAIL="engineer@example.com",
               GIT_CONFIG_NOSYSTEM="1", ENVSNAP_STORE=str(root / "snapshots"))
    return env


def set_up(root: Path | None = None) -> Scene:
    """The good state: a clone at the good commit with the engineer's local patch, the venv
    with its sitecustomize, and a worker running with the tuned NCCL env."""
    scene = Scene(root or Path(tempfile.mkdtemp(prefix="envsnap-demo-")))
    scene.env = git_env(scene.root)
    make_upstream(scene)
    scene.git("clone", "-q", str(scene.root / "upstream.git"), str(scene.checkout),
              cwd=scene.root)
    scene.write(scene.checkout, ENGINE, "ENGINE = 1\nCUDA_GRAPH_EXTEND = False  # local tweak\n")
    make_venv(scene)
    (scene.root / "bench_one.py").write_text(BENCH_ONE.replace("PYNCCL", PYNCCL))
    start_worker(scene, NCCL_ENV)
    start_watch(scene)
    return scene


def watch_args(scene: Scene) -> list[str]:
    return envsnap("watch", "local", "--proc", scene.worker_tag, "--python", str(scene.python),
                   "--repo", str(scene.checkout), "--every", "10m")


def start_watch(scene: Scene) -> None:
    """`envsnap watch` in the background, as `watch --install` would keep it: a record now,
    and one whenever a worker of the tag starts, so a restart's lost env stays on record."""
    log = (scene.root / "watch.log").open("wb")
    scene.watcher = subprocess.Popen(watch_args(scene), env=scene.env, cwd=scene.root,
                                     stdout=log, stderr=subprocess.STDOUT)
    log.close()
    wait_for_records(scene, 1)


def records(scene: Scene) -> int:
    return len(History.of_store(Store(Path(scene.env["ENVSNAP_STORE"]))).manifests())


def wait_for_records(scene: Scene, count: int, seconds: float = 60) -> None:
    """Until the history holds `count` records (or the watcher has ended, or time is up:
    the timeline then says what the history lacks)."""
    deadline = time.monotonic() + seconds
    while records(scene) < count and time.monotonic() < deadline:
        if scene.watcher is None or scene.watcher.poll() is not None:
            return
        time.sleep(0.2)


def start_worker(scene: Scene, nccl_env: dict[str, str]) -> None:
    """The stand-in for the SGLang server: a process of the venv's python with this env,
    stopping the one before it (a restart)."""
    if scene.worker is not None:
        scene.worker.kill()
        scene.worker.wait()
    scene.worker = subprocess.Popen(
        [str(scene.python), "-c", "import time; time.sleep(900)", scene.worker_tag],
        env={**scene.env, **nccl_env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def make_upstream(scene: Scene) -> None:
    upstream, dev = scene.root / "upstream.git", scene.root / "dev"
    scene.git("init", "-q", "--bare", "-b", "main", str(upstream), cwd=scene.root)
    scene.git("clone", "-q", str(upstream), str(dev), cwd=scene.root)
    for name, text in {PYNCCL: "VERIFY_MS = 19.0\n", PARALLEL_STATE: "WORLD = 8\n",
                       ENGINE: "ENGINE = 1\n", "README.md": "sglang (demo)\n"}.items():
        scene.write(dev, name, text)
    scene.git("add", "-A", cwd=dev)
    scene.git("commit", "-qm", "Initial sglang", cwd=dev)
    scene.git("push", "-q", "origin", "main", cwd=dev)


def upstream_moves(scene: Scene) -> None:
    """Nine commits upstream; the fifth, 'Fix PCG MoE Error', slows the NCCL path."""
    dev = scene.root / "dev"
    for number in range(1, 10):
        if number == 5:
            scene.write(dev, PYNCCL, "VERIFY_MS = 29.0  # all-reduce through the PCG path\n")
            scene.write(dev, PARALLEL_STATE, "WORLD = 8\nUSE_PCG = True\n")
            message = "Fix PCG MoE Error"
        else:
            scene.write(dev, f"docs/change_{number}.md", f"change {number}\n")
            message = f"Docs: change {number}"
        scene.git("add", "-A", cwd=dev)
        scene.git("commit", "-qm", message, cwd=dev)
    scene.git("push", "-q", "origin", "main", cwd=dev)


# Debian's and Ubuntu's python3 has a sitecustomize.py of its own in the standard library,
# which stands before a venv's site-packages and shadows the venv's: one startup line moves
# the venv's site-packages first, so the STORY's sitecustomize runs there as on the host.
OWN_FIRST = "00-own-sitecustomize-first.pth"


def make_venv(scene: Scene) -> None:
    venv.EnvBuilder(with_pip=False, symlinks=True).create(scene.root / "ml-env")
    site = next((scene.root / "ml-env" / "lib").glob("python3*/site-packages"))
    if Path(sysconfig.get_paths()["stdlib"], "sitecustomize.py").exists():
        (site / OWN_FIRST).write_text(
            f"import sys; p = {str(site)!r}; sys.path.insert(0, sys.path.pop(sys.path.index(p)))"
            " if p in sys.path else None\n")
    (site / "sitecustomize.py").write_text("import os\n" + SITECUSTOMIZE)


def the_silent_pull(scene: Scene) -> None:
    """The engineer puts the local patch away; something pulls upstream; the server is
    restarted from a unit file that lacks one NCCL variable; then, the hunt's first step
    (docs/STORY.md), the engineer writes the sitecustomize again, the same lines."""
    time.sleep(1.1)   # after the good benchmark's last second, as a day later would be
    scene.git("stash", "push", "-q", "-m", "engineer's local patches")
    upstream_moves(scene)
    scene.git("-c", "pull.rebase=false", "pull", "-q", "origin", "main")
    time.sleep(1.1)   # the reflog keeps whole seconds: the restart is after the pull
    kept = records(scene)
    start_worker(scene, {k: v for k, v in NCCL_ENV.items() if k != DROPPED_VARIABLE})
    wait_for_records(scene, kept + 1)   # the watcher's record of the new worker
    time.sleep(0.2)
    site = next((scene.root / "ml-env" / "lib").glob("python3*/site-packages"))
    (site / "sitecustomize.py").write_text("import os\n" + SITECUSTOMIZE)


def envsnap(*args: str) -> list[str]:
    return [sys.executable, "-m", "envsnap", *args]


def bench_command(scene: Scene) -> str:
    # Absolute: bisect runs the benchmark from inside the checkout.
    return f"{scene.python} {scene.root / 'bench_one.py'} {scene.checkout}"


def bench_args(scene: Scene, label: str) -> list[str]:
    return envsnap("bench", "local", "--label", label, "--repeat", "5",
                   "--cmd", bench_command(scene), "--metric", METRIC,
                   "--repo", str(scene.checkout), "--python", str(scene.python),
                   "--proc", scene.worker_tag)


def steps(scene: Scene) -> list[Step]:
    return [
        Step("1. the good state: snapshot + benchmark (EAGLE-3, verify ~19 ms)",
             bench_args(scene, "good")),
        Step("2. a day later, the 'same' setup: snapshot + benchmark again",
             bench_args(scene, "bad"), prepare=lambda: the_silent_pull(scene),
             note="meanwhile the local patch was stashed, something ran `git pull`, and the "
                  f"server was restarted without {DROPPED_VARIABLE}"),
        Step("3. what changed on the host in the last hour, from its own evidence (no "
             "snapshot needed)",
             envsnap("timeline", "local", "--since", "1h", "--repo", str(scene.checkout),
                     "--python", str(scene.python), "--proc", scene.worker_tag),
             note="the reflog, the worker's start time, the sitecustomize's mtime, and "
                  "the history `envsnap watch` kept meanwhile (the env the restarted worker "
                  "lost); the benchmarks of steps 1 and 2 mark where the numbers moved"),
        Step("4. what changed, ranked by what matters", envsnap("diff", "good", "bad"),
             expect=(ExitCode.DRIFT,)),
        Step("5. which difference did it: each put back and benchmarked (explain)",
             envsnap("explain", "good", "bad", "--repo", str(scene.checkout),
                     "--cmd", bench_command(scene), "--metric", METRIC, "--repeat", "3",
                     "--yes"),
             expect=(ExitCode.DRIFT,),
             note=f"the pull, the stashed patch, {DROPPED_VARIABLE} gone from the server: "
                  "suspects until measured"),
        Step("6. bring the good state back (your current work is stashed), rerun the benchmark",
             envsnap("restore", "good", "--yes", "--rerun"), expect=(ExitCode.DRIFT,),
             note=f"a running server's env is not restore's to change: it names "
                  f"{DROPPED_VARIABLE} for you to set by hand, harmless here as explain "
                  "measured"),
        Step("7. which of the nine pulled commits did it (noise-aware bisect)",
             envsnap("bisect", "good", "bad", "--repo", str(scene.checkout),
                     "--cmd", bench_command(scene), "--metric", METRIC, "--repeat", "5"),
             expect=(ExitCode.DRIFT,)),
    ]


def runnable_here(scene: Scene, output: str, keep: bool) -> str:
    """Restore's "rollback point: envsnap restore X" names a snapshot in the demo's own store:
    say how to reach that store from the user's shell (--keep), or that it goes with the demo."""
    def reworded(found: re.Match[str]) -> str:
        label = found.group(1)
        if keep:
            store = shlex.quote(scene.env["ENVSNAP_STORE"])
            return f"rollback point: ENVSNAP_STORE={store} envsnap restore {label}"
        return (f"rollback point: {label}, in the demo's store, which is deleted when the demo "
                "ends (envsnap demo --keep keeps it)")
    return ROLLBACK_HINT.sub(reworded, output)


def run_step(scene: Scene, step: Step) -> subprocess.CompletedProcess[str]:
    """A step's output as a terminal would show it: stderr (progress) in time order."""
    return subprocess.run(step.argv, env=scene.env, cwd=scene.root, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=300)
