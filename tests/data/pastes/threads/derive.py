"""Writes the corpus's paste files from sources.jsonl, mechanically (README.md says how): for
each search excerpt, the post as written (`.template.txt`) and, where the report sits in a code
block, that block with its fences (`.fenced.txt`) and its inside (`.copy-button.txt`).
Run from anywhere: `python tests/data/pastes/threads/derive.py`; it rewrites what it wrote."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import NamedTuple

HERE = Path(__file__).resolve().parent
SOURCES = HERE / "sources.jsonl"
PASTES = HERE / "pastes"

# the search excerpt's own lines: where the thread is, then who wrote the post and when
POST_START = re.compile(r"^(?P<who>\S+) · (?:description|comment) · (?P<date>\d{4}-\d\d-\d\d)$"
                        r"|^\[turn \d+ by \S+, continued\]$")
NEXT_POST = re.compile(r"^\S+ · (?:description|comment|review|review thread) · \d{4}-\d\d-\d\d$")
FENCE = re.compile(r"^\s*(`{3,})")
# the first line of each tool's report: what the code block holding it must contain
MARKERS = {"torch": re.compile(r"PyTorch version|System Info"),
           "vllm": re.compile(r"PyTorch version|System Info"),
           "sglang": re.compile(r"^Python: "),
           "smi": re.compile(r"NVIDIA-SMI \d"),
           "topo": re.compile(r"^\s*GPU0\s"),
           "pip": re.compile(r"^\s*Package\s+Version\b|^\s*[A-Za-z0-9][\w.-]*==\S")}
TOOLS = {"pytorch": "torch", "vllm": "vllm", "sglang": "sglang", "nvidia-smi": "smi",
         "topo": "topo", "pip": "pip"}


# What the corpus keeps of a post is what machines printed and the markdown around it: a
# sentence a person wrote is not ours to copy, so it is replaced by this line (one for one,
# so line numbers hold), as is the thread's title and who posted. Prose is told by shape:
# outside a code block, not a tool's warning nor a report's `Key:` line, at least four
# words, two of them lower-case, that open with words (four, or six where indented) or are
# mostly words of letters (not indented).
OWN_WORDS = "(the reporter's own words stood here: see the thread)"
WORD = re.compile(r"^`?[A-Za-z][A-Za-z'’,.;!?()-]*`?$")


def is_prose(line: str) -> bool:
    text = line.strip()
    if not text or text.startswith(("#", "<", "|", "+", "=", "-", "*", "$", "[", "`")):
        return False
    if re.search(r"Warning\b|\.py:\d+:", text) or text.endswith(":") and len(text.split()) <= 5:
        return False
    body = text[2:] if text.startswith("> ") else text
    words = body.split()
    if len(words) < 4 or sum(word.islower() for word in words) < 2:
        return False
    if re.match(r"^Package\s+Version\b", body):  # pip list's header
        return False
    if re.match(r"^[^:]{1,60}:\s+\S", body) and not body.endswith((".", "?", "!")):
        return False
    # a sentence opens with words, whatever commands or versions it names later (quoted in
    # backticks, or a link's address: taken out); indented (a tool's legend is), it takes a
    # longer opening
    words = [word.strip(".,;:!?()[]\"'`") for word in
             re.sub(r"`[^`]*`|\]\([^)]*\)", " ", body).split()] or words
    words = [word for word in words if word] or words
    opening = next((k for k, word in enumerate(words) if not WORD.match(word)), len(words))
    if opening >= (6 if line[:1].isspace() else 4):
        return True
    return not line[:1].isspace() and \
        sum(bool(WORD.match(word)) for word in words) / len(words) >= 0.75


def scrubbed(excerpt: str) -> str:
    """The excerpt with each person's sentences, the title and the posters' names replaced."""
    out, fenced, posted = [], False, False
    for line in excerpt.split("\n"):
        if FENCE.match(line):
            fenced = not fenced
        elif POST_START.match(line) or NEXT_POST.match(line):
            posted = True
            line = re.sub(r"^\S+ · ", "someone · ", line)
            line = re.sub(r" by \S+,", " by someone,", line)
        elif not posted and line.startswith("# "):
            line = "# (the thread's title)"
        elif not fenced and is_prose(line):
            line = ("> " if line.lstrip().startswith("> ") else "") + OWN_WORDS
        out.append(line)
    return "\n".join(out)


class Paste(NamedTuple):
    name: str
    url: str
    date: str
    tool: str
    template: str
    fenced: str | None
    copy_button: str | None


def post_of(excerpt: str, marker: re.Pattern[str]) -> tuple[list[str], str, bool]:
    """The lines of the first post holding the report's first line (else the first post), its
    date ('' where the excerpt does not say) and whether it runs to the excerpt's end (then its
    last line may be cut, and is dropped unless a fence)."""
    lines = excerpt.split("\n")
    starts = [i for i, line in enumerate(lines) if POST_START.match(line)]
    ends = {i: next((j for j in range(i + 1, len(lines)) if NEXT_POST.match(lines[j])),
                    len(lines)) for i in starts}
    start = next((i for i in starts if any(marker.search(line) for line in lines[i + 1:ends[i]])),
                 starts[0])
    found = POST_START.match(lines[start])
    date = found.group("date") or "" if found else ""
    body = lines[start + 1:]
    end = next((i for i, line in enumerate(body) if NEXT_POST.match(line)), None)
    if end is not None:
        body = body[:end]
        while body and not body[-1].strip():
            body.pop()
        return body, date, False
    if body and not FENCE.match(body[-1]):
        body = body[:-1]
    return body, date, True


def report_block(lines: list[str], marker: re.Pattern[str]) -> tuple[int, int | None] | None:
    """(opening fence, closing fence or None where the post ends first) of the first code block
    holding the report's first line."""
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        ticks = opening.group(1)
        close = next((j for j in range(index + 1, len(lines))
                      if lines[j].strip() == ticks or lines[j].strip().startswith(ticks)
                      and not lines[j].strip()[len(ticks):].strip()), None)
        inside = lines[index + 1:close]
        if any(marker.search(line) for line in inside):
            return index, close
        if close is None:
            return None
        index = close + 1
    return None


