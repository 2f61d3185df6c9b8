"""The plan explain prints before it asks: a startup file every python of the host loads is
said to be host-wide under its difference, as --host-wide asked; one of the venv's is not."""
from __future__ import annotations

from envsnap.explain.differences import Difference, Differences, PthEnds, SiteEnds
from envsnap.explain.render import plan_lines
from envsnap.explain.run import Plan
from envsnap.hostops.hostwide import host_wide_words

SYSTEM_PTH = "/usr/lib/python3/dist-packages/tuning.pth"
VENV_PTH = "/srv/venv/lib/python3.11/site-packages/own.pth"
STDLIB_SITE = "/usr/lib/python3.11/sitecustomize.py"


def plan(host_wide: dict[str, str]) -> Plan:
    found = Differences(
        items=[Difference("sitecustomize", STDLIB_SITE, "a", "b"),
               Difference("pth", SYSTEM_PTH, "c", "d", lines=1),
               Difference("pth", VENV_PTH, "e", "f", lines=1)],
        site=SiteEnds(STDLIB_SITE, "import os\n", None),
        pth={SYSTEM_PTH: PthEnds(SYSTEM_PTH, ("import os",), ()),
             VENV_PTH: PthEnds(VENV_PTH, ("import sys",), ())},
        host_wide=host_wide)
    return Plan("local", ("good", "bad"), found, 4, 6, 24, 3)


def test_host_wide_files_are_said_so_under_their_difference() -> None:
    words = host_wide_words("3.11")
    lines = plan_lines(plan({STDLIB_SITE: words, SYSTEM_PTH: words}))
    said = f"       {words}: switched as --host-wide asked, put back at the end"
    assert lines[1:7] == [
        f"  1. sitecustomize changed ({STDLIB_SITE})", said,
        f"  2. startup lines of {SYSTEM_PTH} (1 line changed)", "       GOOD's: import os", said,
        f"  3. startup lines of {VENV_PTH} (1 line changed)"]
    assert lines[7] == "       GOOD's: import sys"
    assert not any("host-wide" in line for line in plan_lines(plan({})))
