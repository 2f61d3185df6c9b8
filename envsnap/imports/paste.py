"""What a person pasted -> the reports inside it, and what was passed over.

People paste a whole issue body or comment, not a tool's output: the issue template's
headings, `<details>`/`<summary>`, code fences with any info string, blockquote markers of
a reply, the prompt line they typed, the warnings a library printed before the report and
a sentence before and after; often several reports one under the other (a collect_env, then
nvidia-smi, then pip list). `find_reports` strips the markdown line by line, finds where each
report starts by the line each tool prints first, and keeps a line's number as the file's,
so every message names the line a person sees. What is not part of a report is `Skipped`,
with why.

`read_part` then reads one report with its reader, tolerating what the reader cannot read:
a line that breaks a report in the middle is passed over (named, with its number) and the
rest read; a line a mail client wrapped is joined back onto the one before where that makes
the report read on; what follows the report's last readable line is prose after it; a
report that stops short is read as far as it goes and claims nothing whole. Each repair is
one more read of the report, so they are bounded (MAX_REPAIRS)."""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from envsnap.imports import conda, pip, smi, topology
from envsnap.imports.collect_env import CUT_SHORT, FIRST_LINE
from envsnap.imports.reading import Reading, Unreadable

FENCE = re.compile(r"\s*(```|~~~)")
HTML = re.compile(r"\s*</?(details|summary|br|p|pre|code)\b[^>]*>.*$", re.IGNORECASE)
QUOTE = re.compile(r"(\s{0,3}>)+ ?")
HEADING = re.compile(r"#{1,6}\s+\S")
CONDA_HEADER = re.compile(r"#\s*(packages in environment|Name\s+Version|This file may|\$ conda|"
                          r"platform:)")
WARNING = re.compile(r"(\S+:\d+: )?\w*Warning:( |$)")   # its message may start below
WARNED_FROM = re.compile(r"\s+(warnings\.warn\(|import |from |\S+\s*=|\w+\()")
LOG_LINE = re.compile(r"(INFO|WARNING|DEBUG|ERROR)\s+\d\d-\d\d \d\d:\d\d:\d\d ")
PROMPT = re.compile(r"(\(\S+\)\s*)?(\S+@\S+[^$#]*[$#]|\S*[$#%]|>>>|PS \S+>)\s+\S")
SGLANG_FIRST = re.compile(r"Python: \d+\.\d+")
SGLANG_SECOND = re.compile(r"(CUDA|ROCM|MUSA) available: ")
SECTION_TITLE = "System Info"
MAX_REPAIRS = 64
WARNING_LINES = 12          # the most lines a warning's message is read over
ROW_A_GPU = ("nvidia-smi",)      # (topo -m's header names every GPU: its count stands)
GPU_LINE = re.compile(r"(GPU models and configuration: )?GPU \d+: ")
KEY_LINE = re.compile(r"[A-Za-z][A-Za-z0-9_ ()/.,'-]*?: ")
REJOIN_KINDS = ("torch collect_env", "vLLM collect_env", "SGLang check_env")
WHOLE_KINDS = ("nvidia-smi -q -x", "pip list json", "uv pip list json", "pip inspect")


@dataclass
class Skipped:
    line: int          # 1-based, the pasted file's
    text: str
    why: str


@dataclass
class Part:
    first: int                 # 0-based index of its first line in the file
    lines: list[str]           # markdown stripped; a skipped line left blank
    hint: str | None = None    # the tool its first line names, where its content may not
    blanked: frozenset[int] = frozenset()   # the file's line numbers (1-based) left blank


@dataclass
class Found:
    parts: list[Part]
    skipped: list[Skipped] = field(default_factory=list)


def stripped(line: str) -> tuple[str, str | None]:
    """A line without its markdown, and why it is passed over whole (None: it is kept)."""
    line = line.rstrip("\r")
    quote = QUOTE.match(line)
    if quote:
        line = line[quote.end():]
    if FENCE.match(line):
        return "", "a code fence"
    if HTML.match(line):
        return "", "markdown (details, summary)"
    if HEADING.match(line) and not CONDA_HEADER.match(line):
        return "", "a markdown heading"
    return line, None


