from __future__ import annotations

import io

from envsnap.cli.capture import Progress
from envsnap.hosts.capture import Outcome
from envsnap.hosts.inventory import Host


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_counts_on_a_terminal_only() -> None:
    screen = Terminal()
    progress = Progress(3, screen)
    progress(Outcome(host=Host("a"), label="a"))
    progress(Outcome(host=Host("b"), label="b", error="b: unreachable"))
    progress(Outcome(host=Host("c"), label="c", problems=["git: /x: not a git repository"]))
    assert screen.getvalue().split("\r")[-1] == "3/3 hosts, 2 failed\n"

    log = io.StringIO()
    Progress(3, log)(Outcome(host=Host("a"), label="a"))
    assert log.getvalue() == ""       # no carriage-return noise in logs and CI
