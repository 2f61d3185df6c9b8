"""What is shown is what runs: a control character from a snapshot, a host or a repository
reaches the terminal as its escape (text.visible, through the CLI's one output layer), in
reviews, show, list, diff and error lines, locally and over the test sshd."""
from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import Cli
from helpers.gitrepos import Story
from helpers.restorestory import capture_good
from helpers.sshd import Sshd

from envsnap.errors import ExitCode

# A recorded benchmark that, printed raw, erases its own first part: a terminal would show
# only " python3 bench.py" after "benchmark (--rerun):" and the touch would run unseen.
LYING = "touch /tmp/pwned #\r\x1b[2K python3 bench.py"
LYING_SHOWN = "touch /tmp/pwned #\\r\\x1b[2K python3 bench.py"
CONTROLS = ("\r", "\x1b", "\x07", "\u202e", "\u200b", "\x9b")


@pytest.fixture
def story(tmp_path: Path) -> Story:
    return Story(tmp_path / "story")


def raw_controls(text: str) -> list[str]:
    return [char for char in CONTROLS if char in text]


def planted(cli: Cli, label: str = "good", **bench: object) -> Path:
    """The stored snapshot with a benchmark record (edited by hand: foreign now)."""
    path = Path(cli.env["ENVSNAP_STORE"]) / f"{label}.yaml"
    document = yaml.safe_load(path.read_text())
    document["bench"] = {"values": [94.0], "command": LYING, "metric": "x: ([0-9]+)", **bench}
    path.write_text(yaml.safe_dump(document))
    return path


def where(request: pytest.FixtureRequest, over_ssh: bool) -> tuple[Cli, str]:
    if not over_ssh:
        return request.getfixturevalue("cli"), "local"
    sshd: Sshd = request.getfixturevalue("sshd")
    return request.getfixturevalue("ssh_cli"), sshd.addresses[0]


BOTH = pytest.mark.parametrize("over_ssh", [False, pytest.param(True, marks=pytest.mark.ssh)],
                               ids=["local", "ssh"])


@BOTH
def test_restores_review_shows_a_carriage_return_and_erase_line_in_the_bench_command(
        request: pytest.FixtureRequest, over_ssh: bool, story: Story) -> None:
    cli, host = where(request, over_ssh)
    capture_good(cli, story, host)
    planted(cli)
    result = cli("restore", "good", "--rerun", "--check", "--repo", str(story.checkout.path))
    out = result.stdout + result.stderr
    assert f"benchmark (--rerun): {LYING_SHOWN}" in result.stdout, out
    assert raw_controls(out) == [], out


def test_trusts_review_shows_the_escape(cli: Cli, story: Story) -> None:
    capture_good(cli, story, "local")
    planted(cli)
    result = cli("trust", "good")
    assert result.returncode == ExitCode.DECLINED, result.stdout + result.stderr
    assert f"benchmark (--rerun): {LYING_SHOWN}" in result.stdout, result.stdout
    assert raw_controls(result.stdout + result.stderr) == []


def test_show_list_and_diff_write_no_raw_escape(cli: Cli, story: Story) -> None:
    """An OSC 52 clipboard write in an env value, bidi and zero-width controls in a commit
    subject of the real repository, a C1 CSI in the label's host name."""
    subject = "Fix\u202e gnp.exe\u200b \x1b]0;owned\x07"
    capture_good(cli, story, "local")
    story.checkout.git("commit", "-q", "--allow-empty", "-m", subject)
    result = cli("capture", "local", "--label", "bad", "--repo", str(story.checkout.path))
    assert result.returncode == 0, result.stderr
    path = Path(cli.env["ENVSNAP_STORE"]) / "bad.yaml"
    document = yaml.safe_load(path.read_text())
    # a name the capture records (its prefixes): one it does not would be unknown, not shown
    document["facts"]["env"].setdefault("shell", {})["NCCL_CLIP"] = "\x1b]52;c;cHduZWQ=\x07"
    document["meta"]["host"] = "gpu\x9b2J01"
    path.write_text(yaml.safe_dump(document))
    for args in (("show", "bad"), ("list",), ("diff", "good", "bad", "--all")):
        result = cli(*args)
        out = result.stdout + result.stderr
        assert raw_controls(out) == [], (args, out)
    assert "gpu\\x9b2J01" in cli("list").stdout and "gpu\\x9b2J01" in cli("show", "bad").stdout
    shown = cli("diff", "good", "bad", "--all").stdout
    assert "\\x1b]52;c;cHduZWQ=\\x07" in shown, shown
    assert "Fix\\u202e gnp.exe\\u200b \\x1b]0;owned\\x07" in shown, shown
    coloured = diff_at_a_terminal(cli)
    assert "\x1b[0m" in coloured, coloured       # envsnap's own colour codes pass
    assert "\\x1b]52;c;cHduZWQ=\\x07" in coloured and "\x1b]" not in coloured, coloured


def diff_at_a_terminal(cli: Cli) -> str:
    """`diff good bad --all` with stdout on a terminal (so in colour), as the terminal got it."""
    main_end, child_end = pty.openpty()
    running = subprocess.Popen([sys.executable, "-m", "envsnap", "diff", "good", "bad", "--all"],
                               cwd=cli.cwd, env={k: v for k, v in cli.env.items()
                                                 if k != "NO_COLOR"},
                               stdin=subprocess.DEVNULL, stdout=child_end, stderr=child_end)
    os.close(child_end)
    chunks = []
    while True:
        try:
            chunk = os.read(main_end, 65536)
        except OSError:   # the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    running.wait(timeout=120)
    os.close(main_end)
    return b"".join(chunks).decode("utf-8", "replace")



def test_show_yaml_of_a_bidi_value_is_the_same_document_and_safe(cli: Cli, story: Story) -> None:
    """--yaml is a document to read back: a bidi or zero-width character is escaped by YAML
    itself (the same value when parsed), not by the output layer (which would change it)."""
    capture_good(cli, story, "local")
    path = Path(cli.env["ENVSNAP_STORE"]) / "good.yaml"
    document = yaml.safe_load(path.read_text())
    document["facts"]["env"].setdefault("shell", {})["NOTE"] = "abc\u202edef\u200bghi"
    path.write_text(yaml.safe_dump(document, allow_unicode=True))
    shown = cli("show", "good", "--yaml").stdout
    assert raw_controls(shown) == []
    assert yaml.safe_load(shown)["facts"]["env"]["shell"]["NOTE"] == "abc\u202edef\u200bghi"


def test_an_error_line_naming_data_shows_the_escape(cli: Cli, story: Story) -> None:
    """The one error line of an invalid snapshot names the repo key it found: a window-title
    escape in that key is shown, not obeyed."""
    capture_good(cli, story, "local")
    path = Path(cli.env["ENVSNAP_STORE"]) / "good.yaml"
    document = yaml.safe_load(path.read_text())
    document["facts"]["git"]["repos"]["/x\x1b]0;pwned\x07"] = {"head": ["not", "a", "sha"]}
    path.write_text(yaml.safe_dump(document))
    result = cli("show", "good")
    assert result.returncode == 4, result.stdout + result.stderr
    assert '["/x\\x1b]0;pwned\\x07"].head: expected a string' in result.stderr, result.stderr
    assert raw_controls(result.stderr) == []
