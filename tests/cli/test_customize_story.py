"""Which sitecustomize runs, as Python sees it, through the real CLI: `show` and `diff` say
it in words, and restore never writes a file every python of the host loads unless asked.

On Debian's and Ubuntu's own python3 the standard library's sitecustomize.py (a link into
/etc) comes before a venv's site-packages: the venv's own file never runs. Those cases run a
venv of that python (helpers.pythons.shadowing_python); the case where the venv's file runs,
a venv of another (unshadowed_python). Each is skipped where this machine has no such python.
"""
from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import Cli, unique_marker
from helpers.gitrepos import Story
from helpers.pythons import (
    OWN_FIRST,
    make_venv,
    shadowing_python,
    site_packages,
    stdlib_sitecustomize,
    unshadowed_python,
    venv_with_own_sitecustomize,
)
from helpers.sshd import Sshd

TUNED = "import os\nos.environ['NCCL_ALGO'] = 'Ring'\n"
over_ssh = pytest.mark.parametrize("over_ssh", [False, True], ids=["local", "ssh"])


def pick(request: pytest.FixtureRequest, over_ssh: bool) -> tuple[Cli, str]:
    if not over_ssh:
        return request.getfixturevalue("cli"), "local"
    sshd: Sshd = request.getfixturevalue("sshd")
    return request.getfixturevalue("ssh_cli"), sshd.addresses[0]


def words(text: str) -> str:
    """`show` and `diff` fold their lines at 80 columns (not a terminal): compare the
    words."""
    return " ".join(text.split())


def linked(path: str) -> str:
    real = os.path.realpath(path)
    return f"{path} (-> {real})" if real != path else path


def ok(result: subprocess.CompletedProcess[str], *codes: int) -> str:
    assert result.returncode in (0, *codes), result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    return words(result.stdout)


@contextmanager
def worker(marker: str) -> Iterator[int]:
    """A python worker started with -s and PYTHONSAFEPATH=1 (both change its startup)."""
    proc = subprocess.Popen([sys.executable, "-s", "-c", "import time; time.sleep(60)", marker],
                            env={"PATH": "/usr/bin:/bin", "PYTHONSAFEPATH": "1"})
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


@over_ssh
def test_show_and_diff_say_a_venv_sitecustomize_of_debians_python_never_runs(
        request: pytest.FixtureRequest, over_ssh: bool, tmp_path: Path) -> None:
    cli, host = pick(request, over_ssh)
    python = make_venv(tmp_path / "venv", shadowing_python())
    stdlib = str(stdlib_sitecustomize(str(python)))
    (site_packages(python) / "sitecustomize.py").write_text(TUNED)
    marker = unique_marker("customize")
    with worker(marker) as pid:
        ok(cli("capture", host, "--label", "good", "--python", str(python), "--proc", marker))
    shown = words(ok(cli("show", "good")))
    assert (f"venv sitecustomize.py is shadowed by {linked(stdlib)}: it never runs"
            in shown), shown
    assert f"sitecustomize present: {linked(stdlib)}, sha256" in shown
    assert f"worker {pid} runs with -s: no user site: usercustomize never runs" in shown
    assert f"worker {pid} runs with PYTHONSAFEPATH=1: safe path" in shown

    (site_packages(python) / "sitecustomize.py").write_text(TUNED.replace("Ring", "Tree"))
    ok(cli("capture", host, "--label", "edited", "--python", str(python)))
    said = ok(cli("diff", "good", "edited", "--section", "python_env"), 1)
    assert (f"venv sitecustomize.py changed, but it is shadowed by {linked(stdlib)}: it never "
            "runs, so the change has no effect") in said, said
    assert "nothing in python_env that affects performance changed" in said


def test_show_and_diff_where_the_venvs_own_sitecustomize_runs(cli: Cli, tmp_path: Path) -> None:
    python = make_venv(tmp_path / "venv", unshadowed_python())
    own = site_packages(python) / "sitecustomize.py"
    own.write_text(TUNED)
    ok(cli("capture", "local", "--label", "good", "--python", str(python)))
    shown = words(ok(cli("show", "good")))
    assert f"sitecustomize present: {own}, sha256" in shown and "imported; sets NCCL_ALGO" \
        in shown, shown
    assert "shadowed" not in shown
    own.write_text(TUNED.replace("Ring", "Tree"))
    ok(cli("capture", "local", "--label", "edited", "--python", str(python)))
    said = ok(cli("diff", "good", "edited", "--section", "python_env"), 1)
    assert "sitecustomize changed: it runs in every python process" in said, said
    assert "no effect" not in said and "moved from" not in said


