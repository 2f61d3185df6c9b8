from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers.offline import offline_available, run_offline
from helpers.slurm import Slurm, missing_programs, start_slurm
from helpers.sshd import UNINHERITED, Sshd, home_env, isolated_env, start_sshd

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session", autouse=True)
def ctrl_c_as_at_a_terminal() -> None:
    """A suite started in the background (`cmd &` in a script, as a CI runner may) inherits
    Ctrl-C ignored, and so would every envsnap a test starts: a test that sends SIGINT to one
    then waited for an exit that never came. Python's own Ctrl-C handler in each process
    that runs tests (xdist's workers too), so the processes they start get the default."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def uses_sshd(item: pytest.Item) -> bool:
    """A test that logs in through the test sshd: it asks for the fixture (directly or through
    `ssh_cli`), or it is the `over_ssh` case of a test that picks its CLI at run time."""
    if "sshd" in getattr(item, "fixturenames", ()):
        return True
    callspec = getattr(item, "callspec", None)
    return bool(callspec is not None and callspec.params.get("over_ssh"))


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config: pytest.Config,
                                  items: list[pytest.Item]) -> Iterator[None]:
    # One place marks them all, before `-m` deselects: `-m "not ssh"` runs the suite where no
    # sshd can start.
    for item in items:
        if uses_sshd(item):
            item.add_marker(pytest.mark.ssh)
        # Under parallel workers (tests/run.sh: -n auto --dist loadgroup) each worker starts
        # its own sshd (free port, its own folder); the Slurm tests share one worker, so one
        # cluster starts, not one per worker on the same node name.
        if "slurm_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("slurm"))
    yield
    if getattr(config.option, "loadgroup", False):   # an xdist worker under --dist loadgroup
        for item in items:
            join_group(item)


def join_group(item: pytest.Item) -> None:
    """Send a test to its xdist_group's worker. pytest-xdist (3.8) schedules by the suffix
    `@group` of the node ids its workers report, which it adds by setting item._nodeid; pytest
    9 no longer reads that (a node's id is item._id, a NodeId), so there every test was a
    group of its own: the Ansible fleet of its module was built once per worker, and each
    worker started a Slurm. The suffix is added here as xdist adds it, where it is missing."""
    names = sorted({str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                    for mark in item.iter_markers("xdist_group")})
    suffix = f"@{'_'.join(names)}"
    node_id = getattr(item, "_id", None)
    if names and node_id is not None and not item.nodeid.endswith(suffix):
        item._id = type(node_id).parse(item.nodeid + suffix)


KEPT_MASTERS_S = "10"   # a test's kept OpenSSH masters outlive it this long, not minutes


@pytest.fixture(scope="session")
def runtime_dir() -> Iterator[Path]:
    """One XDG_RUNTIME_DIR for the session's tests (short: the kept masters' sockets live
    in it), their masters ended and the folder removed at the end."""
    folder = Path(tempfile.mkdtemp(prefix="envsnap-rt-", dir="/tmp"))
    yield folder
    from envsnap.hosts.openssh import stop_master

    kept = folder / "envsnap"
    for socket in kept.iterdir() if kept.is_dir() else ():
        stop_master(str(socket))
    shutil.rmtree(folder, ignore_errors=True)


AGENT_CACHE = Path(".cache/envsnap")   # hosts/payload.py's CACHE_DIR under a home
_seed_cache: list[Path] = []          # the session's warmed agent cache, once made


@pytest.fixture(scope="session", autouse=True)
def warmed_agent_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """One `local` capture in a home of the session's own, so each test's fresh home starts
    with the agent unpacked and byte-compiled and the toolchain's answers cached, as a
    user's home has them after the first capture (about half of a first capture's time,
    paid once per worker instead of once per test). A test of the first capture itself
    clears its home's cache (`fresh_agent_cache`)."""
    seed = tmp_path_factory.mktemp("seed-home")
    env = {**isolated_env(seed), "ENVSNAP_STORE": str(seed / "store"), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "envsnap", "capture", "local", "--label",
                           "seed"], env=env, cwd=seed, capture_output=True, text=True,
                          timeout=120)
    if done.returncode == 0 and (seed / AGENT_CACHE).is_dir():
        _seed_cache.append(seed / AGENT_CACHE)


