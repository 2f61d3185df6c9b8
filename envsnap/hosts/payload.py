"""Pack the agent (and a vendored pynvml) into one zip, ship it once per host, run it.

Like Ansible's AnsiballZ, but cached: the zip is named by its content hash and unpacked on
the host into ~/.cache/envsnap/agent-<hash>/, so later captures cost one SSH exec, and the
host's python keeps its bytecode cache there between runs.
"""
from __future__ import annotations

import base64
import hashlib
import importlib.util
import io
import json
import os
import shlex
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, TypedDict, Union

from envsnap.errors import ExitCode

AGENT_DIR = Path(__file__).parent.parent / "agent"
CACHE_DIR = ".cache/envsnap"         # relative to the login home on the host
PAYLOAD_MISSING_EXIT = ExitCode.AGENT_NOT_CACHED   # "ship it first", from run_command below
ZIP_DATE = (2020, 1, 1, 0, 0, 0)     # fixed, so equal content gives an equal hash

# The agent's JSON document as it prints it (agent/runner.py): the one place where what
# crosses from the host stays a plain mapping. snapshot.build turns a capture's into a
# Snapshot, bench.build_record a benchmark's into a Bench record.
AgentOutput = dict[str, Any]
# (name, value) sets, (name, None) unsets an environment variable (agent/benchserve.py)
EnvChange = list[Union[str, None]]


class ControllerIdentity(TypedDict):
    """The controller's process, so that an agent on the same machine leaves it and its
    parents out of --proc (agent/env.py): a pid means this process only on this boot and
    in this pid namespace ("" where /proc does not say). With its hostname, as a checkout
    lock names its holder (hostops/locks.py): its own locks are no other's hold on a
    checkout (agent/gitlock.py)."""

    pid: int
    hostname: str
    boot_id: str
    pid_namespace: str


class CollectConfig(TypedDict, total=False):
    """What a capture asks the agent (agent/runner.py, agent/git.py, agent/env.py)."""

    repos: list[str]
    procs: list[str]
    controller: ControllerIdentity
    timeout: float                  # each collector's
    max_patch_bytes: int
    history_budget: int             # most commits of git history per repo
    lifeline: bool                  # a controller follows: stop if it goes away
    in_process: bool                # run by a fork of the controller (hosts/headstart.py)


class ServeConfig(TypedDict):
    """A server the agent starts before a benchmark's runs (agent/benchserve.py)."""

    cmd: str
    ready: str
    timeout: float
    env: list[EnvChange]


class BenchConfig(TypedDict, total=False):
    """What a benchmark asks the agent (agent/benchrun.py)."""

    mode: Literal["bench"]
    cmd: str
    repeat: int
    cwd: str | None
    metric: str
    sample_interval: float
    timeout: float                  # each run's
    max_samples: int
    env: list[EnvChange]
    serve: ServeConfig | None
    lifeline: bool


class TimelineConfig(TypedDict, total=False):
    """What `envsnap timeline` asks the agent (agent/timeline.py)."""

    mode: Literal["timeline"]
    repos: list[str]
    procs: list[str]
    since: float                    # epoch seconds
    until: float
    root: str                       # where / is for the logs read (tests: recorded ones)
    timeout: float                  # each source's
    lifeline: bool
    discover: bool                  # nothing named: find the running Python's (discover.py)
    pythons: list[str]              # with discover: interpreters the store recorded
    here: str                       # with discover, locally: the folder it runs in


AgentConfig = Union[CollectConfig, BenchConfig, TimelineConfig]   # the agent's one argument


def payload_files() -> dict[str, bytes]:
    """Archive name -> content: the agent package, its entry point, and pynvml if present."""
    files = {"envsnap/__init__.py": b"", "__main__.py": (AGENT_DIR / "__main__.py").read_bytes()}
    for source in sorted(AGENT_DIR.rglob("*.py")):  # rglob: a sub-package travels too
        files[f"envsnap/agent/{source.relative_to(AGENT_DIR).as_posix()}"] = source.read_bytes()
    pynvml = vendored_pynvml()
    if pynvml is not None:
        files["pynvml.py"] = pynvml
    return files


