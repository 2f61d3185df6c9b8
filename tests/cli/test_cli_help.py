"""The command line's help and argument errors: every option explained with its default,
every command's exit codes, one error prefix, the usage of the command that failed."""
from __future__ import annotations

import argparse
import re
import shlex

import pytest
from conftest import Cli

from envsnap.cli.main import build_parser, subcommands
from envsnap.errors import (
    EXIT_DRIFT,
    EXIT_HOST,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_INVALID,
    EXIT_OK,
    EXIT_USAGE,
    ExitCode,
)

KNOWN_CODES = {EXIT_OK, EXIT_DRIFT, EXIT_USAGE, EXIT_HOST, EXIT_INVALID, ExitCode.DECLINED,
               ExitCode.PUT_BACK, EXIT_INTERNAL, EXIT_INTERRUPTED}
NO_DEFAULT = (None, False, [], argparse.SUPPRESS)


def options() -> list[tuple[str, argparse.Action]]:
    return [(name, action) for name, sub in subcommands(build_parser()).items()
            for action in sub._actions if not isinstance(action, argparse._HelpAction)]


def listed_codes(help_text: str) -> list[int]:
    """The codes of the `exit codes:` block that ends a help text."""
    block = help_text.rstrip().split("\nexit codes:\n")[-1]
    return [int(line.split()[0]) for line in block.splitlines() if re.match(r"  \d", line)]


def test_every_command_is_there() -> None:
    assert set(subcommands(build_parser())) == {
        "capture", "list", "show", "diff", "bench", "play", "restore", "bisect", "report",
        "demo", "trust", "ansible", "explain", "timeline", "import", "prune", "completion",
        "history", "watch"}


@pytest.mark.parametrize("command, action", options(),
                         ids=[f"{c}:{a.dest}" for c, a in options()])
def test_every_option_has_help_that_states_its_default(command: str,
                                                       action: argparse.Action) -> None:
    assert action.help and action.help != argparse.SUPPRESS, f"{command} {action.dest}"
    if action.default not in NO_DEFAULT and action.option_strings:
        assert "default" in action.help, f"{command} {action.option_strings}: {action.help}"


def test_every_command_help_ends_with_its_exit_codes() -> None:
    for name, sub in subcommands(build_parser()).items():
        codes = listed_codes(sub.format_help())
        assert codes[0] == EXIT_OK and codes[-2:] == [EXIT_INTERNAL, EXIT_INTERRUPTED], name
        assert set(codes) <= KNOWN_CODES and codes == sorted(codes), name


def test_diff_help_through_the_cli_lists_only_its_codes(cli: Cli) -> None:
    result = cli("diff", "--help")
    assert result.returncode == 0
    assert listed_codes(result.stdout) == [0, 1, 2, 4, 70, 130]
    assert "--section NAMES" in result.stdout and "(default: all)" in result.stdout
    # 3: report --timeline reads the host
    assert listed_codes(cli("report", "-h").stdout) == [0, 2, 3, 4, 70, 130]
    assert listed_codes(cli("bench", "-h").stdout) == [0, 2, 3, 70, 130]


def test_no_command_prints_the_whole_help_and_is_a_usage_error(cli: Cli) -> None:
    result = cli()
    assert result.returncode == EXIT_USAGE and result.stdout == ""
    for command in subcommands(build_parser()):
        assert re.search(rf"^    {command}\b", result.stderr, re.MULTILINE), command
    assert listed_codes(result.stderr.split("\nenvsnap: error:")[0]) == sorted(KNOWN_CODES)
    assert result.stderr.endswith("\nenvsnap: error: no command given\n")


def test_an_unknown_option_shows_the_usage_of_its_command(cli: Cli) -> None:
    result = cli("diff", "a", "b", "--colour")
    assert result.returncode == EXIT_USAGE and result.stdout == ""
    assert result.stderr.startswith("usage: envsnap diff ")
    assert result.stderr.splitlines()[-1] == "envsnap: error: unrecognized option --colour"
    before = cli("--colour", "diff", "a", "b")
    assert before.returncode == EXIT_USAGE
    assert before.stderr.startswith("usage: envsnap [-h]")


def test_argparse_errors_carry_the_one_prefix(cli: Cli) -> None:
    result = cli("bench", "local")
    assert result.returncode == EXIT_USAGE
    assert result.stderr.startswith("usage: envsnap bench ")
    assert result.stderr.splitlines()[-1] == \
        "envsnap: error: the following arguments are required: --cmd, --metric"
    unknown = cli("frobnicate")
    assert unknown.returncode == EXIT_USAGE
    assert unknown.stderr.startswith("usage: envsnap [-h]")
    assert unknown.stderr.splitlines()[-1] == \
        "envsnap: error: unknown command 'frobnicate'; envsnap -h lists them"
    extra = cli("show", "a", "c")
    assert extra.returncode == EXIT_USAGE
    assert extra.stderr.splitlines()[-1] == "envsnap: error: unrecognized arguments: c"