def test_diff_says_first_that_the_sitecustomize_that_runs_moved(cli: Cli,
                                                                tmp_path: Path) -> None:
    """The venv's own file ran (a startup .pth put its site-packages first); the .pth gone,
    Debian's stdlib one runs in its place."""
    python = venv_with_own_sitecustomize(tmp_path / "venv", shadowing_python())
    stdlib = str(stdlib_sitecustomize(str(python)))
    own = site_packages(python) / "sitecustomize.py"
    own.write_text(TUNED)
    ok(cli("capture", "local", "--label", "good", "--python", str(python)))
    (site_packages(python) / OWN_FIRST).unlink()
    ok(cli("capture", "local", "--label", "bad", "--python", str(python)))
    result = cli("diff", "good", "bad", "--section", "python_env")
    said = ok(result, 1)
    summary = words(result.stdout.split("\n\n")[1])   # the verdict, before the rows
    assert summary.startswith(f"the sitecustomize that runs moved from {own} to "
                              f"{linked(stdlib)}; sitecustomize changed"), said
    assert f"venv sitecustomize.py no longer runs: it is now shadowed by {linked(stdlib)}" \
        in said


@over_ssh
def test_restore_never_writes_a_host_wide_sitecustomize_unasked(
        request: pytest.FixtureRequest, over_ssh: bool, story: Story, tmp_path: Path) -> None:
    """GOOD ran the venv's own sitecustomize; now Debian's stdlib one shadows it. Writing the
    venv's file would change nothing; writing the stdlib one (through its link into /etc)
    would change every python3.X of the host: neither happens, the plan says why in one
    line and what works, and --host-wide names the host-wide write."""
    cli, host = pick(request, over_ssh)
    python = venv_with_own_sitecustomize(tmp_path / "venv", shadowing_python())
    stdlib = str(stdlib_sitecustomize(str(python)))
    before = Path(stdlib).read_bytes()
    own = site_packages(python) / "sitecustomize.py"
    own.write_text(TUNED)
    ok(cli("capture", host, "--label", "good", "--repo", str(story.checkout.path),
           "--python", str(python)))
    (site_packages(python) / OWN_FIRST).unlink()

    for args in (("--check",), ("--yes",)):
        stopped = cli("restore", "good", *args)
        said = words(stopped.stdout + stopped.stderr)
        assert stopped.returncode == 3 and "Traceback" not in said, said
        assert (f"write back sitecustomize: the venv's own {own} would be shadowed by "
                f"{linked(stdlib)}: it would never run; not written: ways that work: a .pth "
                "startup line in the venv's site-packages, usercustomize where the user site "
                "is on, or the server's env through --serve; or --host-wide writes "
                f"{linked(stdlib)} (host-wide: loaded by every python3.") in said, said
        assert "restore.yml" not in said
    planned = ok(cli("restore", "good", "--check", "--host-wide"), 1)
    assert (f"would update {os.path.realpath(stdlib)} (host-wide: loaded by every python3."
            in planned), planned
    assert Path(stdlib).read_bytes() == before and own.read_text() == TUNED


@pytest.fixture
def story(tmp_path: Path) -> Story:
    return Story(tmp_path / "story")


def test_restore_writes_the_venvs_own_sitecustomize_where_it_runs(cli: Cli, story: Story,
                                                                  tmp_path: Path) -> None:
    python = make_venv(tmp_path / "venv", unshadowed_python())
    own = site_packages(python) / "sitecustomize.py"
    own.write_text(TUNED)
    ok(cli("capture", "local", "--label", "good", "--repo", str(story.checkout.path),
           "--python", str(python)))
    own.write_text("import os\n")
    restored = ok(cli("restore", "good", "--yes"))
    assert own.read_text() == TUNED and f"will update {own}" in restored, restored
    assert "host-wide" not in restored


def test_a_playbooks_env_file_never_writes_a_host_wide_sitecustomize_unasked(
        cli: Cli, tmp_path: Path) -> None:
    """The story playbook's task, with `python:` a venv of Debian's python: the file that
    would run is the stdlib's, every python3.X of the host loads it, so the task stops in
    one line; `format: pth` is the way that works there."""
    python = make_venv(tmp_path / "venv", shadowing_python())
    stdlib = str(stdlib_sitecustomize(str(python)))
    before = Path(stdlib).read_bytes()
    task = f"env_file: {{python: {python}, env: {{NCCL_ALGO: Ring}}}}"
    (tmp_path / "pb.yml").write_text(f"- hosts: local\n  tasks:\n    - {task}\n")
    for mode in (("--check",), ()):
        stopped = cli("play", str(tmp_path / "pb.yml"), *mode)
        assert stopped.returncode == 3, stopped.stdout + stopped.stderr
        assert (f"failed: [local]: {python}'s own sitecustomize.py would be shadowed by "
                f"{linked(stdlib)}: it would never run; not written; what works: format: pth"
                in stopped.stdout), stopped.stdout
        assert f"host_wide: true writes {linked(stdlib)}, host-wide: loaded by every " \
            "python3." in stopped.stdout
    assert Path(stdlib).read_bytes() == before
    (tmp_path / "pb.yml").write_text(f"- hosts: local\n  tasks:\n    - {task[:-1]}, "
                                     "format: pth}\n")
    ok(cli("play", str(tmp_path / "pb.yml")))
    ran = subprocess.run([str(python), "-c", "import os; print(os.environ['NCCL_ALGO'])"],
                         capture_output=True, text=True, check=True, env={"PATH": "/usr/bin"})
    assert ran.stdout == "Ring\n" and Path(stdlib).read_bytes() == before
