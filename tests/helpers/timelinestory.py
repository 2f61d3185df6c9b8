"""Real evidence of change on this machine, in a known order, for `envsnap timeline`'s tests.

Each step is done by the real tool, at the real time, in a later whole second than the one
before (git's reflog keeps whole seconds), the worker more than a second after the rest (its
start time is read from the boot time, kept in whole seconds): a `git pull`, a `git pull
--rebase`, two `git stash push` and a `git stash pop` in a real clone of a real upstream; a
`pip install` and an upgrade of small wheels built here, into a venv; a rewritten
sitecustomize; a worker restarted after them. The host's system logs are Debian 12's own
lines (tests/data/timeline), copied under a root folder the timeline is pointed at
(--log-root), with a kernel message planted in its kern.log in the form Debian 12's rsyslog
writes.
"""
from __future__ import annotations

import gzip
import math
import shutil
import subprocess
import sys
import time
import venv
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from helpers.gitrepos import git_env
from helpers.pythons import own_sitecustomize_first
from helpers.wheels import make_wheel

DATA = Path(__file__).resolve().parent.parent / "data" / "timeline" / "debian12"
STEP = 1.1   # seconds: more than the error of a time kept in whole seconds
XID_LINE = ("{stamp} gpu01 kernel: NVRM: Xid (PCI:0000:18:00): 79, pid=2107, name=python3, "
            "GPU has fallen off the bus.")


def git(cwd: Path, env: dict[str, str], *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, f"git {args}: {done.stderr}"
    return done.stdout.strip()


def log_root(root: Path) -> Path:
    """Debian's recorded logs under `root`, the oldest rotated one gzipped as logrotate does."""
    shutil.copytree(DATA, root)
    rotated = root / "var" / "log" / "dpkg.log.2"
    with gzip.open(str(rotated) + ".gz", "wb") as packed:
        packed.write(rotated.read_bytes())
    rotated.unlink()
    return root


@dataclass
class Story:
    root: Path
    checkout: Path
    python: Path
    site: Path
    marker: str
    env: dict[str, str]
    started: float = field(default_factory=time.time)
    times: dict[str, float] = field(default_factory=dict)
    worker: subprocess.Popen[bytes] | None = None

    def mark(self, step: str, pause: float | None = None) -> None:
        """Note when `step` was done; then sleep `pause` seconds, or into the next whole second
        (all the next step does is in a later second than what this one did: the reflog's
        and a capture's times keep whole seconds), half of STEP on average."""
        now = time.time()
        self.times[step] = now
        time.sleep(pause if pause is not None else math.ceil(now) - now + 0.05)

    def stop(self) -> None:
        if self.worker is not None:
            self.worker.kill()
            self.worker.wait()


def start_worker(python: Path, marker: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([str(python), "-c", "import time; time.sleep(120)", marker],
                            env={"PATH": "/usr/bin:/bin", "NCCL_ALGO": "Ring"})


def prepare(tmp: Path, marker: str) -> Story:
    """Everything that exists before the changes: an upstream, a clone, a venv, a worker."""
    env = git_env(tmp / "git-home")
    (tmp / "git-home").mkdir(parents=True)
    upstream, dev, checkout = tmp / "upstream.git", tmp / "dev", tmp / "sglang"
    git(tmp, env, "init", "-q", "--bare", "-b", "main", str(upstream))
    git(tmp, env, "clone", "-q", str(upstream), str(dev))
    (dev / "pynccl.py").write_text("VERIFY_MS = 19\n")
    git(dev, env, "add", "-A")
    git(dev, env, "commit", "-q", "-m", "Initial sglang")
    git(dev, env, "push", "-q", "origin", "main")
    git(tmp, env, "clone", "-q", str(upstream), str(checkout))
    venv.EnvBuilder(with_pip=False, symlinks=True).create(tmp / "ml-env")
    python = tmp / "ml-env" / "bin" / "python3"
    own_sitecustomize_first(python)   # so the venv's own file is the one that runs
    site = Path(subprocess.run([str(python), "-c", "import site; print(site.getsitepackages()[0])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "sitecustomize.py").write_text("import os\nos.environ.setdefault('NCCL_PROTO', 'LL')\n")
    story = Story(log_root(tmp / "root"), checkout, python, site, marker, env)
    story.worker = start_worker(python, marker)
    return story


def pip(python: Path, wheel: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
                    "--no-index", "--no-deps", str(wheel)], check=True, capture_output=True)


def upstream_commit(dev: Path, env: dict[str, str], name: str, text: str) -> None:
    (dev / name).write_text(text)
    git(dev, env, "add", "-A")
    git(dev, env, "commit", "-q", "-m", f"Change {name}")
    git(dev, env, "push", "-q", "origin", "main")


def happen(story: Story, tmp: Path, before_upgrade: Callable[[], object] | None = None
           ) -> Story:
    """The changes, each by the real tool, in this order (`before_upgrade`: a capture)."""
    env = story.env
    dev, co = tmp / "dev", story.checkout
    upstream_commit(dev, env, "pynccl.py", "VERIFY_MS = 29\n")
    upstream_commit(dev, env, "README.md", "sglang\n")
    git(co, env, "-c", "pull.rebase=false", "pull", "-q", "origin", "main")
    story.mark("pull")
    (co / "local.py").write_text("LOCAL = 1\n")
    git(co, env, "add", "-A")
    git(co, env, "commit", "-q", "-m", "Local tweak")
    upstream_commit(dev, env, "engine.py", "ENGINE = 2\n")
    git(co, env, "pull", "-q", "--rebase", "origin", "main")
    story.mark("rebase")
    (co / "local.py").write_text("LOCAL = 2\n")
    git(co, env, "stash", "push", "-q", "-m", "first try")
    (co / "local.py").write_text("LOCAL = 3\n")
    git(co, env, "stash", "push", "-q", "-m", "second try")
    story.mark("stash push")
    git(co, env, "stash", "pop", "-q")
    story.mark("stash pop")
    pip(story.python, make_wheel(tmp, "1.0"))
    story.mark("pip install")
    if before_upgrade is not None:
        before_upgrade()
        story.mark("snapshot")
    pip(story.python, make_wheel(tmp, "2.0"))
    story.mark("pip upgrade")
    kern = story.root / "var" / "log" / "kern.log"
    stamp = datetime.now(timezone.utc).isoformat(timespec="microseconds")
    kern.write_text(XID_LINE.format(stamp=stamp) + "\n")
    story.mark("kernel")
    (story.site / "sitecustomize.py").write_text("import os\n")
    story.mark("sitecustomize", 0.3)   # a worker's start is read to the hundredth
    story.stop()
    story.worker = start_worker(story.python, story.marker)
    story.mark("worker")
    return story
