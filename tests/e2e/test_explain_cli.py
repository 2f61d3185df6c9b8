"""`envsnap explain` through the real CLI: a real git checkout, a real server process
(tests/helpers/toyserver.py, whose speed comes from the checkout's toy_speed.py and its
env), locally
and over the test sshd.

Each case plants its causes between a `good` and a `bad` snapshot taken by `envsnap bench
--serve` (the server's env recorded as a worker), leaves the user's work in the checkout (a
staged and an unstaged edit, an untracked file, an ignored file, a stash of their own), and
checks that explain names the planted cause, and that the checkout is byte-identical after.

Over SSH explain differs from local only in its transport (the agent's login, git and file
writes through the host's shell): the cases where what moves crosses it run both ways (a
cause in code: the checkout moved, stashed and bisected; in the server env: the server
started there with it; in a .pth file: site files written there, the inventory's python),
the others (an interaction, no regression, the refusals, sitecustomize, pip, the ceiling)
only locally, where the search and its verdicts are the same and cost half.
"""
from __future__ import annotations

import base64
import hashlib
import os
import re
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, Cli
from helpers.folded import words
from helpers.gitrepos import git_env, init
from helpers.pythons import (
    OWN_FIRST,
    shadowing_python,
    site_packages,
    stdlib_sitecustomize,
    venv_with_own_sitecustomize,
)
from helpers.terminal import stderr_at_a_terminal

from envsnap.errors import ExitCode
from envsnap.snapshot.provenance import signed, user_key

TOY = ROOT / "tests" / "helpers" / "toyserver.py"
# The client's fastest request: never faster than the server's delay, it hardly moves with
# the load of a shared machine, so "same" is provable from 3 short runs (throughput's noise
# there left "no effect" undecided and asked for re-runs); lower is better.
METRIC = r"latency: min ([0-9.]+) ms"


def speed(slow: str) -> str:
    """toy_speed.py: 0.02 s a request when `slow` holds (env: the server's environ), else
    0.004 s: a 5x gap that survives the noise of a loaded machine."""
    return f"def delay(env):\n    slow = {slow}\n    return 0.02 if slow else 0.004\n"