def is_start(lines: list[str], at: int, inside: bool) -> bool:
    """Whether a report starts at `at` (by the first line its tool prints). `inside`: a
    report is being read, so a matrix there is its own (collect_env's GPU Topology)."""
    text = lines[at].strip()
    if not text:
        return False
    if text == FIRST_LINE:
        return True
    if text.startswith("PyTorch version:"):
        # the script's first line above it (a warning passed over between them) starts it
        above = next((lines[k].strip() for k in range(at - 1, -1, -1) if lines[k].strip()), "")
        return above != FIRST_LINE and \
            not any(lines[k].strip() == FIRST_LINE for k in range(max(0, at - 3), at))
    if SGLANG_FIRST.match(text):
        after = next((lines[k] for k in range(at + 1, min(at + 3, len(lines)))
                      if lines[k].strip()), "")
        return bool(SGLANG_SECOND.match(after.strip()))
    if text.startswith("=") and at + 1 < len(lines) and \
            lines[at + 1].strip() == SECTION_TITLE:
        return not any(lines[k].strip() == FIRST_LINE for k in range(max(0, at - 3), at))
    if smi.Q_BANNER in text:
        return True
    if is_smi_banner(lines, at + 1) and text.startswith("+-"):
        return True                              # the table's top rule
    if is_smi_banner(lines, at):
        return not (at and lines[at - 1].strip().startswith("+-"))
    if pip.LIST_HEADER.match(text) or pip.UV_ENVIRONMENT.match(text):
        return not (at and pip.UV_ENVIRONMENT.match(lines[at - 1].strip()))
    if conda.PREFIX_LINE.match(text) or text == conda.EXPORT_LINE:
        return True
    if conda.PLATFORM_LINE.match(text):
        return not any(lines[k].strip().startswith("#") for k in range(max(0, at - 2), at))
    if conda.COLUMNS_LINE.match(text):
        return not any(conda.PREFIX_LINE.match(lines[k].strip()) or lines[k].strip() == "#"
                       for k in range(max(0, at - 2), at))
    if not inside and (topology.is_header(text) or is_rocm_first(lines, at)):
        return True
    return not inside and is_freeze(lines, at)


def is_smi_banner(lines: list[str], at: int) -> bool:
    text = lines[at] if at < len(lines) else ""
    return "NVIDIA-SMI" in text and "Driver Version:" in text


def is_rocm_first(lines: list[str], at: int) -> bool:
    """rocm-smi's banner, or its first table's title where the banner is not above it."""
    if not topology.is_rocm_start(lines[at]):
        return False
    for k in range(at - 1, -1, -1):         # back over the tables above it, if any
        text = lines[k].strip()
        if topology.is_rocm_start(text):
            return False
        if text and not text.startswith("GPU"):
            return True
    return True


def is_freeze(lines: list[str], at: int) -> bool:
    """Two `name==version` lines in a row start a pip freeze (where none is above)."""
    here = lines[at].strip()
    if "==" not in here or not here[:1].isalnum():
        return False
    before = next((lines[k].strip() for k in range(at - 1, max(-1, at - 3), -1)
                   if lines[k].strip()), "")
    if pip.FREEZE_LINE.match(before) or before.startswith(("-e ", "#")):
        return False
    after = next((lines[k].strip() for k in range(at + 1, min(at + 3, len(lines)))
                  if lines[k].strip()), "")
    return bool(pip.FREEZE_LINE.match(here) and "==" in here and pip.FREEZE_LINE.match(after))


def noise(lines: list[str], at: int, warned: int = -WARNING_LINES) -> str | None:
    """Why a line is a library's noise, not a report's: warnings, their source line, logs.
    `warned`: the index of the last warning line above, if any (most pastes have none)."""
    text = lines[at]
    if is_warning(text):
        return "a Python warning"
    if at - warned >= WARNING_LINES:
        return "a log line" if LOG_LINE.match(text.strip()) else None
    if at and WARNED_FROM.match(text) and \
            any(is_warning(lines[k]) for k in range(max(0, at - 3), at)):
        return "a Python warning's source line"
    if text[:1].isspace() and "warn(" in text and warning_above(lines, at) is not None:
        return "a Python warning's source line"     # under a message of several lines
    if in_warning_message(lines, at):
        return "a Python warning's message"
    if LOG_LINE.match(text.strip()):
        return "a log line"
    return None


def is_warning(text: str) -> bool:
    return bool(WARNING.match(text.strip())) and "Warning:" in text[:200]


