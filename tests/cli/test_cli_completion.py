"""`envsnap completion bash|zsh|fish`: each script lists every command and every option of a
command, as the parser has them; bash's is sourced in a real bash and asked as the shell asks
at a TAB; zsh's and fish's are checked by their shells where those are installed (fish's
asked too)."""
from __future__ import annotations

import argparse
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import Cli

from envsnap.cli.main import build_parser, subcommands
from envsnap.errors import ExitCode

SHELLS = ("bash", "zsh", "fish")


def diff_options() -> list[str]:
    diff = subcommands(build_parser())["diff"]
    return [name for action in diff._actions for name in action.option_strings]


@pytest.mark.parametrize("shell", SHELLS)
def test_each_script_lists_every_command_and_every_option_of_diff(cli: Cli, shell: str) -> None:
    result = cli("completion", shell)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    script = result.stdout
    for command in subcommands(build_parser()):
        assert command in script, command
    options = diff_options()
    assert {"--fail-on", "--markdown", "--fleet", "-l", "--limit"} <= set(options)
    for option in options:
        # fish names an option without its dashes: -l limit, -s l
        assert option in script or f" {option.lstrip('-')} " in script, (shell, option)
    assert "drift regression" in script   # the values --fail-on takes


def completions(script: Path, line: str) -> list[str]:
    """What bash offers at a TAB after `line`: the script's function called as bash's
    programmable completion calls it (COMP_WORDS, COMP_CWORD)."""
    program = (f"source {script}\n"
               f"COMP_WORDS=({line}); [[ {line!r} == *' ' ]] && COMP_WORDS+=('')\n"
               "COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=()\n"
               "_envsnap envsnap \"${COMP_WORDS[COMP_CWORD]}\"\n"
               "printf '%s\\n' \"${COMPREPLY[@]}\"\n")
    done = subprocess.run(["bash", "--norc", "--noprofile", "-c", program],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return [word for word in done.stdout.splitlines() if word]


def test_bash_completes_commands_options_and_choices(cli: Cli, tmp_path: Path) -> None:
    script = tmp_path / "envsnap.bash"
    script.write_text(cli("completion", "bash").stdout)
    assert completions(script, "envsnap ca") == ["capture"]
    assert completions(script, "envsnap co") == ["completion"]
    assert completions(script, "envsnap diff --m") == ["--markdown"]
    assert completions(script, "envsnap diff a b --fail-on ") == ["drift", "regression"]
    assert completions(script, "envsnap report x --format c") == ["collect-env", "check-env"]
    assert completions(script, "envsnap --v") == ["--version"]
    assert "--limit" in completions(script, "envsnap capture gpu --")
    # a value or a snapshot: no word from envsnap, so bash completes file names (-o default)
    assert completions(script, "envsnap capture --label ") == []
    assert completions(script, "envsnap diff ") == []
    registered = subprocess.run(["bash", "--norc", "--noprofile", "-c",
                                 f"source {script}; complete -p envsnap"],
                                capture_output=True, text=True, timeout=30)
    assert registered.stdout == "complete -o default -F _envsnap envsnap\n"


def test_every_option_of_every_command_is_offered_by_bash(cli: Cli, tmp_path: Path) -> None:
    script = tmp_path / "envsnap.bash"
    script.write_text(cli("completion", "bash").stdout)
    for name, sub in subcommands(build_parser()).items():
        offered = set(completions(script, f"envsnap {name} -"))
        expected = {option for action in sub._actions for option in action.option_strings
                    if action.help != argparse.SUPPRESS}
        assert offered == expected, name


def installed(shell: str) -> str:
    found = shutil.which(shell)
    if found is None:
        pytest.skip(f"{shell} is not installed")
    return found


def test_zsh_reads_its_script(cli: Cli, tmp_path: Path) -> None:
    zsh = installed("zsh")
    script = tmp_path / "_envsnap"
    script.write_text(cli("completion", "zsh").stdout)
    assert script.read_text().startswith("#compdef envsnap\n")
    checked = subprocess.run([zsh, "-n", str(script)], capture_output=True, text=True,
                             timeout=30)
    assert checked.returncode == 0 and checked.stderr == "", checked.stderr


def test_fish_reads_its_script_and_completes_from_it(cli: Cli, tmp_path: Path) -> None:
    fish = installed("fish")
    script = tmp_path / "envsnap.fish"
    script.write_text(cli("completion", "fish").stdout)
    checked = subprocess.run([fish, "--no-execute", str(script)], capture_output=True,
                             text=True, timeout=30)
    assert checked.returncode == 0 and checked.stderr == "", checked.stderr
    asked = subprocess.run(
        [fish, "-c", f"source {script}; complete -C 'envsnap ca'; "
                                    "complete -C 'envsnap diff --m'; "
                                    "complete -C 'envsnap diff a b --fail-on '"],
        capture_output=True, text=True, timeout=30, env={"HOME": str(tmp_path),
                                                         "PATH": "/usr/bin:/bin"})
    assert asked.returncode == 0, asked.stderr
    offered = [line.split("\t")[0] for line in asked.stdout.splitlines()]
    assert offered == ["capture", "--markdown", "drift", "regression"], asked.stdout


@pytest.mark.parametrize("shell, said", [
    ("tcsh", "no completion for shell 'tcsh': bash, zsh or fish"),
    ("bsh", "no completion for shell 'bsh': did you mean bash?"),
])
def test_another_shell_is_one_line_and_a_usage_error(cli: Cli, shell: str, said: str) -> None:
    result = cli("completion", shell)
    assert result.returncode == ExitCode.USAGE and result.stdout == ""
    assert result.stderr == f"envsnap: error: {said}\n"
