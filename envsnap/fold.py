"""Text for a person, folded to a width: the one way a long line is broken, in every command.

A renderer builds its lines as it likes and says which words must stay together; the CLI
decides the width (the terminal's, COLUMNS, or 80 into a pipe: cli/output.py) and hands it
down; nothing here asks the terminal.

- A line is broken only at spaces, never inside a word: a path, a URL or a command that is
  longer than the width is one unbreakable token and stands alone on a line longer than the
  width (cut, it would no longer be the path a reader copies).
- A key phrase is one token: `keep("no drift")` glues its words with a non-breaking space
  (GLUE), which the folder never breaks at and turns back into a space in the lines it
  returns. A verdict ("no drift", "no effect", "can't tell") or a flag with its value
  (`--host gpu7`) read wrong, or not at all, when split across two lines. A form that is not
  folded (JSON, markdown) takes the text through `plain`.
- A number is never left at the end of a line: "4 runs", "1.2 MB", "94.2 -> 60.2 tok/s" keep
  the number with the word after it, whoever wrote the line (a count or a measured value
  without its unit is a number of nothing). A flag keeps its value the same way
  ("--repo PATH", "--at TIME"), in a command a snapshot or a host's history made too: such
  a pair with a long path is one unbreakable token.
- A continuation line stands deeper than the line it continues (its own indent and four, or
  the column a table's renderer names), so the structure still shows: an item under a line
  stands two deeper in envsnap's output, so a continuation is never read as one.
- envsnap's own colour codes (diff's) take no room.
"""
from __future__ import annotations

import re
from collections.abc import Iterable

GLUE = "\u00a0"        # a non-breaking space: inside a key phrase (see `keep`)
DEFAULT_WIDTH = 80     # a pipe, a file, a test's capture: the width a terminal starts with
HANG = 4               # a continuation line, this much deeper than its line (an item: 2)
COLOURS = re.compile(r"\x1b\[[0-9;]*m")
SPACES = re.compile(r"( +)")
# A number, a count or a measured value: it keeps the word after it on its line. A sign, a
# bracket or a tilde may stand before it ("(-36%", "~5", "[4"). Not one a comma or another
# number follows: "1, 2, 3" is a list, each item a place to break.
NUMBER = re.compile(r"[(\[~+-]*\d[\d.:x]*%?")
UNIT_MAX = 16   # a unit is a short word ("runs", "tok/s)"); a path after "1." is no unit
FLAG = re.compile(r"[(`]?--[a-z][a-z0-9-]*")   # "--repo", "`--host": its value follows


def keep(phrase: str) -> str:
    """`phrase` as one token: folded, its words stay on one line."""
    return phrase.replace(" ", GLUE)


def plain(text: str) -> str:
    """`text` with each key phrase's glue back to a space: for a form that is not folded."""
    return text.replace(GLUE, " ")


def shown_width(text: str) -> int:
    """The columns `text` takes on a terminal: colour codes take none."""
    return len(COLOURS.sub("", text)) if "\x1b" in text else len(text)


def words(text: str) -> list[str]:
    """`text` as tokens, each separator kept before the word it leads to: ["a", " b", "  c"].
    A separator after a number or a flag is no place to break: it stays inside the token."""
    parts = SPACES.split(text)
    tokens = [parts[0]]
    for space, word in zip(parts[1::2], parts[2::2]):
        last = COLOURS.sub("", tokens[-1]).rsplit(" ", 1)[-1]
        if FLAG.fullmatch(last) or (NUMBER.fullmatch(last) and not NUMBER.match(word)
                                    and len(word) <= UNIT_MAX):
            tokens[-1] += space + word
        else:
            tokens.append(space + word)
    return tokens


def fold(line: str, width: int = DEFAULT_WIDTH, under: int | None = None) -> list[str]:
    """`line` as lines of at most `width` columns (but for an unbreakable token, see the
    module's docstring). A continuation stands at column `under`, else its line's own
    indent plus HANG; never deeper than half the width, so a deep one still has room."""
    line = line.rstrip(" ")
    if shown_width(line) <= width:
        return [plain(line)]
    body = line.lstrip(" ")
    indent = len(line) - len(body)
    hang = " " * min(indent + HANG if under is None else under, width // 2)
    tokens = words(body)
    lines = []
    current = " " * indent + tokens[0]
    for token in tokens[1:]:
        if shown_width(current + token) <= width:
            current += token
        else:
            lines.append(current)
            current = hang + token.lstrip(" ")
    lines.append(current)
    return [plain(folded) for folded in lines]


def fold_all(lines: Iterable[str], width: int = DEFAULT_WIDTH) -> list[str]:
    """Each line folded as `fold` does (a line holding newlines is each of its lines)."""
    return [part for line in lines for inner in line.split("\n") for part in fold(inner, width)]


def folded(text: str, width: int = DEFAULT_WIDTH) -> str:
    """A whole text, each of its lines folded; it ends in a newline as `text` did."""
    end = "\n" if text.endswith("\n") else ""
    return "\n".join(fold_all(text[:len(text) - len(end)].split("\n"), width)) + end
