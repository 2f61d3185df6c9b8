"""`envsnap timeline --label L`: the timeline kept in the store, signed like a snapshot, shown by
`show`, listed by `list`, its label refused when in use; on a real clone with a real `git pull`
at the real time."""
from __future__ import annotations

import subprocess
from pathlib import Path

from conftest import Cli
from helpers.folded import words
from helpers.gitrepos import Story


def pulled(tmp_path: Path) -> Story:
    story = Story(tmp_path / "story")
    story.upstream_moves(2)
    subprocess.run(["git", "-c", "pull.rebase=false", "pull", "-q", "origin", "main"],
                   cwd=story.checkout.path, env=story.env, check=True)   # now, not the clock
    return story


def test_a_labelled_timeline_is_stored_signed_shown_and_listed(cli: Cli,
                                                               tmp_path: Path) -> None:
    story = pulled(tmp_path)
    repo = str(story.checkout.path)
    made = cli("timeline", "local", "--repo", repo, "--since", "10m", "--label", "incident")
    assert made.returncode == 0, made.stderr
    stored = Path(cli.env["ENVSNAP_STORE"]) / "incident.timeline"
    assert f"saved timeline incident: {stored}" in words(made.stdout)

    listed = cli("list")
    assert any(line.split()[0] == "incident" and line.endswith("local  (a timeline)")
               for line in listed.stdout.splitlines()), listed.stdout
    shown = cli("show", "incident")
    assert shown.returncode == 0, shown.stderr
    assert "provenance  mine (signed with your key)" in shown.stdout
    pull = next(line for line in shown.stdout.splitlines() if "pull in" in line)
    assert pull in made.stdout   # the same event line as the timeline printed
    assert f"undo: envsnap restore --repo {repo} --at " in words(shown.stdout)

    # a label names one thing: neither a second timeline nor a capture takes it
    again = cli("timeline", "local", "--repo", repo, "--label", "incident")
    assert again.returncode == 2 and "label 'incident' already exists" in again.stderr
    capture = cli("capture", "local", "--label", "incident")
    assert capture.returncode == 2 and "already exists" in capture.stderr

    stored.write_text(stored.read_text().replace("pull in", "push in"))
    assert "provenance  foreign (content changed)" in cli("show", "incident").stdout