def seed_agent_cache(home: Path) -> None:
    """A copy (never a link: envsnap refuses to write through one) of the warmed cache."""
    target = home / AGENT_CACHE
    if _seed_cache and not target.exists():
        shutil.copytree(_seed_cache[0], target)


def fresh_agent_cache(home: Path) -> None:
    """A home without the agent's cache: the first capture on a host, as it really is."""
    shutil.rmtree(home / AGENT_CACHE, ignore_errors=True)


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory: pytest.TempPathFactory, runtime_dir: Path,
                  monkeypatch: pytest.MonkeyPatch, warmed_agent_cache: None,
                  ctrl_c_as_at_a_terminal: None) -> Path:
    """Every test's own process gets a HOME and XDG dirs of its own too: tasks run in-process
    on `local` (a patch upload, `~` in a command) land there, never in the real home. Its
    kept OpenSSH masters (named by the HOME they serve, so no other test's is used) sit in
    the session's runtime folder and end soon after it."""
    home = tmp_path_factory.mktemp("process-home")
    seed_agent_cache(home)
    for name, value in home_env(home).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime_dir))
    monkeypatch.setenv("ENVSNAP_SSH_CONTROL_PERSIST", KEPT_MASTERS_S)
    for name in UNINHERITED:   # no ssh agent, and no terminal width of the one running pytest
        monkeypatch.delenv(name, raising=False)
    return home


def unique_marker(kind: str) -> str:
    """A command-line tag for stand-in workers, unique to this run: `--proc` of a suite never
    matches the workers (or envsnap command lines) of another suite on the same machine."""
    return f"envsnap-{kind}-{uuid.uuid4().hex[:12]}"


@contextmanager
def sleeping_worker(marker: str, env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """A stand-in inference worker: a process whose cmdline carries `marker`, with `env`."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", marker],
                            env={"PATH": "/usr/bin:/bin", **env})
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    daemon = start_sshd(tmp_path_factory.mktemp("sshd"))
    yield daemon
    daemon.stop()


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Slurm]:
    """A one-node Slurm on loopback (tests/helpers/slurm.py), started once per session. As root (CI:
    tests/run.sh installs slurm-wlm and munge) a missing program is a failure; a user who
    is not root cannot run the daemons as SlurmUser=root, so there the tests skip."""
    missing = missing_programs()
    if os.geteuid() != 0:
        pytest.skip("the Slurm tests run as root (the daemons run as SlurmUser=root)"
                    + (f"; missing too: {', '.join(missing)}" if missing else ""))
    if missing:
        pytest.fail(f"Slurm is not installed (missing {', '.join(missing)}): bash tests/run.sh "
                    "installs slurm-wlm and munge")
    cluster = start_slurm(tmp_path_factory.mktemp("slurm"))
    yield cluster
    cluster.stop()


class CliTimeout(BaseException):
    """An in-process command ran past its timeout. A BaseException: the CLI's top-level
    handler turns every Exception into exit 70, and this must reach the test."""


@dataclass
class Cli:
    """The real `envsnap` command run in this process: envsnap.cli.main.main(argv), the same
    parser, top-level handler and exit code as `python -m envsnap`, with its own HOME, XDG
    dirs and store (`env` is the whole environment, as a subprocess would get it) and `cwd`.

    What a process would have of its own is made so for the call and put back after:
    os.environ, the working directory, sys.argv, the umask, signal handlers, logging's
    handlers, sys.stdin (an empty file that is no terminal, as under the subprocess runner).
    Output is captured at the file descriptors, so a program envsnap starts writes into
    `stdout`/`stderr` as it would in a subprocess; both are decoded as `text=True` would
    (UTF-8, universal newlines). The caches envsnap keeps (functools) are pure functions of
    their arguments and the installed code, so sharing them between calls changes no answer.
    What needs a real process (signals to it, a terminal, pipes it owns, an install, a crash
    of the interpreter) uses CliProcess."""

    env: dict[str, str]
    cwd: Path

    def __call__(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        argv = ["envsnap", *args]
        with own_process_state(self.env, self.cwd, argv) as captured:
            code = run_main(list(args), timeout)
        return subprocess.CompletedProcess(argv, code, captured.stdout, captured.stderr)


@dataclass
class Captured:
    stdout: str = ""
    stderr: str = ""


def run_main(args: list[str], timeout: float) -> int:
    """main(args)'s exit code; argparse's SystemExit (help, usage errors) as the process's."""
    from envsnap.cli.main import main

    def expired(signum: int, frame: object) -> None:
        raise CliTimeout(f"envsnap {' '.join(args)}: still running after {timeout:g} s")

    signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        return main(args)
    except SystemExit as ended:
        if ended.code is None or isinstance(ended.code, int):
            return ended.code or 0
        sys.stderr.write(f"{ended.code}\n")   # what the interpreter does with a message
        return 1
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


SAVED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE, signal.SIGALRM,
                 signal.SIGCHLD, signal.SIGHUP)


