"""Markdown that is safe to paste into a GitHub issue: text from a snapshot, wherever it enters
`diff --markdown`, `diff --fleet --markdown` or `report --format md`, makes no HTML element,
image, link, autolink or @mention, and no code block is closed by data.

The markdown is rendered by cmark-gfm (GitHub's own fork of cmark, with its extensions:
tables, autolinks) with raw HTML let through as GitHub lets its allowed tags through; what
GitHub does after (a mention is an `@name` in text outside code and links) is read off the
rendered HTML."""
from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import cmarkgfm
import pytest
from cmarkgfm.cmark import Options
from conftest import Cli
from helpers.diffdata import edited, h200, save

# What a stranger's snapshot can carry, each at once in an env value, the hostname, a
# sitecustomize line and a worker's environment.
HOSTILE = [
    "<img src=https://evil.example/track.png>",
    "</summary></details><img src=x onerror=alert(1)>",
    "![pixel](https://evil.example/pixel.png)",
    "[click me](https://evil.example/login)",
    "<https://evil.example/angle>",
    "see https://evil.example/bare now",
    "www.evil.example",
    "ping @octocat and @github/security",
    "mail root@evil.example",
    "&lt;img src=entity&gt;",
    "line one\r<img src=carriage-return>",
    "| cell | break |",
]
FENCE_BREAKER = "x\n```\n````\n</details>\n<img src=fence-closed>\n"
# the tags envsnap's markdown makes of its own (headings, tables, folded blocks, code)
OWN_TAGS = {"h1", "h2", "h3", "p", "strong", "em", "table", "thead", "tbody", "tr", "th", "td",
            "code", "pre", "details", "summary", "ul", "li", "blockquote", "hr", "br"}
MENTION = re.compile(r"(?<![\w`])@[A-Za-z0-9]")
EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.-]+")


class Rendered(HTMLParser):
    """The tags of the rendered HTML, its text outside code, and all of its text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: set[str] = set()
        self.attributes: list[tuple[str, str | None]] = []
        self.code_depth = 0
        self.text: list[str] = []
        self.all_text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attributes += attrs
        self.code_depth += tag in ("code", "pre")

    def handle_endtag(self, tag: str) -> None:
        self.code_depth -= tag in ("code", "pre")

    def handle_data(self, data: str) -> None:
        self.all_text.append(data)
        if self.code_depth == 0:
            self.text.append(data)


def rendered(markdown: str) -> Rendered:
    html = cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE)
    page = Rendered()
    page.feed(html)
    return page


def plant(document: dict[str, Any]) -> None:
    shell = document["facts"]["env"]["shell"]
    for number, text in enumerate(HOSTILE):
        shell[f"NCCL_HOSTILE_{number}"] = text
    shell["CUDA_HOME"] = " ".join(HOSTILE)
    document["facts"]["system"]["hostname"] = "gpu <img src=host> @octocat"
    customize = document["facts"]["python_env"]["customize"]["sitecustomize"]
    customize["content"] = "\n".join([*HOSTILE, FENCE_BREAKER])


def check_safe(markdown: str) -> None:
    page = rendered(markdown)
    assert page.tags <= OWN_TAGS, sorted(page.tags - OWN_TAGS)
    assert not [name for name, _ in page.attributes if name in ("src", "href", "onerror")]
    text = "".join(page.text)
    assert not MENTION.search(text), MENTION.findall(text)
    assert not EMAIL.search(text) and "https://" not in text and "www." not in text


@pytest.fixture
def store(cli: Cli, tmp_path: Path) -> Cli:
    root = Path(cli.env["ENVSNAP_STORE"])
    root.mkdir(parents=True)
    save(h200(label="good"), root / "good.yaml")
    save(edited(h200(label="bad"), plant), root / "bad.yaml")
    return cli


@pytest.mark.parametrize("command", [
    ("diff", "good", "bad", "--markdown"),
    ("diff", "good", "bad", "--markdown", "--all"),
    ("diff", "--fleet", "good", "bad", "--markdown"),
    ("report", "bad", "--vs", "good", "--format", "md"),
    ("report", "bad", "--format", "md", "--no-mask"),
], ids=["diff", "diff-all", "fleet", "report-vs", "report"])
def test_markdown_from_a_hostile_snapshot_is_safe_to_paste_into_an_issue(
        store: Cli, command: tuple[str, ...]) -> None:
    result = store(*command)
    assert result.returncode in (0, 1), result.stderr
    assert "NCCL_HOSTILE_1" in result.stdout or "CUDA_HOME" in result.stdout
    check_safe(result.stdout)


def test_what_was_escaped_is_still_shown_as_it_was(store: Cli) -> None:
    """Safe, and faithful: the hostile text reads on the page as it stands in the snapshot."""
    page = rendered(store("diff", "good", "bad", "--markdown").stdout)
    shown = "".join(page.all_text)
    for hostile in HOSTILE[:10]:   # in the why of each finding (a long one shortened)
        assert f"added: {hostile[:30]}" in shown, hostile
    assert "added: | cell | break |" in shown and "added: line one <img" in shown
    assert FENCE_BREAKER.rstrip("\n").replace("\n", "\n+") in shown   # the fence held
    assert "@octocat" in shown and "@octocat" not in "".join(page.text)   # in code only
