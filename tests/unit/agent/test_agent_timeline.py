"""The timeline's host-side readers (agent/timelinelogs.py): logs read from their end, lines
turned into fields on the host, where the local time zone and the secret detector are."""
from __future__ import annotations

import gzip
import random
import time
from pathlib import Path

import pytest

from envsnap.agent import timeline, timelinelogs
from envsnap.agent.timelinelogs import apt_fields, dpkg_fields, lines_backwards, rotated

DATA = Path(__file__).resolve().parents[2] / "data" / "timeline"


def test_lines_backwards_across_many_blocks(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timelinelogs, "BLOCK", 64)
    rng = random.Random(7)
    lines = [f"{n} " + "x" * rng.randrange(0, 200) for n in range(500)]
    path = tmp_path / "log"
    path.write_text("\n".join(lines) + "\n")
    assert list(lines_backwards(str(path))) == list(reversed(lines))
    path.write_text("\n".join(lines))   # no newline at the end
    assert list(lines_backwards(str(path))) == list(reversed(lines))
    packed = tmp_path / "log.2.gz"
    packed.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    assert list(lines_backwards(str(packed))) == list(reversed(lines))


def test_rotated_copies_newest_first_as_far_as_they_go(tmp_path: Path) -> None:
    for name in ("dpkg.log", "dpkg.log.1", "dpkg.log.2.gz", "dpkg.log.4.gz"):
        (tmp_path / name).write_text("")
    assert [Path(p).name for p in rotated(str(tmp_path / "dpkg.log"))] == [
        "dpkg.log", "dpkg.log.1", "dpkg.log.2.gz"]   # .3 is missing: .4 is not reached


def test_reading_stops_at_the_first_line_older_than_the_window(tmp_path: Path) -> None:
    log = tmp_path / "var" / "log" / "dpkg.log"
    log.parent.mkdir(parents=True)
    log.write_text("2025-06-24 14:36:25 upgrade libudev1:amd64 252.36-1~deb12u1 "
                   "252.38-1~deb12u1\n"
                   "not a dated line\n"
                   "2026-05-09 07:28:46 upgrade tzdata:all 2025b-0+deb12u1 2025b-0+deb12u2\n")
    (tmp_path / "var" / "log" / "dpkg.log.1").mkdir()   # fails if opened, even for root
    since = time.mktime(time.strptime("2026-01-01", "%Y-%m-%d"))
    found = timelinelogs.read_dpkg(str(tmp_path), since, since + 1e9)
    assert [r["package"] for r in found["records"]] == ["tzdata"]
    assert found["error"] is None   # dpkg.log reached past the window: .1 was never opened
    wider = timelinelogs.read_dpkg(str(tmp_path), since - 1e9, since + 1e9)
    assert "dpkg.log.1" in wider["error"]


def test_dpkg_lines_become_fields_and_the_repeats_are_left_out() -> None:
    line = "2026-05-09 07:28:46 upgrade tzdata:all 2025b-0+deb12u1 2025b-0+deb12u2"
    assert dpkg_fields({"time": 1.0, "file": "f", "line": line}) == {
        "time": 1.0, "file": "f", "action": "upgrade", "package": "tzdata", "arch": "all",
        "old": "2025b-0+deb12u1", "new": "2025b-0+deb12u2"}
    for repeat in ("2026-05-09 07:28:46 status half-configured tzdata:all 2025b-0+deb12u1",
                   "2026-05-09 07:28:50 configure tzdata:all 2025b-0+deb12u2 <none>",
                   "2026-05-09 07:28:46 startup archives unpack"):
        assert dpkg_fields({"time": 1.0, "file": "f", "line": repeat}) is None


def test_an_apt_block_keeps_package_names_readable_and_masks_the_command() -> None:
    # gir1.2-secret-1 is a real Debian package (its Install line is Debian 12's own): as one
    # string with its architecture the secret detector reads "secret-1:amd64" as a credential
    block = ("Start-Date: 2026-12-01  11:11:34\n"
             "Commandline: apt-get -o Acquire::http::Proxy=http://ml:Hunter2Secret9x@proxy:3128 "
             "install -y gir1.2-secret-1\n"
             "Requested-By: ada (1000)\n"
             "Install: gir1.2-secret-1:amd64 (0.20.5-3, automatic), libnccl2:amd64 (2.21.5-1)\n"
             "Upgrade: libsystemd0:amd64 (252.38-1~deb12u1, 252.39-1~deb12u2)\n"
             "End-Date: 2026-12-01  11:11:56")
    fields = apt_fields(block)
    assert fields["changes"]["Install"][0] == {"package": "gir1.2-secret-1", "arch": "amd64",
                                               "versions": ["0.20.5-3", "automatic"]}
    assert fields["changes"]["Upgrade"][0]["versions"] == ["252.38-1~deb12u1", "252.39-1~deb12u2"]
    assert "Hunter2Secret9x" not in fields["commandline"]
    assert fields["commandline"].endswith("install -y gir1.2-secret-1")
    assert fields["requested_by"] == "ada (1000)"
    assert fields["end"] - time.mktime(time.strptime("2026-12-01 11:11:34",
                                                     "%Y-%m-%d %H:%M:%S")) == 22


@pytest.mark.parametrize("cgroup,unit", [
    ((DATA / "systemd" / "cgroup").read_text(), ("sglang-worker.service", False)),
    ("0::/user.slice/user-1000.slice/user@1000.service/app.slice/worker.service\n",
     ("worker.service", True)),           # a user's unit: its files are the user's
    ("0::/user.slice/user-1000.slice/session-3.scope\n", None),   # a login shell's child
    ("9:name=systemd:/\n0::/\n", None),   # this machine's: no systemd as PID 1
])
def test_the_unit_a_cgroup_file_names(cgroup: str, unit: tuple[str, bool] | None) -> None:
    assert timeline.cgroup_unit(cgroup) == unit
