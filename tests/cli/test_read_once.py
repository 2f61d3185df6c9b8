"""Read once, use what was checked: restore loads the snapshot once, checks it, and hands the
checked document (never its label) to the playbook and every later step. A store file
swapped after the check (a store others can write: a shared folder of a fleet) is not what
is written. The swap happens at the check itself (provenance.verify_as_user, wrapped): every
read after it would see the stranger's file."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import Cli
from helpers.gitrepos import Story
from helpers.restorestory import capture_good, moved_and_dirty
from helpers.sshd import Sshd

from envsnap.snapshot import provenance

BOTH = pytest.mark.parametrize("over_ssh", [False, pytest.param(True, marks=pytest.mark.ssh)],
                               ids=["local", "ssh"])


def where(request: pytest.FixtureRequest, over_ssh: bool) -> tuple[Cli, str]:
    if not over_ssh:
        return request.getfixturevalue("cli"), "local"
    sshd: Sshd = request.getfixturevalue("sshd")
    return request.getfixturevalue("ssh_cli"), sshd.addresses[0]


@BOTH
def test_a_store_file_swapped_after_the_check_is_not_what_is_written(
        request: pytest.FixtureRequest, over_ssh: bool, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    cli, host = where(request, over_ssh)
    story = Story(tmp_path / "story")
    capture_good(cli, story, host)
    moved_and_dirty(story)
    stored = Path(cli.env["ENVSNAP_STORE"]) / "good.yaml"
    checked_text = stored.read_text()
    assert checked_text.count("(token/s): 94") == 1
    swapped_text = checked_text.replace("(token/s): 94", "(token/s): 666")
    real_check = provenance.verify_as_user
    checks: list[str] = []

    def check_then_swap(document: Any, *args: Any, **kwargs: Any) -> provenance.Provenance:
        found = real_check(document, *args, **kwargs)
        checks.append(found.describe())
        stored.write_text(swapped_text)     # the stranger's file, right after the check
        return found

    monkeypatch.setattr(provenance, "verify_as_user", check_then_swap)
    result = cli("restore", "good", "--yes")
    assert result.returncode == 0, result.stdout + result.stderr
    assert checks and checks[0] == "mine (signed with your key)"
    written = (story.checkout.path / "bench_one.py").read_text()
    assert written == "print('gen throughput (token/s): 94')\n", written
    assert stored.read_text() == swapped_text   # the swap did happen
