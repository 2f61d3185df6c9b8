"""`envsnap timeline` with nothing named looks for itself, and says what it looked at; a
stash reflog rewritten after its newest line is a pop only where a stored snapshot's stash
list shows a stash gone (real git, pip and Python workers; locally and over the test sshd)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Cli, unique_marker
from helpers.folded import words
from helpers.timelinestory import STEP, Story, git, pip, prepare, upstream_commit
from helpers.wheels import make_wheel


@pytest.fixture
def story(tmp_path: Path) -> Iterator[Story]:
    found = prepare(tmp_path / "host", unique_marker("timeline-sees"))
    yield found
    found.stop()


def new_repo(path: Path, env: dict[str, str], name: str, text: str) -> Path:
    path.mkdir(parents=True)
    git(path, env, "init", "-q", "-b", "main")
    (path / name).write_text(text)
    git(path, env, "add", "-A")
    git(path, env, "commit", "-q", "-m", f"Add {name}")
    return path


def commit(path: Path, env: dict[str, str], name: str, text: str, message: str) -> None:
    (path / name).write_text(text)
    git(path, env, "add", "-A")
    git(path, env, "commit", "-q", "-m", message)


@pytest.fixture
def workers(story: Story, tmp_path: Path) -> Iterator[tuple[Path, list[subprocess.Popen[bytes]]]]:
    """Two workers of the story's venv python: one whose cwd is the checkout, one that runs
    a script of another checkout from a folder that is none."""
    tools = new_repo(tmp_path / "tools", story.env, "serve.py", "import time\ntime.sleep(120)\n")
    elsewhere = tmp_path / "run-folder"
    elsewhere.mkdir()
    started = [subprocess.Popen([str(story.python), "-c", "import time; time.sleep(120)",
                                 story.marker], cwd=story.checkout, env={"PATH": "/usr/bin:/bin"}),
               subprocess.Popen([str(story.python), str(tools / "serve.py"), story.marker],
                                cwd=elsewhere, env={"PATH": "/usr/bin:/bin"})]
    yield tools, started
    for proc in started:
        proc.kill()
        proc.wait()


def what_of(events: list[dict[str, Any]], kind: str) -> list[str]:
    return [event["what"] for event in events if event["kind"] == kind]


@pytest.mark.parametrize("over_ssh", [False, True], ids=["local", "ssh"])
def test_with_nothing_named_it_reads_the_running_pythons_and_the_stores_checkouts(
        over_ssh: bool, story: Story, workers: tuple[Path, list[subprocess.Popen[bytes]]],
        request: pytest.FixtureRequest, tmp_path: Path) -> None:
    cli: Cli = request.getfixturevalue("ssh_cli" if over_ssh else "cli")
    host = request.getfixturevalue("sshd").addresses[0] if over_ssh else "local"
    tools, started = workers
    # a checkout no process runs in, known only from a snapshot of this host
    recorded = new_repo(tmp_path / "recorded", story.env, "notes.md", "one\n")
    assert cli("capture", host, "--label", "earlier", "--repo", str(recorded)).returncode == 0
    # the folder the timeline is run in, a checkout of its own
    here = new_repo(tmp_path / "here", story.env, "a.txt", "a\n")
    time.sleep(STEP)
    upstream_commit(tmp_path / "host" / "dev", story.env, "pynccl.py", "VERIFY_MS = 29\n")
    git(story.checkout, story.env, "-c", "pull.rebase=false", "pull", "-q", "origin", "main")
    commit(tools, story.env, "serve.py", "import time\ntime.sleep(121)\n", "Serve longer")
    commit(recorded, story.env, "notes.md", "two\n", "More notes")
    commit(here, story.env, "a.txt", "b\n", "Here too")
    pip(story.python, make_wheel(tmp_path / "host", "1.0"))
    cli.cwd = here
    result = cli("timeline", host, "--since", "5m", "--log-root", str(story.root), "--json")
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    seen = found["looked_at"]
    assert seen["found"].startswith("found from running python processes, the store's")
    assert {str(story.checkout), str(tools), str(recorded)} <= set(seen["repos"])
    assert (str(here) in seen["repos"]) is not over_ssh   # the current folder: locally only
    assert str(story.python) in seen["pythons_read"]      # the venv's, not the base it links to
    assert seen["checkouts"] == len(seen["repos"]) and seen["workers"] >= 2
    events = found["events"]
    checkouts = what_of(events, "checkout")
    assert any(line.startswith(f"pull in {story.checkout}:") for line in checkouts)
    assert any(line.startswith(f"commit in {tools}:") for line in checkouts)
    assert any(line.startswith(f"commit in {recorded}:") for line in checkouts)
    assert any(line.startswith(f"commit in {here}:") for line in checkouts) is not over_ssh
    assert f"python package tinypkg 1.0 installed by pip ({story.python})" in \
        what_of(events, "python-package")
    starts = {event["subject"] for event in events if event["kind"] == "process-start"}
    assert {str(proc.pid) for proc in started} <= starts
    # the text says it in its header
    text = cli("timeline", host, "--since", "5m", "--log-root", str(story.root))
    assert text.returncode == 0, text.stderr
    head = words(text.stdout.split("events, oldest first:")[0])
    # (the machine's other processes come and go between the two runs: the counts too)
    assert re.search(r"looked at: \d+ checkouts \(found from running python processes, the "
                     r"store's snapshots of this host", head), head


def test_named_checkouts_are_said_as_named_and_kept_with_a_saved_timeline(
        cli: Cli, story: Story) -> None:
    said = "looked at: 1 checkout (as named), 1 python, 0 worker processes"
    result = cli("timeline", "local", "--repo", str(story.checkout), "--since", "5m",
                 "--log-root", str(story.root), "--label", "kept")
    assert result.returncode == 0, result.stderr
    assert said in words(result.stdout)
    shown = cli("show", "kept")
    assert shown.returncode == 0, shown.stderr
    assert said in words(shown.stdout)


def stash_events(cli: Cli, story: Story, host: str = "local") -> list[dict[str, Any]]:
    result = cli("timeline", host, "--repo", str(story.checkout), "--python", str(story.python),
                 "--log-root", str(story.root), "--since", "5m", "--json")
    assert result.returncode == 0, result.stderr
    return [e for e in json.loads(result.stdout)["events"] if e["kind"] == "stash"]


def test_a_slow_push_is_never_read_as_a_pop(cli: Cli, story: Story) -> None:
    """git stamps a push's line as the push begins: a push that takes over a second leaves
    the file newer than its newest line, as a pop does. Without a record it cannot tell."""
    (story.checkout / "pynccl.py").write_text("VERIFY_MS = 1\n")
    git(story.checkout, story.env, "stash", "push", "-q", "-m", "kept")
    (story.checkout / "pynccl.py").write_text("VERIFY_MS = 2\n")
    git(story.checkout, story.env, "stash", "push", "-q", "-m", "slow one")
    log = story.checkout / ".git" / "logs" / "refs" / "stash"
    line_time = int(log.read_text().splitlines()[-1].split("> ", 1)[1].split()[0])
    os.utime(log, (line_time + 1.6, line_time + 1.6))   # the push's end, 1.6 s after its line
    events = stash_events(cli, story)
    assert not any("popped" in event["what"] for event in events), events
    (rewritten,) = [event for event in events if "rewritten" in event["what"]]
    assert "a pop or drop, or a push that took over a second: cannot tell (2 left)" in \
        rewritten["what"]
    assert rewritten["exactness"] == "file time"
    assert [event["what"].split(": ", 1)[1] for event in events if "pushed" in event["what"]] \
        == ["On main: kept", "On main: slow one"]


@pytest.mark.parametrize("over_ssh", [False, True], ids=["local", "ssh"])
def test_a_pop_after_a_snapshot_names_the_stash_it_took(
        over_ssh: bool, story: Story, request: pytest.FixtureRequest) -> None:
    cli: Cli = request.getfixturevalue("ssh_cli" if over_ssh else "cli")
    host = request.getfixturevalue("sshd").addresses[0] if over_ssh else "local"
    (story.checkout / "pynccl.py").write_text("VERIFY_MS = 1\n")
    git(story.checkout, story.env, "stash", "push", "-q", "-m", "first try")
    (story.checkout / "pynccl.py").write_text("VERIFY_MS = 2\n")
    git(story.checkout, story.env, "stash", "push", "-q", "-m", "second try")
    assert cli("capture", host, "--label", "with-stashes", "--repo",
               str(story.checkout)).returncode == 0
    time.sleep(STEP + 1)   # the pop's rewrite is then over a second after the newest line
    git(story.checkout, story.env, "stash", "pop", "-q")
    popped_at = time.time()
    events = stash_events(cli, story, host)
    (popped,) = [event for event in events if "popped" in event["what"]]
    assert popped["what"] == \
        f"stash popped or dropped in {story.checkout}: On main: second try (1 left)"
    assert popped["exactness"] == "file time"
    assert "snapshot with-stashes recorded stash" in popped["evidence"]
    assert popped_at - 1 < popped["time"] <= popped_at + 0.05
    assert not any("rewritten" in event["what"] for event in events)


def test_popping_the_last_stash_recorded_by_a_snapshot_is_named(cli: Cli, story: Story) -> None:
    """Popping the only stash deletes the stash reflog: the stash the snapshot recorded is
    gone, at the time its folder last changed."""
    (story.checkout / "pynccl.py").write_text("VERIFY_MS = 3\n")
    git(story.checkout, story.env, "stash", "push", "-q", "-m", "only try")
    assert cli("capture", "local", "--label", "one-stash", "--repo",
               str(story.checkout)).returncode == 0
    time.sleep(STEP)
    git(story.checkout, story.env, "stash", "pop", "-q")
    popped_at = time.time()
    assert not (story.checkout / ".git" / "logs" / "refs" / "stash").exists()
    (popped,) = [event for event in stash_events(cli, story) if "popped" in event["what"]]
    assert popped["what"] == \
        f"stash popped or dropped in {story.checkout}: On main: only try (0 left)"
    assert "is gone); its folder's mtime" in popped["evidence"]
    assert popped_at - 1 < popped["time"] <= popped_at + 0.05


@pytest.mark.skipif(os.geteuid() != 0, reason="handing a checkout to another user needs root")
def test_a_checkout_another_user_owns_is_counted_never_read(cli: Cli, story: Story,
                                                            tmp_path: Path) -> None:
    theirs = new_repo(tmp_path / "theirs", story.env, "x.py", "X = 1\n")
    for folder, _, files in os.walk(theirs):
        for name in [folder, *(os.path.join(folder, file) for file in files)]:
            os.chown(name, 65534, 65534)   # nobody's
    worker = subprocess.Popen([str(story.python), "-c", "import time; time.sleep(60)",
                               story.marker], cwd=theirs, env={"PATH": "/usr/bin:/bin"})
    try:
        result = cli("timeline", "local", "--since", "5m", "--log-root", str(story.root),
                     "--json")
    finally:
        worker.kill()
        worker.wait()
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)["looked_at"]
    assert str(theirs) not in seen["repos"]
    assert any(line.endswith("of other users (their git config is theirs)")
               for line in seen["not_looked_at"]), seen