@contextmanager
def own_process_state(env: dict[str, str], cwd: Path, argv: list[str]) -> Iterator[Captured]:
    saved_env, saved_cwd, saved_argv = dict(os.environ), os.getcwd(), sys.argv
    saved_umask = os.umask(0o022)
    os.umask(saved_umask)
    saved_signals = {number: signal.getsignal(number) for number in SAVED_SIGNALS}
    saved_logging = logging_state()
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    saved_fds = os.dup(1), os.dup(2)
    captured = Captured()
    out, err = Drain(), Drain()
    with open(os.devnull) as nothing:
        try:
            os.environ.clear()
            os.environ.update(env)
            time.tzset()
            os.chdir(cwd)
            sys.argv = argv
            sys.stdout.flush()
            sys.stderr.flush()
            out.plug_into(1)
            err.plug_into(2)
            # what a child's streams are on a pipe: stdout strict, stderr backslashreplace
            sys.stdout = open(1, "w", encoding="utf-8", closefd=False)
            sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace",
                              closefd=False, buffering=1)
            sys.stdin = nothing
            yield captured
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (OSError, ValueError):
                    pass
            sys.stdin, sys.stdout, sys.stderr = saved_streams
            os.dup2(saved_fds[0], 1)   # the pipes' last write ends close: their readers end
            os.dup2(saved_fds[1], 2)
            for fd in saved_fds:
                os.close(fd)
            captured.stdout, captured.stderr = out.text(), err.text()
            restore_logging(saved_logging)
            for number, handler in saved_signals.items():
                signal.signal(number, handler if handler is not None else signal.SIG_DFL)
            os.umask(saved_umask)
            sys.argv = saved_argv
            os.chdir(saved_cwd)
            os.environ.clear()
            os.environ.update(saved_env)
            time.tzset()


class Drain:
    """A pipe for fd 1 or 2, as a subprocess's output is one: a command that opens
    /dev/stdout, polls it or hands it to a child gets a pipe (a file there would be
    replaced by `report -o /dev/stdout`). A thread empties it, as communicate() does."""

    def __init__(self) -> None:
        self.read_end, self.write_end = os.pipe()
        self.chunks: list[bytes] = []
        self.reader = threading.Thread(target=self.pump, name="cli-output", daemon=True)
        self.reader.start()

    def pump(self) -> None:
        while True:
            chunk = os.read(self.read_end, 1 << 16)
            if not chunk:
                return
            self.chunks.append(chunk)

    def plug_into(self, fd: int) -> None:
        os.dup2(self.write_end, fd)
        os.close(self.write_end)

    def text(self) -> str:
        """What subprocess.run(..., text=True) makes of the bytes: UTF-8, universal newlines.
        A program the command left running that holds the pipe ends it later: what it had
        written by then is all there is, as a subprocess's timeout would leave it."""
        self.reader.join(timeout=30)
        if not self.reader.is_alive():
            os.close(self.read_end)
        text = b"".join(self.chunks).decode("utf-8")
        return text.replace("\r\n", "\n").replace("\r", "\n")


