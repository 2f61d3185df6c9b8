"""`envsnap completion bash|zsh|fish`: a completion script for the shell, written from the
parser itself (every command, its options, the values an option accepts), so it lists what
this envsnap accepts and cannot drift from it.

The script is static, as uv's is: a TAB runs no python. It completes commands and options;
the value of an option with choices (--fail-on, --format) from its choices; any other value
or argument as a file name, which is what most of them are (snapshots, inventories,
playbooks, checkouts)."""
from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Callable, NamedTuple

from envsnap.cli.options import examples, exit_codes
from envsnap.errors import ExitCode, UsageError

if TYPE_CHECKING:
    from envsnap.cli.options import Commands


class Option(NamedTuple):
    names: tuple[str, ...]        # as typed: -l, --limit
    help: str
    value: str | None             # the metavar of the value it takes; None: a flag
    choices: tuple[str, ...]      # the values it accepts, when argparse knows them
    repeatable: bool


class Command(NamedTuple):
    name: str
    help: str
    options: tuple[Option, ...]


def register(commands: Commands) -> None:
    comp = commands.add_parser(
        "completion", help="a completion script for bash, zsh or fish, on stdout",
        epilog=examples(
            "envsnap completion bash > ~/.local/share/bash-completion/completions/envsnap",
            "envsnap completion zsh > ~/.zfunc/_envsnap   # with fpath+=(~/.zfunc)",
            "envsnap completion fish > ~/.config/fish/completions/envsnap.fish",
        ) + exit_codes((ExitCode.OK, "written"),
                       (ExitCode.USAGE, "usage error: a shell other than bash, zsh, fish")))
    comp.add_argument("shell", metavar="SHELL", help="bash, zsh or fish")
    comp.set_defaults(run=cmd_completion)


def cmd_completion(args: argparse.Namespace) -> int:
    from envsnap.cli.main import build_parser, suggestion

    script = SCRIPTS.get(args.shell)
    if script is None:
        close = suggestion(args.shell, list(SCRIPTS))
        raise UsageError(f"no completion for shell {args.shell!r}: "
                         + (f"did you mean {close}?" if close else "bash, zsh or fish"))
    parser = build_parser()   # every command's module, whatever was typed
    sys.stdout.write(script(options_of(parser), commands_of(parser)))
    return ExitCode.OK


# ---- the parser, read ---------------------------------------------------------------------------

def commands_of(parser: argparse.ArgumentParser) -> list[Command]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            return [Command(name, helps.get(name, ""), tuple(options_of(sub)))
                    for name, sub in action.choices.items()]
    return []


def options_of(parser: argparse.ArgumentParser) -> list[Option]:
    return [Option(tuple(action.option_strings), summary(action.help),
                   None if action.nargs == 0 else str(action.metavar or action.dest.upper()),
                   tuple(str(choice) for choice in action.choices or ()),
                   isinstance(action, (argparse._AppendAction, argparse._CountAction)))
            for action in parser._actions
            if action.option_strings and action.help != argparse.SUPPRESS]


def summary(text: str | None) -> str:
    """An option's help without its default and what follows a `;`: a shell shows one line."""
    text = " ".join((text or "").split()).split(" (default")[0].split("; ")[0]
    if text.count("(") > text.count(")"):   # cut inside an aside: leave the aside out
        text = text[:text.rindex(" (")]
    return text


# ---- bash ---------------------------------------------------------------------------------------

def bash(top: list[Option], commands: list[Command]) -> str:
    """A function for `complete -F`: the first word that is not an option is the command
    (envsnap's own options take no value); with no reply, `-o default` completes files."""
    branches = [f"        '') COMPREPLY=($(compgen -W {words(top, commands)} -- \"$cur\"));"
                " return ;;"]
    for command in commands:
        branches.append(f"        {command.name})")
        files = [name for option in command.options if option.value and not option.choices
                 for name in option.names]
        chosen = [option for option in command.options if option.choices]
        if files or chosen:
            branches.append("            case $prev in")
            branches += [f"                {'|'.join(option.names)}) COMPREPLY=($(compgen -W "
                         f"{quote(' '.join(option.choices))} -- \"$cur\")); return ;;"
                         for option in chosen]
            if files:   # its value: a file name, or anything (-o default)
                branches.append(f"                {'|'.join(files)}) return ;;")
            branches.append("            esac")
        branches.append(f"            options={words(command.options, [])} ;;")
    return "\n".join([
        "# bash completion for envsnap, written by `envsnap completion bash`",
        "_envsnap() {",
        "    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}",
        "    local command='' options='' i",
        "    for ((i = 1; i < COMP_CWORD; i++)); do",
        "        [[ ${COMP_WORDS[i]} == -* ]] || { command=${COMP_WORDS[i]}; break; }",
        "    done",
        "    case $command in",
        *branches,
        "    esac",
        "    [[ $cur == -* ]] && COMPREPLY=($(compgen -W \"$options\" -- \"$cur\"))",
        "    return 0",
        "}",
        "complete -o default -F _envsnap envsnap",
        "",
    ])


