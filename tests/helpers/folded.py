"""Reading text that envsnap folded to a width (envsnap/fold.py), wherever its lines broke:
what a test asserts must not depend on the length of a temporary folder's path."""
from __future__ import annotations


def words(text: str) -> str:
    """The text as one line: every run of spaces and newlines one space."""
    return " ".join(text.split())


def paragraph(text: str, index: int) -> list[str]:
    """The lines of the `index`th paragraph (paragraphs stand between blank lines)."""
    return text.split("\n\n")[index].split("\n")


def joined(lines: list[str]) -> str:
    """Lines folded from one line, read as it: continuations joined by a space."""
    return " ".join(line.strip() for line in lines if line.strip())


def item(text: str, part: str) -> str:
    """The first line that holds `part`, with the lines under it that are indented deeper
    (its continuations and what it holds), joined by a space."""
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if part in line)
    indent = len(lines[first]) - len(lines[first].lstrip())
    end = first + 1
    while end < len(lines) and lines[end].strip() and \
            len(lines[end]) - len(lines[end].lstrip()) > indent:
        end += 1
    return joined(lines[first:end])


def unfolded(text: str) -> list[str]:
    """The lines as written before the fold: a line four or more deeper than the line before
    it (fold.py's continuation; an item stands two deeper) is joined to it."""
    lines: list[str] = []
    for line in text.splitlines():
        if lines and line.strip() and lines[-1].strip() and \
                indent(line) >= indent(lines[-1]) + 4:
            lines[-1] += " " + line.strip()
        else:
            lines.append(line)
    return lines


def indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def overlong(text: str, width: int = 80) -> list[str]:
    """The lines longer than `width` but for one that is a single unbreakable token on a line
    of its own: a path, a URL, or a flag with such a value (fold.py leaves those whole)."""
    return [line for line in text.splitlines()
            if len(line) > width and not unbreakable(line.split())]


def unbreakable(words: list[str]) -> bool:
    return len(words) == 1 or (len(words) == 2 and words[0].lstrip("(`").startswith("--"))
