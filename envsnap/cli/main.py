"""The command line's entry point: the parser assembled from one module per command, and the
one top-level handler that turns every way a command can end into one line and an exit code
(the codes are defined in envsnap/errors.py). cli/ is the only package that prints or exits.

Each command module imports its library code inside its command function: building the
parser happens for every command, and `envsnap diff` must not load capture, SSH or bench."""
from __future__ import annotations

import argparse
import gc
import os
import sys
from importlib import import_module
from typing import Any, Callable, NoReturn, TextIO, Union

from envsnap.cli.options import ALL_EXIT_CODES, examples, exit_codes
from envsnap.cli.output import columns, visible_output
from envsnap.errors import DeclinedError, EnvsnapError, ExitCode, Interrupted

Command = Callable[[argparse.Namespace], int]


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Epilogs kept as written (they list exit codes one per line), as wide as every other
    text (cli/output.columns: COLUMNS, the terminal, else 80), found without importing
    shutil (and with it bz2, lzma and locale) as argparse would. argparse builds a formatter
    for every argument added, so every command paid that import at start-up, help or not."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position,
                         columns() - 2 if width is None else width)


class EnvsnapParser(argparse.ArgumentParser):
    """argparse with envsnap's one error prefix: the usage of the (sub)command that failed,
    then `envsnap: error: ...`, exit 2. Subcommand parsers are made of this class too."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(ExitCode.USAGE, f"envsnap: error: {message}\n")


class VersionAction(argparse.Action):
    """--version: the release, and the commit of a checkout (envsnap/version.py), looked up
    only when asked: the parser is built for every command."""

    def __init__(self, option_strings: list[str], dest: str) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="show the version (and the commit, from a git checkout) and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> NoReturn:
        from envsnap.version import version_text

        sys.stdout.write(version_text() + "\n")
        parser.exit()


# command -> the module of envsnap/cli/ that defines it (its `register(commands)`). Only the
# module of the command typed is imported: `envsnap diff` does not load the other nine.
COMMAND_MODULES = {
    "capture": "capture", "list": "show", "show": "show", "diff": "diff", "bench": "bench",
    "play": "play", "restore": "restore", "bisect": "bisect", "report": "report",
    "demo": "demo", "trust": "trust", "ansible": "collection",
    "explain": "explain", "timeline": "timeline", "import": "importing", "prune": "prune",
    "completion": "completion", "history": "history", "watch": "watch",
}
EXAMPLES = examples(
    "envsnap capture local --label before",
    "envsnap capture gpu --inventory hosts.yml --label run1",
    "envsnap diff before after",
    "envsnap timeline local --since 2h",
    "envsnap report after --vs before -o bug.md",
    "envsnap completion bash > ~/.local/share/bash-completion/completions/envsnap",
)


def modules_for(argv: list[str]) -> list[str]:
    """The command modules to register: the typed command's, or all for the top-level help,
    an unknown command, or none (the first word not an option is the command)."""
    typed = next((word for word in argv if not word.startswith("-")), None)
    if typed in COMMAND_MODULES:
        return [COMMAND_MODULES[typed]]
    return list(dict.fromkeys(COMMAND_MODULES.values()))


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    parser = EnvsnapParser(prog="envsnap", epilog=EXAMPLES + exit_codes(*ALL_EXIT_CODES),
                           description="Capture, diff and restore GPU host environments.")
    parser.add_argument("--version", action=VersionAction)
    # Not required: with no command, main() prints the whole help rather than one line.
    commands = parser.add_subparsers(dest="command", metavar="COMMAND",
                                     help="what to do; `envsnap COMMAND -h` for its options")
    for module in modules_for(argv or []):
        import_module(f"envsnap.cli.{module}").register(commands)
    return parser


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """command name -> its parser."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def parse_arguments(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    typed = next((word for word in argv if not word.startswith("-")), None)
    if typed is not None and typed not in COMMAND_MODULES and not argv[0].startswith("-"):
        close = suggestion(typed, list(COMMAND_MODULES))
        parser.error(f"unknown command {typed!r}; "
                     + (f"did you mean {close}?" if close else "envsnap -h lists them"))
    # An unknown option is said before a missing one: `bench x --metirc y` lacks --metric
    # too, and the misspelling is what the person needs to hear.
    relaxed = relax_requirements(subcommands(parser).get(typed or ""))
    try:
        args, extras = parser.parse_known_args(argv)
    finally:
        for item in relaxed:
            item.required = True
    if extras:
        refuse_extras(parser, argv, args.command, extras)
    return parser.parse_args(argv) if relaxed else args


Requirement = Union[argparse.Action, argparse._MutuallyExclusiveGroup]


def relax_requirements(command: argparse.ArgumentParser | None) -> list[Requirement]:
    """Make the command's required options, arguments and groups optional; those changed."""
    if command is None:
        return []
    items: list[Requirement] = [*command._actions, *command._mutually_exclusive_groups]
    required = [item for item in items if item.required]
    for item in required:
        item.required = False
    return required


