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
from typing import Any, Callable, NoReturn

from envsnap import __version__
from envsnap.cli.options import ALL_EXIT_CODES, exit_codes
from envsnap.cli.output import visible_output
from envsnap.errors import DeclinedError, EnvsnapError, ExitCode, Interrupted
from envsnap.text import did_you_mean

Command = Callable[[argparse.Namespace], int]


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Epilogs kept as written (they list exit codes one per line), as wide as argparse's
    own: the width argparse asks shutil for, found without importing shutil (and with it
    bz2, lzma and locale). argparse builds a formatter for every argument added, so every
    command paid that import at start-up, help or not."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position,
                         terminal_columns() - 2 if width is None else width)


def terminal_columns() -> int:
    """shutil.get_terminal_size().columns: $COLUMNS, else the terminal's width, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns > 0:
        return columns
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns or 80  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):   # no stdout, or not a terminal
        return 80


class EnvsnapParser(argparse.ArgumentParser):
    """argparse with envsnap's one error prefix: the usage of the (sub)command that failed,
    then `envsnap: error: ...`, exit 2. Subcommand parsers are made of this class too."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(ExitCode.USAGE, f"envsnap: error: {message}\n")


# command -> the module of envsnap/cli/ that defines it (its `register(commands)`). Only the
# module of the command typed is imported: `envsnap diff` does not load the other nine.
COMMAND_MODULES = {
    "capture": "capture", "list": "show", "show": "show", "diff": "diff", "bench": "bench",
    "play": "play", "restore": "restore", "bisect": "bisect", "report": "report",
    "demo": "demo", "trust": "trust", "ansible": "collection",
    "explain": "explain", "timeline": "timeline", "import": "importing",
}


def modules_for(argv: list[str]) -> list[str]:
    """The command modules to register: the typed command's, or all for the top-level help,
    an unknown command, or none (the first word not an option is the command)."""
    typed = next((word for word in argv if not word.startswith("-")), None)
    if typed in COMMAND_MODULES:
        return [COMMAND_MODULES[typed]]
    return list(dict.fromkeys(COMMAND_MODULES.values()))


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    parser = EnvsnapParser(prog="envsnap", epilog=exit_codes(*ALL_EXIT_CODES),
                           description="Capture, diff and restore GPU host environments.")
    parser.add_argument("--version", action="version", version=f"envsnap {__version__}")
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
        parser.error(f"unknown command {typed!r}{did_you_mean(typed, list(COMMAND_MODULES))}; "
                     "envsnap -h lists them")
    args, extras = parser.parse_known_args(argv)
    if extras:
        # argparse reports a subcommand's unknown options from the top parser, with the top
        # usage; the person needs the usage of the command they typed.
        failed = subcommands(parser).get(args.command or "", parser)
        if args.command in argv and extras[0] in argv and \
                argv.index(extras[0]) < argv.index(args.command):
            failed = parser   # unknown before the command: the top level's own
        options = [name for action in failed._actions for name in action.option_strings]
        failed.error(f"unrecognized arguments: {' '.join(extras)}"
                     f"{did_you_mean(extras[0].split('=')[0], options)}")
    return args


def run(argv: list[str]) -> int:
    parser = build_parser(argv)
    args = parse_arguments(parser, argv)
    if args.command is None:
        sys.stderr.write(parser.format_help() + "\nenvsnap: error: no command given\n")
        return ExitCode.USAGE
    command: Command = args.run
    return command(args)


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
    Finalization is otherwise as ever (atexit, files flushed and closed)."""
    gc.freeze()
    code = main()
    gc.freeze()
    sys.exit(code)


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