LoggingState = dict[str, tuple[list[logging.Handler], int, bool, bool]]


def all_loggers() -> list[logging.Logger]:
    return [logging.getLogger(), *(logger for logger in logging.Logger.manager.loggerDict.values()
                                   if isinstance(logger, logging.Logger))]


def logging_state() -> LoggingState:
    """Each logger's handlers, level and switches (the CLI quiets paramiko's logger)."""
    return {logger.name: (list(logger.handlers), logger.level, logger.propagate,
                          logger.disabled) for logger in all_loggers()}


def restore_logging(saved: LoggingState) -> None:
    """Loggers as they were before the call; one made during it is left with no handler."""
    for logger in all_loggers():
        handlers, level, propagate, disabled = saved.get(
            logger.name, ([], logging.NOTSET, True, False))
        logger.handlers[:] = handlers
        logger.setLevel(level)
        logger.propagate, logger.disabled = propagate, disabled


@dataclass
class CliProcess(Cli):
    """The real `envsnap` command in a subprocess, with its own HOME, XDG dirs and store:
    for what needs a process of its own (signals, a terminal, pipes, installs)."""

    def __call__(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "envsnap", *args], cwd=self.cwd,
                              env=self.env, capture_output=True, text=True, timeout=timeout)


def cli_env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    seed_agent_cache(home)
    # HOME and XDG dirs of its own: the `local` host's agent cache and restore lock, crash
    # logs and anything else under ~ stay in this test's folder, never the real home.
    env = isolated_env(home)
    # The checkout under test, whatever an editable install elsewhere points at.
    env.update(ENVSNAP_STORE=str(tmp_path / "store"), PYTHONPATH=str(ROOT))
    return env


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    """`envsnap ...` in this process (Cli): for behaviour and messages."""
    return Cli(env=cli_env(tmp_path), cwd=tmp_path)


@pytest.fixture
def cli_process(tmp_path: Path) -> CliProcess:
    """`envsnap ...` as a subprocess (CliProcess), the same HOME, XDG dirs and store."""
    return CliProcess(env=cli_env(tmp_path), cwd=tmp_path)


@pytest.fixture
def ssh_cli(cli: Cli, sshd: Sshd) -> Cli:
    """A CLI whose HOME holds an SSH config, key and known_hosts for the test sshd."""
    sshd.write_home(Path(cli.env["HOME"]))  # cli.env already points HOME and XDG there
    return cli


@dataclass
class OfflineCli(Cli):
    """The real `envsnap` command in a subprocess that no name lookup leaves
    (helpers/offline.py), the same HOME, XDG dirs and store as `cli`."""

    def __call__(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return run_offline(list(args), self.env, self.cwd, timeout)


@pytest.fixture
def offline_cli(cli: Cli) -> OfflineCli:
    """`envsnap ...` where a name that is not in /etc/hosts fails to resolve at once, and
    nothing is sent off this machine; skipped where the namespaces cannot be made."""
    why = offline_available()
    if why is not None:
        pytest.skip(f"no offline namespace: {why}")
    return OfflineCli(env=cli.env, cwd=cli.cwd)


@pytest.fixture
def spawned(monkeypatch: pytest.MonkeyPatch) -> list[subprocess.Popen[bytes]]:
    """Every local command's process, as started (the real spawn, watched)."""
    started: list[subprocess.Popen[bytes]] = []
    from envsnap.hosts import headstart  # loaded only by the tests that watch it

    real = headstart.spawn

    def watched(command: str) -> subprocess.Popen[bytes]:
        started.append(real(command))
        return started[-1]

    monkeypatch.setattr(headstart, "spawn", watched)
    return started