@pytest.mark.parametrize("args, refused", [
    (["capture", "local", "--forks", "0"], "--forks: '0' is not a whole number of at least 1"),
    (["play", "x.yml", "--forks", "-2"], "--forks: '-2' is not a whole number of at least 1"),
    (["capture", "local", "--connect-timeout", "-1"],
     "--connect-timeout: '-1' is not a number of seconds above 0"),
    (["capture", "local", "--collector-timeout", "0"],
     "--collector-timeout: '0' is not a number of seconds above 0"),
    (["capture", "local", "--max-patch-bytes", "-1"],
     "--max-patch-bytes: '-1' is not a whole number of at least 0"),
    (["bench", "local", "--cmd", "true", "--metric", "x", "--repeat", "0"],
     "--repeat: '0' is not a whole number of at least 1"),
    (["bench", "local", "--cmd", "true", "--metric", "x", "--run-timeout", "nan"],
     "--run-timeout: 'nan' is not a number of seconds above 0"),
    (["bench", "local", "--cmd", "true", "--metric", "x", "--sample-interval", "-0.5"],
     "--sample-interval: '-0.5' is not a number of seconds of at least 0"),
    (["bisect", "a", "b", "--cmd", "true", "--metric", "x", "--max-repeat", "0"],
     "--max-repeat: '0' is not a whole number of at least 1"),
    (["restore", "good", "--connect-timeout", "0"],
     "--connect-timeout: '0' is not a number of seconds above 0"),
    (["capture", "local", "--forks", "two"], "--forks: 'two' is not a whole number"),
])
def test_bad_numbers_are_refused_before_anything_runs(cli: Cli, args: list[str],
                                                      refused: str) -> None:
    result = cli(*args)
    assert result.returncode == EXIT_USAGE and result.stdout == ""
    assert result.stderr.startswith(f"usage: envsnap {args[0]} ")
    last = result.stderr.splitlines()[-1]
    assert last.startswith(f"envsnap: error: argument {refused}"), last
    assert not (cli.cwd / "store").exists()   # nothing was captured


def shown_examples(help_text: str) -> list[str]:
    """The commands of the `examples:` block of a help text."""
    assert "\nexamples:\n" in help_text, help_text
    block = help_text.split("\nexamples:\n", 1)[1].split("\n\n", 1)[0]
    return [line.strip() for line in block.splitlines()]


def typed_words(command: str) -> list[str]:
    """The words a shell hands envsnap for a command line: up to its first operator (`>`,
    `|`, `;`), without a `# comment`."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    words = []
    for word in lexer:
        if set(word) <= set(lexer.punctuation_chars):
            break
        words.append(word)
    return words


@pytest.mark.parametrize("command", ["", *subcommands(build_parser())])
def test_every_help_shows_examples_that_the_parser_takes(cli: Cli, command: str) -> None:
    """Each example is parsed by the real parser: one that names an option the command no
    longer has, or lacks a required one, fails here, not in a reader's shell."""
    result = cli(*command.split(), "--help")
    assert result.returncode == 0, result.stderr
    shown = shown_examples(result.stdout)
    assert len(shown) >= 1 + (command != "demo" and command != "list"), shown
    for example in shown:
        assert len(example) + 2 <= 80, example   # as shown: two spaces in
        words = typed_words(example)
        assert words[0] == "envsnap" and (not command or words[1] == command), example
        parser = build_parser(words[1:])
        try:
            args = parser.parse_args(words[1:])
        except SystemExit:
            pytest.fail(f"the parser refuses the example {example!r}")
        assert args.command == words[1], example


def test_an_example_that_names_no_option_of_its_command_would_be_refused() -> None:
    """What the test above relies on: parse_args exits on a word the command does not take."""
    with pytest.raises(SystemExit):
        build_parser(["diff"]).parse_args(typed_words("envsnap diff a b --colour  # no")[1:])
    assert typed_words("envsnap completion zsh > ~/_envsnap  # x") == [
        "envsnap", "completion", "zsh"]


def test_a_misspelt_option_gets_did_you_mean_before_a_missing_one(cli: Cli) -> None:
    result = cli("bench", "x", "--metirc", "y")
    assert result.returncode == EXIT_USAGE and result.stdout == ""
    assert result.stderr.startswith("usage: envsnap bench ")
    assert result.stderr.splitlines()[-1] == \
        "envsnap: error: unrecognized option --metirc; did you mean --metric?"
    joined = cli("capture", "local", "--lable=x")
    assert joined.stderr.splitlines()[-1] == \
        "envsnap: error: unrecognized option --lable; did you mean --label?"
    top = cli("--verison")
    assert top.stderr.startswith("usage: envsnap [-h]")
    assert top.stderr.splitlines()[-1] == \
        "envsnap: error: unrecognized option --verison; did you mean --version?"
    # with nothing misspelt, what is missing is said as ever
    missing = cli("bench", "x", "--metric", "y")
    assert missing.stderr.splitlines()[-1] == \
        "envsnap: error: the following arguments are required: --cmd"


def misspelt(option: str) -> str:
    """The option with two different letters after its dashes swapped, as fingers do."""
    at = next(i for i in range(len(option) // 2, len(option) - 1) if option[i] != option[i + 1])
    return option[:at] + option[at + 1] + option[at] + option[at + 2:]


def test_every_long_option_of_every_command_is_suggested_when_misspelt(cli: Cli) -> None:
    """Names of three letters left out: --mcd is as near --cwd as --cmd."""
    wrong = []
    for name, sub in subcommands(build_parser()).items():
        for option in {o for action in sub._actions for o in action.option_strings
                       if o.startswith("--") and len(o) > 5}:
            typo = misspelt(option)
            last = cli(name, typo).stderr.splitlines()[-1]
            if last != f"envsnap: error: unrecognized option {typo}; did you mean {option}?":
                wrong.append(f"{name} {typo}: {last}")
    assert wrong == [], "\n".join(wrong)