def refuse_extras(parser: argparse.ArgumentParser, argv: list[str], command: str | None,
                  extras: list[str]) -> NoReturn:
    """The one line for words no parser took: the first unknown option, with the nearest of
    its command's options, else the extra arguments."""
    # argparse reports a subcommand's unknown options from the top parser, with the top
    # usage; the person needs the usage of the command they typed.
    failed = subcommands(parser).get(command or "", parser)
    if command in argv and extras[0] in argv and argv.index(extras[0]) < argv.index(command):
        failed = parser   # unknown before the command: the top level's own
    option = next((word.split("=")[0] for word in extras if is_option(word)), None)
    if option is None:
        failed.error(f"unrecognized arguments: {' '.join(extras)}")
    close = suggestion(option, [name for action in failed._actions
                                for name in action.option_strings])
    failed.error(f"unrecognized option {option}" + (f"; did you mean {close}?" if close else ""))


def is_option(word: str) -> bool:
    """An option as argparse tells one: a dash and not a negative number."""
    return word.startswith("-") and word != "-" and not word[1:2].isdigit()


def suggestion(typed: str, known: list[str]) -> str | None:
    """The known name nearest to what was typed, if one is near."""
    import difflib

    close = difflib.get_close_matches(typed, known, n=1)
    return close[0] if close else None


def run(argv: list[str]) -> int:
    parser = build_parser(argv)
    args = parse_arguments(parser, argv)
    if args.command is None:
        sys.stderr.write(parser.format_help() + "\nenvsnap: error: no command given\n")
        return ExitCode.USAGE
    command: Command = args.run
    code: int = ExitCode.INTERNAL
    try:
        code = command(args)
        return code
    finally:
        tell_new_key(code in (ExitCode.OK, ExitCode.DRIFT))


def tell_new_key(say: bool) -> None:
    """Once, on the run that made it: where the signing key is, and why it matters. Only a
    command that signed loaded provenance, so the others ask nothing (nor import it). Said
    (`say`) by a command that ended in one of its usual outcomes (0, 1): one that fails says
    its error alone, in one line."""
    provenance = sys.modules.get("envsnap.snapshot.provenance")
    keys = provenance.taken_keys() if provenance is not None else []   # taken, said or not
    for made in keys if say else []:
        shown = str(made.path).replace(os.path.expanduser("~") + os.sep, "~" + os.sep, 1)
        sys.stderr.write(f"envsnap: created your signing key {shown}; keep it: your "
                         "snapshots are trusted as your own by it, and without it they read "
                         "as foreign\n")


def stdout_reader_gone() -> bool:
    """Whether stdout is a pipe whose reader has closed it (`envsnap diff a b | head -1`)."""
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(event & select.POLLERR for _, event in poller.poll(0))
    except (OSError, ValueError, AttributeError):   # no real descriptor: not a pipe
        return False


def silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush has nowhere to fail."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def debugging() -> bool:
    return os.environ.get("ENVSNAP_DEBUG", "") not in ("", "0")


def internal_error(error: BaseException, argv: list[str]) -> int:
    if debugging():
        import traceback

        traceback.print_exception(type(error), error, error.__traceback__)  # 3.9 form
    else:
        from envsnap.cli.crash import internal_error_line  # only a bug pays for it

        sys.stderr.write(internal_error_line(error, argv) + "\n")
    return ExitCode.INTERNAL


def console() -> NoReturn:
    """The process's entry (the `envsnap` script, `python -m envsnap`): main, then exit.

    What importing the command line made (modules, classes, their tables: alive as long as
    the process) is frozen out of every collection first: each one the start-up triggers
    would walk it again, before a capture's handshake too. Everything the command made is
    frozen out of the interpreter's last garbage collection: the process ends next, and that
    collection would walk every object a capture or a diff left (the snapshots, YAML's and
    the schema's tables) after the answer was out.
    Finalization is otherwise as ever (atexit, files flushed and closed).

    stdout is flushed at each line, as at a terminal: into a pipe or a file it was flushed
    when its buffer filled or at exit, so in a log a fleet's summary on stderr came before
    the hosts' lines on stdout."""
    line_buffered(sys.stdout)
    gc.freeze()
    code = main()
    gc.freeze()
    sys.exit(code)


def line_buffered(stream: TextIO | None) -> None:
    reconfigure = getattr(stream, "reconfigure", None)   # None: no stdout (pythonw), a stand-in
    if reconfigure is not None:
        reconfigure(line_buffering=True)


def main(argv: list[str] | None = None) -> int:
    """The one top-level handler: no traceback reaches the user, whatever happens."""
    arguments = sys.argv[1:] if argv is None else list(argv)
    with visible_output():
        return handled(arguments)


def handled(arguments: list[str]) -> int:
    code: int = ExitCode.OK   # what a command that ran to its end said, if its output pipe closed
    try:
        code = run(arguments)
        sys.stdout.flush()   # a closed pipe shows here, not in the interpreter's exit
        return code
    except DeclinedError as exc:   # a choice, not an error: said as one
        sys.stderr.write(f"envsnap: declined: {exc}\n")
        return exc.exit_code
    except Interrupted as exc:     # Ctrl-C, with where the host stands
        sys.stderr.write(f"envsnap: interrupted: {exc}\n")
        return exc.exit_code
    except EnvsnapError as exc:
        sys.stderr.write(f"envsnap: error: {exc}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("envsnap: interrupted\n")
        return ExitCode.INTERRUPTED
    except BrokenPipeError as exc:
        if not stdout_reader_gone():   # a pipe of envsnap's own (a subprocess): a bug
            return internal_error(exc, arguments)
        silence_stdout()
        return code
    except Exception as exc:   # the one place that catches everything: a bug in envsnap
        return internal_error(exc, arguments)


if __name__ == "__main__":
    console()
