"""The suite is hermetic: sshd tests carry the `ssh` marker, and a login through the test
sshd lives in the suite's own home, not in the real home of the user running the tests."""
from __future__ import annotations

import ast
import os
import pwd
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ROOT, Cli
from helpers.sshd import Sshd

TESTS = ROOT / "tests"


def collected(marker: str) -> set[str]:
    """Node ids of the tests that `-m marker` selects (collection only, no test runs)."""
    result = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                             "-p", "no:cacheprovider", "-m", marker, str(TESTS)],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return {line.split("::", 1)[1] for line in result.stdout.splitlines() if "::" in line}


def all_test_functions() -> Iterator[tuple[ast.FunctionDef, set[str]]]:
    """Every test function of the suite, read from the source, with its parameter names."""
    for module in TESTS.rglob("test_*.py"):
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                yield node, {arg.arg for arg in node.args.args}


def sshd_test_names() -> set[str]:
    """Tests whose parameters ask for the test sshd: the marker hook must find each of them
    without being told."""
    return {node.name for node, params in all_test_functions() if params & {"sshd", "ssh_cli"}}


def test_a_test_that_picks_the_sshd_at_run_time_says_so_in_over_ssh() -> None:
    # The hook sees fixtures asked for at run time (request.getfixturevalue) only through
    # the over_ssh parameter: a test that asks for them another way would go unmarked.
    for node, params in all_test_functions():
        asks = any(isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                   and call.func.attr == "getfixturevalue" for call in ast.walk(node))
        assert not asks or "over_ssh" in params, node.name


def test_not_ssh_deselects_every_test_that_uses_the_sshd() -> None:
    with_ssh, without_ssh = collected("ssh"), collected("not ssh")
    assert with_ssh and without_ssh and not with_ssh & without_ssh
    by_name = {node.split("[", 1)[0] for node in with_ssh}
    assert sshd_test_names() <= by_name
    assert not {node.split("[", 1)[0] for node in without_ssh} & sshd_test_names()
    # tests that pick the sshd at run time (request.getfixturevalue) by their over_ssh case
    assert any(node.endswith("-ssh]") or "[ssh" in node for node in with_ssh)
    assert not any("[ssh" in node or "-ssh]" in node for node in without_ssh)


def test_the_test_process_itself_has_no_real_home(isolated_home: Path) -> None:
    # tasks that run in-process on `local` (tests/unit/playbook/test_playbook_tasks.py)
    # write under ~
    real_home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    assert Path.home() == isolated_home != real_home
    assert Path(os.environ["XDG_CACHE_HOME"]).is_relative_to(isolated_home)


def test_the_cli_gets_its_own_home_and_xdg_dirs(cli: Cli) -> None:
    home = Path(cli.env["HOME"])
    for name in ("XDG_CACHE_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME"):
        assert Path(cli.env[name]).is_relative_to(home), name
    assert "SSH_AUTH_SOCK" not in cli.env


def test_a_login_through_the_test_sshd_lives_in_the_suite_home(ssh_cli: Cli,
                                                               sshd: Sshd) -> None:
    config = Path(ssh_cli.env["HOME"]) / ".ssh" / "config"
    shell = subprocess.run(["ssh", "-F", str(config), "-o", "BatchMode=yes", sshd.addresses[0],
                            'printf "%s\\n" "$HOME" "$XDG_CACHE_HOME" "$XDG_STATE_HOME"'],
                           env=ssh_cli.env, capture_output=True, text=True, timeout=60)
    assert shell.returncode == 0, shell.stderr
    assert shell.stdout.split() == [str(sshd.host_home), str(sshd.host_home / ".cache"),
                                    str(sshd.host_home / ".local" / "state")]
    # sftp (the agent upload, patches) starts there too: a relative path lands in the suite
    sftp = subprocess.run(["sftp", "-F", str(config), "-b", "-", sshd.addresses[0]],
                          input="pwd\n", env=ssh_cli.env, capture_output=True, text=True,
                          timeout=60)
    assert sftp.returncode == 0, sftp.stderr
    assert f"Remote working directory: {sshd.host_home}" in sftp.stdout


@pytest.mark.parametrize("over_ssh", [False, True], ids=["local", "ssh"])
def test_capture_unpacks_the_agent_in_the_isolated_home(request: pytest.FixtureRequest,
                                                        over_ssh: bool) -> None:
    cli: Cli = request.getfixturevalue("ssh_cli" if over_ssh else "cli")
    if over_ssh:
        sshd: Sshd = request.getfixturevalue("sshd")
        address, home = sshd.addresses[2], sshd.host_home
    else:
        address, home = "local", Path(cli.env["HOME"])
    result = cli("capture", address, "--label", "h")
    assert result.returncode == 0, result.stderr
    assert list((home / ".cache" / "envsnap").glob("agent-*/__main__.py"))