def derive(source: dict[str, str]) -> Paste:
    tool = TOOLS[source["tool"]]
    owner_repo, number = re.match(r"https://github\.com/([^/]+/[^/]+)/(?:issues|pull)/(\d+)",
                                  source["url"]).groups()  # type: ignore[union-attr]
    name = f"{tool}_{owner_repo.split('/')[1].lower()}_{number}"
    lines, date, _ = post_of(scrubbed(source["excerpt"]), MARKERS[tool])
    block = report_block(lines, MARKERS[tool])
    fenced = copy_button = None
    if block is not None:
        opening, closing = block
        inside = lines[opening + 1:closing]
        copy_button = "\n".join(inside) + "\n"
        fence = FENCE.match(lines[opening]).group(1)  # type: ignore[union-attr]
        last = lines[closing] if closing is not None else fence
        fenced = "\n".join([lines[opening], *inside, last]) + "\n"
    return Paste(name, source["url"], date, tool, "\n".join(lines) + "\n", fenced, copy_button)


def main() -> None:
    PASTES.mkdir(exist_ok=True)
    for old in PASTES.glob("*.txt"):
        old.unlink()
    index, sources = [], []
    for line in SOURCES.read_text(encoding="utf-8").splitlines():
        source = json.loads(line)
        sources.append(json.dumps({**source, "excerpt": scrubbed(source["excerpt"])},
                                  ensure_ascii=False))
        paste = derive(source)
        styles = {"template": paste.template, "fenced": paste.fenced,
                  "copy-button": paste.copy_button}
        for style, text in styles.items():
            if text is not None:
                (PASTES / f"{paste.name}.{style}.txt").write_text(text, encoding="utf-8")
        index.append({"name": paste.name, "tool": paste.tool, "url": paste.url,
                      "date": paste.date,
                      "styles": [s for s, text in styles.items() if text is not None]})
    SOURCES.write_text("\n".join(sources) + "\n", encoding="utf-8")
    (HERE / "index.json").write_text(json.dumps(index, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
