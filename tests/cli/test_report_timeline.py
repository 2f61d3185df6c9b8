"""`envsnap report LABEL --timeline TIME`: the host's timeline as a section of the md and html
report, on a real clone with a real `git pull` (at the real time) of a commit whose subject
is markup, through the report's writers of untrusted text."""
from __future__ import annotations

import json
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import yaml
from conftest import Cli
from helpers.gitrepos import Story

HOSTILE = "<img src=x onerror=alert(1)> **bold** | cell"


class Text(HTMLParser):
    """The page's text, and every tag it opens (a planted <img> would be one)."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def pulled_and_captured(cli: Cli, tmp_path: Path) -> Story:
    story = Story(tmp_path / "story")
    story.dev.commit(HOSTILE, {"python/sglang/srt/models/llama.py": "FAST = False\n"})
    story.dev.git("push", "-q", "origin", "main")
    subprocess.run(["git", "-c", "pull.rebase=false", "pull", "-q", "origin", "main"],
                   cwd=story.checkout.path, env=story.env, check=True)   # now, not the clock
    assert cli("capture", "local", "--label", "slow", "--repo",
               str(story.checkout.path)).returncode == 0
    return story


def test_md_and_html_report_gain_the_timeline(cli: Cli, tmp_path: Path) -> None:
    story = pulled_and_captured(cli, tmp_path)
    md = cli("report", "slow", "--timeline", "10m", "--format", "md")
    assert md.returncode == 0, md.stderr
    section = md.stdout[md.stdout.index("## Timeline"):md.stdout.index("## Details")]
    row = next(line for line in section.splitlines() if "pull in" in line)
    assert "snapshot slow captured" in section and section.index("pull in") < \
        section.index("snapshot slow captured")
    assert "recorded by the tool" in row
    assert f"undo: envsnap restore --repo {story.checkout.path} --at " in row
    # the subject is text: no tag, no emphasis, no extra table cell
    assert "<img" not in section and "&lt;img src=x onerror=alert(1)>" in row
    assert "\\*\\*bold\\*\\* \\| cell" in row and row.count(" | ") == 3

    page = tmp_path / "slow.html"
    html = cli("report", "slow", "--timeline", "10m", "-o", str(page))
    assert html.returncode == 0, html.stderr
    parsed = Text()
    parsed.feed(page.read_text())
    text = " ".join(" ".join(parsed.text).split())
    assert "Timeline" in text and "pull in" in text and HOSTILE in text
    assert "img" not in parsed.tags and "script" not in parsed.tags


    as_json = json.loads(cli("report", "slow", "--timeline", "10m", "--format", "json").stdout)
    assert any(row["what"].startswith("pull in") for row in as_json["timeline"]["rows"])


def test_a_foreign_snapshot_is_not_followed_to_its_host(cli: Cli, tmp_path: Path) -> None:
    """A stranger's snapshot would pick the host to reach, the checkouts to read and the
    interpreter to run: --timeline refuses it, naming the ways on."""
    story = Story(tmp_path / "story")
    assert cli("capture", "local", "--label", "theirs", "--repo",
               str(story.checkout.path)).returncode == 0
    path = Path(cli.env["ENVSNAP_STORE"]) / "theirs.yaml"
    document = yaml.safe_load(path.read_text())
    document["meta"].pop("signature")
    path.write_text(yaml.safe_dump(document))
    result = cli("report", "theirs", "--timeline", "10m")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "'theirs' is foreign (unsigned)" in result.stderr
    assert "`envsnap trust theirs` first, or run `envsnap timeline HOST`" in result.stderr
    assert cli("report", "theirs").returncode == 0      # the report itself reaches nothing