def in_warning_message(lines: list[str], at: int) -> bool:
    """A line of a warning's message that runs over several lines: Python writes
    `file:line: Category: message` then the source line, indented (warnings.formatwarning),
    so the lines between a warning and its `warn(` source line are its message."""
    if not lines[at].strip() or lines[at][:1].isspace():
        return False
    above = warning_above(lines, at)
    below = next((k for k in range(at + 1, min(len(lines), above + WARNING_LINES))
                  if lines[k][:1].isspace() and "warn(" in lines[k]), None) \
        if above is not None else None
    return below is not None and not any(KEY_LINE.match(lines[k])
                                         for k in range(at + 1, below))


def warning_above(lines: list[str], at: int) -> int | None:
    """The warning whose message reaches down to `at`: the nearest above, within
    WARNING_LINES, with no line between that reads as a report's `Key: value`."""
    for k in range(at - 1, max(-1, at - WARNING_LINES), -1):
        if is_warning(lines[k]):
            return k
        if KEY_LINE.match(lines[k]):
            return None
    return None


def find_reports(text: str, whole_kind: Callable[[str], str | None]) -> Found:
    """The reports in a paste, each from its first line to the next report's."""
    raw = text.splitlines()
    lines: list[str] = []
    skipped: list[Skipped] = []
    warned = -WARNING_LINES
    for number, line in enumerate(raw):
        kept, why = stripped(line)
        if why is None:
            why = noise(raw, number, warned)
        if why == "a Python warning":
            warned = number
        if why is not None:
            skipped.append(Skipped(number + 1, line, why))
            kept = ""
        lines.append(kept)
    blanked = frozenset(skip.line for skip in skipped)
    joined = "\n".join(lines)
    kind = whole_kind(joined.strip())
    if kind in WHOLE_KINDS:            # a document: read whole, its own parser names a fault
        return Found([Part(0, lines, blanked=blanked)], skipped)
    starts: list[int] = []
    for at in range(len(lines)):
        if is_start(lines, at, inside=bool(starts) and inside_report(lines, starts[-1], at)):
            starts.append(at)
    if not starts:
        return Found([], skipped + prose(raw, lines, 0, len(lines)))
    skipped += prose(raw, lines, 0, starts[0])
    parts = [Part(start, lines[start:end], hint_of(lines[start]), blanked=blanked)
             for start, end in zip(starts, starts[1:] + [len(lines)])]
    return Found(parts, sorted(skipped, key=lambda s: s.line))


def hint_of(first: str) -> str | None:
    """check_env's first line names it even where the paste stops before its module list
    (by which its content is told apart)."""
    return "SGLang check_env" if SGLANG_FIRST.match(first.strip()) else None


def inside_report(lines: list[str], start: int, at: int) -> bool:
    """Whether `at` is inside the report that starts at `start` and may hold a matrix of its
    own: a collect_env or check_env, whose matrix follows its `... Topology:` line."""
    before = next((lines[k].strip() for k in range(at - 1, start - 1, -1) if lines[k].strip()),
                  "")
    return before.endswith("Topology:")