def words(options: list[Option] | tuple[Option, ...], commands: list[Command]) -> str:
    return quote(" ".join([name for option in options for name in option.names]
                          + [command.name for command in commands]))


def quote(text: str) -> str:
    """Single-quoted for bash and zsh."""
    return "'" + text.replace("'", "'\\''") + "'"


# ---- zsh ----------------------------------------------------------------------------------------

def zsh(top: list[Option], commands: list[Command]) -> str:
    """A `#compdef` function: from a folder of $fpath it is autoloaded, sourced it
    registers itself with compdef."""
    listed = "\n".join(f"        {quote(command.name + ':' + command.help)}"
                       for command in commands)
    branches = "\n".join(
        f"            {command.name}) _arguments"
        + "".join(f" \\\n                {spec}" for spec in zsh_specs(command.options))
        + " \\\n                '*:file:_files' ;;" for command in commands)
    top_specs = "".join(f" \\\n        {spec}" for spec in zsh_specs(top))
    return f"""#compdef envsnap
# zsh completion for envsnap, written by `envsnap completion zsh`
_envsnap() {{
    local curcontext=$curcontext state line
    local -a commands=(
{listed}
    )
    _arguments -C{top_specs} \\
        '1:command:->command' \\
        '*::argument:->argument'
    case $state in
        command) _describe -t commands 'envsnap command' commands ;;
        argument)
            case $line[1] in
{branches}
            esac ;;
    esac
}}
if [[ $funcstack[1] == _envsnap ]]; then
    _envsnap "$@"
else
    compdef _envsnap envsnap
fi
"""


def zsh_specs(options: tuple[Option, ...] | list[Option]) -> list[str]:
    """_arguments' specs: `'(-l --limit)'{-l,--limit}'[help]:PATTERN:_files'`; the names of
    one option exclude each other, a repeatable option starts with `*`."""
    specs = []
    for option in options:
        value = ""
        if option.value:
            action = f"({' '.join(option.choices)})" if option.choices else "_files"
            value = f":{zsh_escape(option.value, ':')}:{action}"
        described = f"[{zsh_escape(option.help, '[]')}]{value}"
        repeat = "*" if option.repeatable else ""
        if len(option.names) == 1:
            specs.append(quote(repeat + option.names[0] + described))
        else:
            exclusive = repeat or f"({' '.join(option.names)})"
            specs.append(quote(exclusive) + "{" + ",".join(option.names) + "}"
                         + quote(described))
    return specs


def zsh_escape(text: str, special: str) -> str:
    for char in "\\" + special:
        text = text.replace(char, "\\" + char)
    return text


# ---- fish ---------------------------------------------------------------------------------------

def fish(top: list[Option], commands: list[Command]) -> str:
    lines = ["# fish completion for envsnap, written by `envsnap completion fish`",
             "complete -c envsnap -f"]   # files only where an argument or a value takes them
    lines += [fish_line("__fish_use_subcommand", option) for option in top]
    lines += [f"complete -c envsnap -n __fish_use_subcommand -a {command.name} "
              f"-d {fish_quote(command.help)}" for command in commands]
    for command in commands:
        seen = fish_quote(f"__fish_seen_subcommand_from {command.name}")
        lines.append(f"complete -c envsnap -n {seen} -F")
        lines += [fish_line(seen, option) for option in command.options]
    return "\n".join(lines) + "\n"


def fish_line(condition: str, option: Option) -> str:
    names = " ".join(f"-l {name[2:]}" if name.startswith("--") else
                     f"-s {name[1:]}" if len(name) == 2 else f"-o {name[1:]}"
                     for name in option.names)
    value = ""
    if option.choices:
        value = f" -x -a {fish_quote(' '.join(option.choices))}"
    elif option.value:
        value = " -r -F"
    return f"complete -c envsnap -n {condition} {names}{value} -d {fish_quote(option.help)}"


def fish_quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


SCRIPTS: dict[str, Callable[[list[Option], list[Command]], str]] = {
    "bash": bash, "zsh": zsh, "fish": fish}