def vendored_pynvml() -> bytes | None:
    # find_spec locates nvidia-ml-py's single-file module without importing it.
    spec = importlib.util.find_spec("pynvml")
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin).read_bytes()


_building = threading.Lock()


def build_payload() -> tuple[bytes, str]:
    """The zip and its digest, built once per process: the workers of a fleet capture all
    ask at once, and the cache alone let each build it."""
    with _building:
        return zipped_agent(), files_digest()


def agent_digest() -> str:
    """The agent's name on the host: a content hash of what the zip holds (first 16 hex
    digits of sha256 over each file's name, size and bytes). Known without zipping, so a
    capture whose host has the agent cached (all but the first) never deflates it."""
    with _building:
        return files_digest()


@lru_cache(maxsize=1)
def read_once() -> dict[str, bytes]:
    """payload_files, read once per process for the digest and the zip both."""
    return payload_files()


@lru_cache(maxsize=1)
def files_digest() -> str:
    digest = hashlib.sha256()
    for name, content in read_once().items():
        digest.update(b"%s\0%d\0" % (name.encode(), len(content)))
        digest.update(content)
    return digest.hexdigest()[:16]


@lru_cache(maxsize=1)
def zipped_agent() -> bytes:
    import zipfile  # on use: a capture whose host has the agent cached never zips it

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in read_once().items():
            info = zipfile.ZipInfo(name, date_time=ZIP_DATE)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, content)
    return buffer.getvalue()


def agent_dir(digest: str) -> str:
    return f"{CACHE_DIR}/agent-{digest}"


def zip_path(digest: str) -> str:
    """A name of its own for each upload: concurrent captures of one host (a fleet of
    aliases, two users' runs) never unpack or delete each other's zip."""
    # os.urandom rather than uuid: uuid loads platform, ~5 ms of every capture's start
    return f"{CACHE_DIR}/agent-{digest}.{os.urandom(6).hex()}.zip"


def encode_config(config: AgentConfig) -> str:
    return base64.b64encode(json.dumps(config, sort_keys=True).encode()).decode()


def run_command(python: str, digest: str, config: AgentConfig) -> str:
    """Run the cached agent, or exit PAYLOAD_MISSING_EXIT so the caller ships it first."""
    folder = f'"$HOME"/{agent_dir(digest)}'
    return (f'mkdir -p "$HOME"/{CACHE_DIR} && if [ -f {folder}/__main__.py ]; then '
            f"exec {shlex.quote(python)} {folder} {encode_config(config)}; "
            f"else exit {PAYLOAD_MISSING_EXIT}; fi")


STALE_DAYS = 30   # agents of other envsnap versions unused this long are removed

# Unpack into a private folder, then rename: concurrent captures of one host each unpack
# their own upload and the first rename wins; the others find the folder in place. Old
# agents (another envsnap version, untouched for STALE_DAYS) are cleared on the way, so the
# cache does not grow with every upgrade. Plain syntax: any python may run this.
UNPACK = (
    "import os,sys,time,shutil,zipfile,tempfile\n"
    "z,d=sys.argv[1],sys.argv[2]\n"
    "t=tempfile.mkdtemp(dir=os.path.dirname(d))\n"
    "zipfile.ZipFile(z).extractall(t)\n"
    "try:\n os.rename(t,d)\n"
    "except OSError:\n shutil.rmtree(t, True)\n"
    "os.remove(z)\n"
    "p=os.path.dirname(d)\n"
    "for n in os.listdir(p):\n"
    " f=os.path.join(p,n)\n"
    f" if n.startswith('agent-') and os.path.isdir(f) and f!=d and "
    f"time.time()-os.path.getmtime(f)>{STALE_DAYS}*86400:\n"
    "  shutil.rmtree(f, True)\n"
)


def install_and_run_command(python: str, digest: str, uploaded: str,
                            config: AgentConfig) -> str:
    """Unpack the zip uploaded to `uploaded` (see zip_path) and run the agent, in one exec."""
    py = shlex.quote(python)
    return (f'cd "$HOME" && {py} -c {shlex.quote(UNPACK)} {shlex.quote(uploaded)} '
            f"{agent_dir(digest)} && exec {py} {agent_dir(digest)} {encode_config(config)}")