class Toy:
    """A checkout whose toy_speed.py the server loads, and the commands that bench it."""

    def __init__(self, root: Path, python: str = sys.executable) -> None:
        (root / "home").mkdir(parents=True)
        self.root = root
        self.repo = init(root / "repo", git_env(root / "home"))
        self.good = self.repo.commit("Initial", {
            "toy_speed.py": speed("False"), "README.md": "toy\n", ".gitignore": "*.log\n",
            "config.txt": "threads = 1\n"})
        url = root / "url"
        # -B: the server's import of toy_speed.py writes no __pycache__ into the checkout
        # (the login over SSH has no PYTHONDONTWRITEBYTECODE); files a benchmark writes stay.
        # exec: the server is the process group's leader, which the agent reaps itself when
        # it stops it; a server that sh forks is an orphan once sh dies, and its group lasts
        # until init reaps it (seconds on some machines), at every one of a run's trials.
        self.serve = (f"exec {python} -B {TOY} serve --port 0 --repo {self.repo.path} "
                      f"--url-file {url}")
        self.cmd = f"{sys.executable} {TOY} client --url-file {url} --seconds 0.1"

    def bench(self, cli: Cli, label: str, env: dict[str, str], *extra: str) -> None:
        """A snapshot of the host with its server's env; one run: explain measures both
        states itself and never reads the runs of a snapshot."""
        with_env = Cli(env={**cli.env, **env}, cwd=cli.cwd)
        result = with_env("bench", "local", "--label", label, "--repo", str(self.repo.path),
                          *extra,
                          "--serve", self.serve, "--ready", "listening on", "--cmd", self.cmd,
                          "--metric", METRIC, "--lower-is-better", "--repeat", "1",
                          "--sample-interval", "0")
        assert result.returncode == 0, result.stdout + result.stderr

    def pull(self, slow_at_second: str | None) -> list[str]:
        """Three commits; the second rewrites toy_speed.py when told to."""
        return [self.repo.commit("Refactor the loader", {"loader.py": "LOADER = 1\n"}),
                self.repo.commit("Tune the kernel", {"toy_speed.py": speed(slow_at_second)}
                                 if slow_at_second else {"kernel.py": "K = 2\n"}),
                self.repo.commit("Docs", {"README.md": "toy\nsee docs\n"})]

    def dirty(self) -> None:
        """The user's work: staged and unstaged edits, untracked and ignored files, a stash."""
        self.repo.write("notes.txt", "stashed notes\n")
        self.repo.git("stash", "push", "--include-untracked", "-q", "-m", "my own stash")
        self.repo.write("config.txt", "threads = 1\nstaged = 1\n")
        self.repo.git("add", "config.txt")
        self.repo.write("config.txt", "threads = 1\nstaged = 1\nunstaged = 1\n")
        self.repo.write("mine.txt", "untracked file of mine\n")
        self.repo.write("server.log", "ignored file of mine\n")

    def fingerprint(self) -> tuple[str, ...]:
        """Everything explain must leave as it found it: every file of the worktree (tracked,
        untracked, ignored) with its content, the index, refs, HEAD, the stash list."""
        digest = hashlib.sha256()
        for path in sorted(self.repo.path.rglob("*")):
            if ".git" in path.relative_to(self.repo.path).parts or not path.is_file():
                continue
            digest.update(str(path.relative_to(self.repo.path)).encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
        return (digest.hexdigest(), self.repo.git("symbolic-ref", "HEAD"),
                self.repo.git("show-ref"), self.repo.git("ls-files", "--stage"),
                self.repo.git("stash", "list", "--format=%H %gs"),
                self.repo.git("status", "--porcelain", "--ignored"))


def harmless(out: str, described: str) -> bool:
    """The answer says this difference is no cause: measured alone within the noise, or
    within the noise of a set that held it (not tried alone, or not settled alone)."""
    return any(f"{said}: {described}" in out
               for said in ("no effect", "not tested alone", "not settled alone"))


def explain(cli: Cli, toy: Toy, host: str, *extra: str) -> subprocess.CompletedProcess[str]:
    host_args = () if host == "local" else ("--host", host)
    return cli("explain", "good", "bad", *host_args, "--serve", toy.serve, "--ready",
               "listening on", "--cmd", toy.cmd, "--metric", METRIC, "--lower-is-better",
               "--repeat", "3", "--yes", *extra, timeout=300)


def explain_at_a_terminal(cli: Cli, toy: Toy, *extra: str) -> tuple[int, str, str]:
    """explain in a subprocess whose stderr is a terminal: its exit, stdout, and all the
    terminal was sent (the status line rewritten in place)."""
    return stderr_at_a_terminal(
        [sys.executable, "-m", "envsnap", "explain", "good", "bad", "--serve", toy.serve,
         "--ready", "listening on", "--cmd", toy.cmd, "--metric", METRIC, "--lower-is-better",
         "--repeat", "3", "--yes", *extra], cli.cwd, cli.env)


def where(request: pytest.FixtureRequest, over_ssh: bool) -> tuple[Cli, str]:
    """The CLI and the host to explain on. Over SSH the snapshots are still taken locally
    (the env of a server started there is what differs); explain runs through the sshd."""
    if not over_ssh:
        return request.getfixturevalue("cli"), "local"
    return request.getfixturevalue("ssh_cli"), request.getfixturevalue("sshd").addresses[0]


# where the transport matters (module docstring): the other cases run locally only
BOTH = pytest.mark.parametrize("over_ssh", [False, True], ids=["local", "ssh"])


@BOTH
def test_a_single_cause_in_code(request: pytest.FixtureRequest, over_ssh: bool,
                                tmp_path: Path) -> None:
    cli, host = where(request, over_ssh)
    toy = Toy(tmp_path / "toy")
    toy.bench(cli, "good", {"NCCL_DEBUG": "WARN"})
    pulled = toy.pull(slow_at_second="True")
    toy.bench(cli, "bad", {"NCCL_DEBUG": "INFO"})
    toy.dirty()
    before = toy.fingerprint()
    result = explain(cli, toy, host)
    assert result.returncode == 1, result.stdout + result.stderr
    out = words(result.stdout)   # folded to 80 columns: read as words
    repo = toy.repo.path
    assert (f"1. {repo}: 3 commits {toy.good[:12]}..{toy.repo.head()[:12]} 2. {repo}: the "
            "uncommitted patch added 3. NCCL_DEBUG=INFO in the server env (was WARN) ") in out
    assert f"cause: {repo}: 3 commits {toy.good[:12]}..{toy.repo.head()[:12]}, alone " in out
    # the range, a cause alone, bisected at GOOD's state: which of its commits
    assert "bisect the 3 commits at GOOD's state" in out
    assert f"first bad commit: {pulled[1]} Tune the kernel toy_speed.py " in out
    # its good end is explain's own runs at GOOD's state, and its runs are in the count
    assert "good: measured" in out, out   # its own ends: explain's are as old as the search
    assert "recorded in the good snapshot" not in out
    assert re.search(r"\(\d+ invocations, \d+ runs in all: \d+ invocations and \d+ runs of "
                     r"them by the bisect of the commits\)", out), out
    assert harmless(out, "NCCL_DEBUG=INFO in the server env (was WARN)")
    assert harmless(out, f"{repo}: the uncommitted patch added")
    assert toy.fingerprint() == before


@BOTH
def test_a_single_cause_in_the_server_env(request: pytest.FixtureRequest, over_ssh: bool,
                                          tmp_path: Path) -> None:
    cli, host = where(request, over_ssh)
    toy = Toy(tmp_path / "toy")
    toy.repo.commit("Read the protocol", {"toy_speed.py": speed('env.get("NCCL_PROTO") != "LL"')})
    toy.bench(cli, "good", {"NCCL_PROTO": "LL"})
    toy.pull(slow_at_second=None)
    toy.bench(cli, "bad", {})
    toy.dirty()
    before = toy.fingerprint()
    result = explain(cli, toy, host)
    assert result.returncode == 1, result.stdout + result.stderr
    out = words(result.stdout)
    assert "cause: NCCL_PROTO=LL missing from the server env, alone " in out
    assert harmless(out, f"{toy.repo.path}: 3 commits")
    assert toy.fingerprint() == before


def test_two_differences_that_only_together_slow_it(cli: Cli, tmp_path: Path) -> None:
    """The pulled code is slow only with NCCL_ALGO=Tree, which the new server env sets."""
    host = "local"
    toy = Toy(tmp_path / "toy")
    toy.bench(cli, "good", {})
    toy.pull(slow_at_second='env.get("NCCL_ALGO") == "Tree"')
    toy.bench(cli, "bad", {"NCCL_ALGO": "Tree"})
    before = toy.fingerprint()
    result = explain(cli, toy, host)
    assert result.returncode == 1, result.stdout + result.stderr
    assert (f"cause, only together: {toy.repo.path}: 3 commits {toy.good[:12]}.."
            f"{toy.repo.head()[:12]} + NCCL_ALGO=Tree added to the server env, together ") \
        in words(result.stdout)
    assert "cause:" not in result.stdout
    assert toy.fingerprint() == before


def test_differences_without_a_regression(cli: Cli, tmp_path: Path) -> None:
    host = "local"
    toy = Toy(tmp_path / "toy")
    toy.bench(cli, "good", {"NCCL_DEBUG": "WARN"})
    toy.pull(slow_at_second=None)
    toy.bench(cli, "bad", {"NCCL_DEBUG": "INFO"})
    toy.dirty()
    before = toy.fingerprint()
    result = explain(cli, toy, host)
    assert result.returncode == 0, result.stdout + result.stderr
    # a loaded machine may leave a few percent undecided: never a cause, either way
    out = words(result.stdout)
    assert ("no regression between GOOD's state and the state now" in out or
            "can't tell whether there is a regression" in out), result.stdout
    assert "cause:" not in result.stdout and "only together" not in result.stdout
    assert toy.fingerprint() == before


def test_refused_before_anything_changes(cli: Cli, tmp_path: Path) -> None:
    """Nothing to put back, an unknown label, no --yes without a terminal: one line, exit 2,
    the checkout untouched."""
    toy = Toy(tmp_path / "toy")
    toy.bench(cli, "good", {})
    toy.bench(cli, "bad", {})
    same = explain(cli, toy, "local")
    assert same.returncode == 2, same.stdout + same.stderr
    assert "nothing that explain can put back differs between 'good' and local now" \
        in same.stderr
    unknown = cli("explain", "good", "nope", "--cmd", toy.cmd, "--metric", METRIC, "--yes")
    assert unknown.returncode == 2 and "nope" in unknown.stderr
    toy.pull(slow_at_second=None)
    toy.dirty()
    before = toy.fingerprint()
    unasked = cli("explain", "good", "bad", "--serve", toy.serve, "--ready", "listening on",
                  "--cmd", toy.cmd, "--metric", METRIC)
    assert unasked.returncode == ExitCode.DECLINED, unasked.stdout + unasked.stderr
    assert unasked.stderr.startswith("envsnap: declined: nothing was changed on local: ")
    assert "pass --yes" in unasked.stderr and "Traceback" not in unasked.stderr
    assert toy.fingerprint() == before


def test_another_host_is_refused_without_force_host(cli: Cli, tmp_path: Path) -> None:
    toy = Toy(tmp_path / "toy")
    toy.bench(cli, "good", {})
    toy.pull(slow_at_second=None)
    toy.bench(cli, "bad", {})
    good = Path(cli.env["ENVSNAP_STORE"]) / "good.yaml"
    document = yaml.safe_load(good.read_text())
    document["facts"]["system"]["hostname"] = "elsewhere"
    good.write_text(yaml.safe_dump(signed(document, user_key(cli.env))))
    before = toy.fingerprint()
    result = explain(cli, toy, "local")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "was taken on elsewhere" in result.stderr
    assert toy.fingerprint() == before


def test_a_foreign_snapshot_needs_trust(cli: Cli, tmp_path: Path) -> None:
    """A snapshot edited by hand is foreign: its patch and env are not put in place."""
    toy = Toy(tmp_path / "toy")
    toy.bench(cli, "good", {})
    toy.pull(slow_at_second=None)
    toy.bench(cli, "bad", {})
    good = Path(cli.env["ENVSNAP_STORE"]) / "good.yaml"
    document = yaml.safe_load(good.read_text())
    document["facts"]["env"]["processes"] = {}
    good.write_text(yaml.safe_dump(document))
    before = toy.fingerprint()
    result = explain(cli, toy, "local")
    assert result.returncode == ExitCode.DECLINED, result.stdout + result.stderr
    assert "snapshot 'good' is foreign (content changed)" in result.stderr
    assert "--trust-foreign" in result.stderr and toy.fingerprint() == before


def test_ctrl_c_puts_the_checkout_and_the_work_back(cli: Cli, tmp_path: Path) -> None:
    """Interrupted in the middle of a trial (a state with some differences in place): the
    checkout, its branch, the user's work and stashes come back; no lock, no server left."""
    toy = Toy(tmp_path / "toy")
    toy.bench(cli, "good", {"NCCL_DEBUG": "WARN"})
    toy.pull(slow_at_second="True")
    toy.bench(cli, "bad", {"NCCL_DEBUG": "INFO"})
    toy.dirty()
    before = toy.fingerprint()
    running = subprocess.Popen(
        [sys.executable, "-m", "envsnap", "explain", "good", "bad", "--serve", toy.serve,
         "--ready", "listening on", "--cmd", toy.cmd, "--metric", METRIC, "--lower-is-better",
         "--repeat", "3", "--yes"], cwd=cli.cwd, env=cli.env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    assert running.stdout is not None
    seen = []
    for line in running.stdout:          # interrupt once both endpoints are measured
        seen.append(line)
        if line.startswith("the state now: median"):
            running.send_signal(signal.SIGINT)
            break
    out, err = running.communicate(timeout=120)
    said = words("".join(seen) + out)   # folded to 80 columns
    assert running.returncode == 130, said + err
    assert "envsnap: interrupted: local: " in err and " is as explain found it (" in err, err
    assert "run the same envsnap explain again to start over\n" in err
    assert "HEAD back to main at" in said and "your work is back" in said
    assert toy.fingerprint() == before
    assert not list((Path(cli.env["HOME"]) / ".cache" / "envsnap").glob("locks/*.lock"))
    servers = subprocess.run(["pgrep", "-f", "--", f"--url-file {tmp_path}"],
                             capture_output=True, text=True)
    assert servers.returncode == 1 and servers.stdout == "", servers.stdout + servers.stderr


def test_a_single_cause_in_sitecustomize(cli: Cli, tmp_path: Path) -> None:
    """The incident's rewritten sitecustomize.py: the server's python sets a variable in its
    own process there (one no env collector records). Put back for the trials that need it,
    then the file is as found and no backup of explain's is left."""
    # a python of its own (the suite's venv is shared) whose own sitecustomize.py runs
    python = str(venv_with_own_sitecustomize(tmp_path / "venv"))
    site = site_packages(Path(python)) / "sitecustomize.py"
    toy = Toy(tmp_path / "toy", python)
    toy.repo.commit("Read the tuning", {"toy_speed.py": speed('env.get("TOY_TUNED") != "1"')})
    site.write_text('import os\nos.environ["TOY_TUNED"] = "1"\n')
    toy.bench(cli, "good", {}, "--python", python)
    site.write_text("import os\n")   # rewritten: the variable is gone
    toy.pull(slow_at_second=None)
    toy.bench(cli, "bad", {}, "--python", python)
    before = toy.fingerprint()
    result = explain(cli, toy, "local")
    assert result.returncode == 1, result.stdout + result.stderr
    out = words(result.stdout)
    assert f"cause: sitecustomize changed ({site}), alone " in out, result.stdout
    assert harmless(out, f"{toy.repo.path}: 3 commits")
    assert "sitecustomize put back as it was" in out
    assert site.read_text() == "import os\n" and toy.fingerprint() == before
    backups = Path(cli.env["HOME"]) / ".cache" / "envsnap" / "restore-backup"
    assert not list(backups.glob("explain-*"))


def test_a_sitecustomize_debians_python_would_shadow_is_not_switched(cli: Cli,
                                                                     tmp_path: Path) -> None:
    """GOOD ran the venv's own sitecustomize.py (a startup .pth put it first); now Debian's
    stdlib one shadows it. Switching the venv's file would measure nothing, the stdlib's is
    every python's: explain stops before it asks or moves anything, in one line."""
    python = str(venv_with_own_sitecustomize(tmp_path / "venv", shadowing_python()))
    site = site_packages(Path(python)) / "sitecustomize.py"
    stdlib = str(stdlib_sitecustomize(python))
    toy = Toy(tmp_path / "toy", python)
    site.write_text('import os\nos.environ["TOY_TUNED"] = "1"\n')
    toy.bench(cli, "good", {}, "--python", python)
    site.write_text("import os\n")
    toy.bench(cli, "bad", {}, "--python", python)
    (site.parent / OWN_FIRST).unlink()
    before = (toy.fingerprint(), Path(stdlib).read_bytes())
    result = explain(cli, toy, "local")
    assert result.returncode == 2, result.stdout + result.stderr
    assert (f"local: sitecustomize: this python loads {stdlib} (-> {os.path.realpath(stdlib)}) "
            "(host-wide: loaded by every python3.") in result.stderr, result.stderr
    assert ("not written: --host-wide writes it; or ways that work: a .pth startup line"
            in result.stderr) and "Traceback" not in result.stderr
    assert (toy.fingerprint(), Path(stdlib).read_bytes()) == before


def toy_wheel(folder: Path, version: str, slow: bool) -> None:
    """A wheel of the package `toyspeedpkg` made by hand (a wheel is a zip with a RECORD)."""
    info = f"toyspeedpkg-{version}.dist-info"
    files = {"toyspeedpkg.py": f"SLOW = {slow}\n",
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: toyspeedpkg\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\n"
                              "Tag: py3-none-any\n"}
    record = [f"{name},sha256="
              f"{base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).decode().rstrip('=')}"
              f",{len(text.encode())}" for name, text in files.items()]
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    folder.mkdir(exist_ok=True)
    with zipfile.ZipFile(folder / f"toyspeedpkg-{version}-py3-none-any.whl", "w") as wheel:
        for name, text in files.items():
            wheel.writestr(name, text)


def test_a_single_cause_in_a_package_version_with_pip(cli: Cli, tmp_path: Path) -> None:
    """--pip: a package upgraded since GOOD is pinned back for the trials that need it (pip,
    from a local folder of wheels), and pinned to the version found at the end."""
    venv = tmp_path / "venv"   # a python of its own: the suite's venv is shared
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    toy_wheel(tmp_path / "wheels", "1.0", slow=False)
    toy_wheel(tmp_path / "wheels", "2.0", slow=True)
    offline = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(tmp_path / "wheels"),
               "PIP_DISABLE_PIP_VERSION_CHECK": "1"}

    def install(version: str) -> None:
        subprocess.run([python, "-m", "pip", "install", "-q", f"toyspeedpkg=={version}"],
                       env={**os.environ, **offline}, check=True)

    def version_now() -> str:
        return subprocess.run([python, "-c", "import importlib.metadata as m; "
                               "print(m.version('toyspeedpkg'))"], capture_output=True,
                              text=True, check=True).stdout.strip()

    toy = Toy(tmp_path / "toy", python)
    toy.repo.commit("Use the package", {"toy_speed.py": speed("__import__('toyspeedpkg').SLOW")})
    install("1.0")
    toy.bench(cli, "good", {}, "--python", python)
    install("2.0")
    toy.pull(slow_at_second=None)
    toy.bench(cli, "bad", {}, "--python", python)
    result = explain(Cli(env={**cli.env, **offline}, cwd=cli.cwd), toy, "local", "--pip")
    assert result.returncode == 1, result.stdout + result.stderr
    out = words(result.stdout)
    assert "cause: package toyspeedpkg 1.0 -> 2.0, alone " in out, result.stdout
    assert harmless(out, f"{toy.repo.path}: 3 commits")
    # pinned back at the end only where the last trial left GOOD's version in place: the
    # version found is there at the end either way (below)
    assert version_now() == "2.0"


def test_the_ceiling_is_printed_first_and_never_passed(cli: Cli, tmp_path: Path) -> None:
    """--max-invocations 2: the endpoints only; the search stops there and says why, the
    regression still real (exit 1), the checkout as it was."""
    toy = Toy(tmp_path / "toy")
    toy.repo.commit("Read the protocol", {"toy_speed.py": speed('env.get("NCCL_PROTO") != "LL"')})
    toy.bench(cli, "good", {"NCCL_PROTO": "LL"})
    toy.pull(slow_at_second=None)
    toy.bench(cli, "bad", {})
    before = toy.fingerprint()
    code, out, screen = explain_at_a_terminal(cli, toy, "--max-invocations", "2")
    assert code == 1, out + screen
    out = words(out)
    # the status line, live on the terminal: the trial, the invocations used of the bound
    assert re.search(r"explain: trial 1, 0 of 2 invocations used, \d+s elapsed, ETA after "
                     r"the first trial", screen), screen
    assert re.search(r"explain: trial 2, 1 of 2 invocations used, \d+s elapsed, ETA at most "
                     r"~\d+s", screen), screen
    assert screen.endswith("\r\x1b[K")                # erased at the end
    assert "never more than 2 (--max-invocations)" in out
    assert "(2 invocations, 6 runs)" in out
    assert "can't tell: NCCL_PROTO=LL missing from the server env (2 invocations reached, " \
           "the ceiling)" in out
    assert "the ceiling stopped the search (raise --max-invocations)" in out
    assert "cause:" not in out
    assert toy.fingerprint() == before


def site_fingerprint(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under a site folder, with its content and mode."""
    return {str(path.relative_to(folder)): (path.read_bytes(), path.stat().st_mode)
            for path in sorted(folder.rglob("*")) if path.is_file()}


@BOTH
def test_a_single_cause_in_the_startup_lines_of_a_pth_file(request: pytest.FixtureRequest,
                                                           over_ssh: bool,
                                                           tmp_path: Path) -> None:
    """A .pth line that site.py runs at startup sets a variable in the server's own process
    (no env collector records it). Between good and bad it was dropped from the file, whose
    sys.path line stays: explain puts GOOD's line back beside it for the trials that need it;
    a .pth added since (startup lines only) is removed for GOOD's state. Then both files are
    byte for byte as found (mode too), and no backup of explain's is left. Over SSH the
    inventory names the venv's python as the host's."""
    cli, host = where(request, over_ssh)
    venv = tmp_path / "venv"   # a python of its own: the suite's venv is shared
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    folder = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path("
                                  "'purelib'))"], capture_output=True, text=True,
                                 check=True).stdout.strip())
    pth = folder / "toy_tuning.pth"
    toy = Toy(tmp_path / "toy", python)
    toy.repo.commit("Read the tuning", {"toy_speed.py": speed('env.get("TOY_TUNED") != "1"')})
    pth.write_text(f"{tmp_path}/toy-extra\nimport os; os.environ.setdefault('TOY_TUNED', '1')\n")
    toy.bench(cli, "good", {}, "--python", python)
    pth.write_text(f"# the toy's own folder\n{tmp_path}/toy-extra")   # the startup line gone
    pth.chmod(0o600)
    added = folder / "toy_noise.pth"
    added.write_text("import os\n")
    toy.pull(slow_at_second=None)
    toy.bench(cli, "bad", {}, "--python", python)
    before, site_before = toy.fingerprint(), site_fingerprint(folder)
    extra: tuple[str, ...] = ()
    if over_ssh:
        inventory = tmp_path / "inventory.yml"
        inventory.write_text(yaml.safe_dump({"all": {"hosts": {host: {"python": python}}}}))
        extra = ("--inventory", str(inventory))
    result = explain(cli, toy, host, *extra)
    assert result.returncode == 1, result.stdout + result.stderr
    out = words(result.stdout)
    # the code that every start of that python will run is shown before anything moves
    assert "GOOD's: import os; os.environ.setdefault('TOY_TUNED', '1') " in out, out
    assert f"cause: startup lines of {pth} (1 line changed), alone " in out, out
    assert harmless(out, f"{toy.repo.path}: 3 commits"), out
    assert harmless(out, f"startup lines of {added} (1 line changed)"), out
    assert f"{host}: 2 .pth files put back as found" in out
    assert site_fingerprint(folder) == site_before and toy.fingerprint() == before
    backups = Path(cli.env["HOME"]) / ".cache" / "envsnap" / "restore-backup"
    assert not list(backups.glob("explain-*"))


# Where the system python reads .pth files from that no venv of it does: what is written
# there runs in every start of every python3.X of the host.
SYSTEM_SITE = Path("/usr/lib/python3/dist-packages")


def system_python_with_site() -> str:
    """The host's own python3 whose site-packages hold SYSTEM_SITE, where this user may
    write (root on a shared box); else the test is skipped with the reason."""
    python = "/usr/bin/python3"
    if not os.access(python, os.X_OK) or not os.access(SYSTEM_SITE, os.W_OK):
        pytest.skip(f"needs /usr/bin/python3 and {SYSTEM_SITE} writable (root)")
    folders = subprocess.run([python, "-c", "import site; print('\\n'.join(site."
                              "getsitepackages()))"], capture_output=True, text=True,
                             check=True).stdout.split()
    if str(SYSTEM_SITE) not in folders:
        pytest.skip(f"/usr/bin/python3 does not read {SYSTEM_SITE}")
    return python


# Both cases plant a .pth where every python3 of the host reads it: on parallel workers each
# case's snapshots would hold the other's file too; one worker runs them one after the other.
@pytest.mark.xdist_group("system-site")
@BOTH
def test_a_host_wide_pth_is_switched_only_with_host_wide(request: pytest.FixtureRequest,
                                                         over_ssh: bool, tmp_path: Path) -> None:
    """A .pth in the system python's site-packages, which every python3.X of the host runs,
    lost a startup line between GOOD and BAD. Without --host-wide explain stops before it
    asks or moves anything, in one line (exit 2), the file untouched; with it, the plan says
    host-wide under that difference, the trials switch the line, and the file is put back
    byte for byte. The variable's name is this run's own: every python3 of the host runs
    the line while the file is there. Over SSH the inventory names that python as the
    host's."""
    cli, host = where(request, over_ssh)
    python = system_python_with_site()
    tuned = f"TOY_TUNED_{os.urandom(6).hex().upper()}"
    pth = SYSTEM_SITE / f"envsnap-test-{tuned.lower()}.pth"
    try:
        toy = Toy(tmp_path / "toy", python)
        toy.repo.commit("Read the tuning", {"toy_speed.py": speed(f'env.get("{tuned}") != "1"')})
        pth.write_text(f"import os; os.environ.setdefault('{tuned}', '1')\n")
        toy.bench(cli, "good", {}, "--python", python)
        pth.write_text("# tuning off\n")
        toy.bench(cli, "bad", {}, "--python", python)
        before = (toy.fingerprint(), pth.read_bytes(), pth.stat().st_mode)
        extra: tuple[str, ...] = ()
        if over_ssh:
            inventory = tmp_path / "inventory.yml"
            inventory.write_text(yaml.safe_dump({"all": {"hosts": {host: {"python": python}}}}))
            extra = ("--inventory", str(inventory))
        refused = explain(cli, toy, host, *extra)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        version = ".".join(map(str, sys.version_info[:2])) if python == sys.executable else \
            subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                           capture_output=True, text=True, check=True).stdout.strip()
        assert refused.stderr == (
            f"envsnap: error: {host}: {pth} is not in this python's venv (host-wide: loaded by "
            f"every python{version} on this host): its startup lines are not switched: "
            "--host-wide switches them (put back at the end)\n"), refused.stderr
        assert "explain on" not in refused.stdout
        assert (toy.fingerprint(), pth.read_bytes(), pth.stat().st_mode) == before
        result = explain(cli, toy, host, *extra, "--host-wide")
        assert result.returncode == 1, result.stdout + result.stderr
        out = words(result.stdout)
        assert (f"startup lines of {pth} (1 line changed) GOOD's: import os; "
                f"os.environ.setdefault('{tuned}', '1') host-wide: loaded by every "
                f"python{version} on this host: switched as --host-wide asked, put back at "
                "the end") in out, out
        assert f"cause: startup lines of {pth} (1 line changed), alone " in out, out
        assert f"{host}: 1 .pth file put back as found" in out
        assert (toy.fingerprint(), pth.read_bytes(), pth.stat().st_mode) == before
    finally:
        pth.unlink(missing_ok=True)
