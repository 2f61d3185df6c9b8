"""Text that envsnap writes, each kind written one way: markdown cells, JSON documents, times.

- `markdown_cell`: the one way text from data (a snapshot, a host, a repository) enters
  markdown outside code: a table cell, a list item, a heading, a paragraph, or (`html=True`)
  a `<summary>`, where GitHub reads HTML, not markdown. Made safe to paste into a GitHub
  issue: no HTML element (`<` is `&lt;`, an entity is shown as typed), no image or link
  (`[`, `]` escaped), no autolink, e-mail link nor @mention (each URL, `www.` name, address
  and `@name` is put in a code span, which GitHub links and mentions from never); a pipe
  would end the cell, `*` and `\\` would turn into emphasis or eat the next character, and a
  line break (LF or CR) would end the row. `markdown_code` is the same text as a code span:
  there markdown shows every character as it is, so only what a table itself reads (`|`, a
  line break) is escaped, and the span is fenced by more backticks than the text holds.
  Code blocks (diff/render_formats.fence) are fenced the same way: data cannot close them.
- `dump_json`: a JSON document for a person and a diff tool alike: indented, keys sorted,
  one newline at the end; a value JSON has no type for (a datetime, a Path) as its str.
- `timestamp` and `name_stamp`: the one form of a moment in a document (ISO 8601 in UTC,
  to the second) and in a file or label name (no `:`, sortable).
- `plural`, `number`, `sparkline`, `values_at_a_glance`: how counts and measured values read,
  the same in every command and report.
- `visible` and `visible_line`: the one renderer of untrusted text (from a snapshot, a host, a
  repository) for a terminal. A control character would act rather than show: a carriage
  return and an erase-line escape rewrite what a review said, ESC starts window-title,
  clipboard (OSC 52) and hidden-link (OSC 8) sequences, bidi controls reorder a line, zero-width
  and tag characters hide text. Each is written as its Python escape instead (`\\r`,
  `\\x1b`, `\\u202e`): C0 and C1 controls, DEL, the Unicode format characters (bidi,
  zero-width, BOM, tags), line and paragraph separators and lone surrogates (bytes that were
  not UTF-8). `visible` keeps newline and tab (and the few colour codes `keep` names: envsnap's
  own); `visible_line` escapes those too, for one field that must stay one line (a command).

It imports nothing of envsnap, so every floor (bench and hosts too) writes text as diff and
report do.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from datetime import datetime

BACKTICKS = re.compile(r"`+")
# What a terminal would act on rather than show (see the docstring); \t and \n are 09 and 0a.
CONTROLS = ("\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e"
            "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\ud800-\udfff\U000e0000-\U000e007f")
UNSAFE = re.compile(f"[{CONTROLS}]")
UNSAFE_IN_LINE = re.compile(f"[\t\n{CONTROLS}]")


SHORT_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def escaped(char: str) -> str:
    """One character as Python writes it in a string literal: \\r, \\x1b, \\u202e."""
    code = ord(char)
    return SHORT_ESCAPES.get(char) or (f"\\x{code:02x}" if code < 0x100 else
                                       f"\\u{code:04x}" if code < 0x10000 else
                                       f"\\U{code:08x}")


def visible(text: str, keep: re.Pattern[str] | None = None) -> str:
    """`text` with every control character written as its escape; newline and tab kept, and
    whatever `keep` matches (whole sequences: envsnap's own colour codes)."""
    if UNSAFE.search(text) is None:
        return text
    if keep is None:
        return UNSAFE.sub(lambda found: escaped(found.group()), text)
    either = re.compile(f"({keep.pattern})|{UNSAFE.pattern}")
    return either.sub(lambda found: found.group(1) or escaped(found.group()), text)


def visible_line(text: str) -> str:
    """`text` as one line: newline and tab escaped too (a command in a review)."""
    return UNSAFE_IN_LINE.sub(lambda found: escaped(found.group()), text)


# Where text splits into words for markdown_cell: whitespace, and the characters a word that
# goes into a code span must not hold (a pipe ends a table cell, a backtick the span, `<` is
# always escaped).
WORD_BREAKS = re.compile(r"(\s+|[|`<])")
MARKDOWN_ESCAPES = str.maketrans({"\\": "\\\\", "|": "\\|", "*": "\\*", "[": "\\[",
                                  "]": "\\]", "`": "\\`", "<": "&lt;", "\n": " ", "\r": " "})
HTML_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\n": " ", "\r": " "})
ENTITY = re.compile(r"&(?=#?[A-Za-z0-9]+;)")   # `&lt;` from data is shown as typed


def markdown_cell(text: str, html: bool = False) -> str:
    """Data as plain text in markdown (or, with `html`, in a raw HTML element such as
    `<summary>`): see the module's docstring for what it cannot become."""
    shown = []
    for word in WORD_BREAKS.split(text):
        if html:
            escaped = word.translate(HTML_ESCAPES)
            shown.append(f"<code>{escaped}</code>" if links_on_github(word) else escaped)
        else:
            shown.append(f"`{word}`" if links_on_github(word)
                         else ENTITY.sub("&amp;", word).translate(MARKDOWN_ESCAPES))
    return "".join(shown)


def links_on_github(word: str) -> bool:
    """A word GitHub would make a link or a mention of: a URL, a `www.` name, an e-mail
    address or an `@name` (an `@` before a letter or digit, after no word character, or
    with a `.` after it). Plain string tests, so a long word costs one pass."""
    lowered = word.lower()
    if "://" in word or "www." in lowered:
        return True
    at = word.find("@")
    while at != -1:
        if word[at + 1:at + 2].isalnum() and (
                at == 0 or not (word[at - 1].isalnum() or word[at - 1] == "_")
                or word.find(".", at) != -1):
            return True
        at = word.find("@", at + 1)
    return False


def markdown_code(text: str) -> str:
    """`text` as one code span in a table cell, fenced by more backticks than it holds."""
    inner = text.replace("|", "\\|").replace("\n", " ").replace("\r", " ")
    ticks = "`" * (1 + max([0] + [len(run) for run in BACKTICKS.findall(inner)]))
    pad = " " if inner.startswith("`") or inner.endswith("`") else ""
    return f"{ticks}{pad}{inner}{pad}{ticks}"


# json and datetime on use: every command imports this module at start (cli/), and a capture
# starts its host's handshake before it writes any JSON or time (~2.5 ms).
def dump_json(value: Any) -> str:
    import json

    return json.dumps(value, indent=2, sort_keys=True, default=str) + "\n"


def now_utc() -> datetime:
    from datetime import datetime, timezone

    return datetime.now(timezone.utc)


def timestamp(when: datetime | None = None) -> str:
    """`2026-01-01T12:00:00+00:00`: what a document records (captured_at, started_at)."""
    return (when or now_utc()).isoformat(timespec="seconds")


def name_stamp(when: datetime | None = None) -> str:
    """`20260101-120000`: a moment in a label or file name."""
    return (when or now_utc()).strftime("%Y%m%d-%H%M%S")

BARS = "▁▂▃▄▅▆▇█"


def clipped(text: str, shown: int = 60) -> str:
    """`text`, or its first `shown` characters and how long it is: a value on a line that
    lists many (an env's NVIDIA_REQUIRE_CUDA runs to a screen)."""
    if len(text) <= shown + 20:
        return text
    return f"{text[:shown]}... ({len(text)} characters)"


def plural(count: int, word: str, suffix: str = "s") -> str:
    return f"{count} {word}{'' if count == 1 else suffix}"


def number(value: float) -> str:
    """A measured value in four significant digits: 285.7, 0.0123, 1.235e+04."""
    return f"{value:.4g}"


def did_you_mean(typed: str, known: Sequence[str]) -> str:
    """` (did you mean 'run1/n2'?)` when a known name is close to what was typed, else ""."""
    import difflib

    close = difflib.get_close_matches(typed, known, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def duration(seconds: float) -> str:
    """Seconds as a person reads them: `1.0 s`, `12 s`, `3 min 05 s`; a measured 1.0082 is
    not a precision anyone asked for."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s"


def sparkline(values: Sequence[float]) -> str:
    """One character per value, its height between the smallest and the largest."""
    if not values:
        return ""
    lo, hi = min(values), max(values)
    if hi == lo:
        return BARS[3] * len(values)
    top = len(BARS) - 1
    return "".join(BARS[round((v - lo) / (hi - lo) * top)] for v in values)


def values_at_a_glance(values: Sequence[float], what: str = "run") -> str:
    """"▃▁█▅ 285.7 .. 287 (4 runs)": the values in order, scaled between their extremes."""
    if not values:
        return "none"
    return (f"{sparkline(values)} {number(min(values))} .. {number(max(values))} "
            f"({len(values)} {what}{'s' if len(values) != 1 else ''})")