def is_prose(line: str) -> bool:
    """A sentence or a prompt, not a report's row: three words or more, two of them words."""
    words = line.split()
    said = sum(len(word.strip(".,:;!?()'\"`")) > 1 and word.strip(".,:;!?()'\"`").isalpha()
               and not word.isupper() for word in words)
    return bool(PROMPT.match(line.strip())) or len(words) >= 3 and \
        said >= max(2, len(words) // 2)


def prose(raw: list[str], lines: list[str], start: int, end: int) -> list[Skipped]:
    found = []
    for at in range(start, end):
        if lines[at].strip():
            why = "a prompt line" if PROMPT.match(lines[at].strip()) else "prose"
            found.append(Skipped(at + 1, raw[at], why))
    return found


# ---- reading one report, tolerantly --------------------------------------------------------

Read = Callable[[str, str, bool], Reading]


@dataclass
class PartReading:
    reading: Reading | None
    skipped: list[Skipped]          # prose after it, lines passed over, lines rejoined
    broken: list[Skipped]           # lines that broke it in the middle
    cut: str | None = None          # why it was read only as far as it goes
    error: Unreadable | None = None   # nothing could be read: why


def read_part(part: Part, source: str, read: Read, repair: bool = True,
              rejoin: bool = False) -> PartReading:
    """`repair`: False for a document (XML, JSON), whose parser's fault is the answer;
    `rejoin`: a layout of `Key: value` lines, where a line that is none and reads on when
    joined to the one above was wrapped (in columns, joining is no evidence)."""
    lines = list(part.lines)
    numbers = [part.first + k + 1 for k in range(len(lines))]     # the file's line numbers
    broken: list[Skipped] = []
    rejoined: list[Skipped] = []
    cut: str | None = None
    # what said the report stops short: the answer if nothing can be read even that far
    cut_error: Unreadable | None = None
    for _ in range(MAX_REPAIRS):
        try:
            reading = read("\n".join(lines) + "\n", source, cut is not None)
            break
        except Unreadable as why:
            if not repair:
                return PartReading(None, [], [], None, why)
            at = why.line - 1
            message = why.why
            if CUT_SHORT in message and cut is None and \
                    not any(line.strip() for line in lines[at + 1:]):
                cut = f"line {numbers[-1] if numbers else part.first + 1}: {message}"
                cut_error = why
                continue
            if not 0 <= at < len(lines) or not lines[at].strip() or cut_error is not None:
                return PartReading(None, [], broken, cut, cut_error or why)
            # the script's first line is whole, never wrapped: a line after it is its own
            if rejoin and at and lines[at - 1].strip() not in ("", FIRST_LINE) and \
                    not lines[at][:1].isspace() and \
                    not KEY_LINE.match(lines[at]) and \
                    reads_past(lines, at, source, read, cut is not None):
                rejoined.append(Skipped(numbers[at], lines[at], "a wrapped line, joined back"))
                lines[at - 1] = lines[at - 1].rstrip() + " " + lines[at].strip()
                del lines[at], numbers[at]
                continue
            broken.append(Skipped(numbers[at], lines[at], message))
            del lines[at], numbers[at]
    else:
        return PartReading(None, [], broken, cut, Unreadable(
            source, broken[-1].line if broken else part.first + 1,
            f"more than {MAX_REPAIRS} lines could not be read"))
    last = max((n for n, line in zip(numbers, lines) if line.strip()), default=0)
    return finished(reading, broken, rejoined, last, cut,
                    bool(cut) and open_gpu_list(lines, numbers, part.blanked))


def open_gpu_list(lines: list[str], numbers: list[int], blanked: frozenset[int]) -> bool:
    """Whether the text ends in a list of GPUs (collect_env's `GPU 1: ...` lines) that may go
    on: a paste cut there may be short of GPUs. The blank line collect_env prints after a
    list of several closes it whole; a markdown line left blank (a fence) does not."""
    last = next((k for k in range(len(lines) - 1, -1, -1) if lines[k].strip()), None)
    if last is None or not GPU_LINE.match(lines[last].strip()):
        return False
    return last + 1 == len(lines) or numbers[last + 1] in blanked


def reads_past(lines: list[str], at: int, source: str, read: Read, cut: bool) -> bool:
    """Whether joining line `at` onto the one before lets the report read past it."""
    trial = lines[:at - 1] + [lines[at - 1].rstrip() + " " + lines[at].strip()] + lines[at + 1:]
    try:
        read("\n".join(trial), source, cut)
    except Unreadable as why:
        return why.line - 1 > at - 1
    return True


def finished(reading: Reading, broken: list[Skipped], rejoined: list[Skipped], last: int,
             cut: str | None, in_gpus: bool) -> PartReading:
    """Broken lines after the last line read that read as words are prose after the report;
    others (a row cut short at the paste's end) break it, and it is not given whole."""
    prose_after = [Skipped(b.line, b.text, "prose after the report") for b in broken
                   if b.line > last and is_prose(b.text)]
    inside = [b for b in broken if b.line <= last or not is_prose(b.text)]
    if inside or cut:
        reading.complete = []          # a report with a gap is not given whole
    if in_gpus or (cut or inside) and reading.tool in ROW_A_GPU:
        # GPUs counted from their rows: a row lost, the count would be wrong, so unknown
        reading.facts.get("nvidia", {}).pop("gpu_count", None)
    return PartReading(reading, sorted(prose_after + rejoined, key=lambda s: s.line), inside,
                       cut)
