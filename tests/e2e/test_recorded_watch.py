"""The history `envsnap watch` kept on a real GPU host across a worker restart
(tests/data/h100/watch, recorded by tests/data/record_watch.py), read back here: the store
commands take it as it was written there, and the timeline's reading of it names the
variable the restarted worker lost."""
from __future__ import annotations

import tarfile
from pathlib import Path

from conftest import ROOT, Cli

from envsnap.history.store import History
from envsnap.timeline.history import Stored
from envsnap.timeline.watched import watched_changes

RECORDED = ROOT / "tests" / "data" / "h100" / "watch"


def unpacked_history(cli: Cli) -> History:
    store = Path(cli.env["ENVSNAP_STORE"])
    store.mkdir(parents=True, exist_ok=True)
    with tarfile.open(RECORDED / "history.tar.gz") as tar:
        members = tar.getmembers()   # folders and files under history/ alone
        assert all((each.isdir() or each.isfile()) and each.name.split("/")[0] == "history"
                   and ".." not in each.name.split("/") for each in members)
        tar.extractall(store, members=members)
    return History(store / "history")


def test_the_hosts_history_lists_and_verifies_as_written_there(cli: Cli) -> None:
    unpacked_history(cli)
    listed = cli("history", "list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout == (RECORDED / "history_list.txt").read_text()
    checked = cli("history", "verify")
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_restart_and_the_env_it_lost_are_read_from_the_records(cli: Cli) -> None:
    history = unpacked_history(cli)
    manifests = history.manifests()
    assert [manifest.reason.split()[0] for manifest in manifests] == ["watch", "process"]
    records = [Stored(each.id, each.captured_at, history.load(each), each.reason, watched=True)
               for each in manifests]
    found = watched_changes(records)
    [restart] = found.restarts
    assert restart.before.pid != restart.after.pid
    assert ("NCCL_PROTO", "LL", None) in restart.changes
    assert "NCCL_PROTO: LL -> (absent)" in (RECORDED / "timeline.txt").read_text()


# Where `report --format collect-env` of a capture differs from torch's collect_env of the same
# minute on that host, each line with why (the rest is equal, line for line):
JUSTIFIED = {
    # only an imported torch knows these: the capture never imports torch
    "Is XPU available: False": "Is XPU available: N/A",
    "Is XNNPACK available: True": "Is XNNPACK available: N/A",
    # lscpu reads these from the CPUID instruction, which Python cannot issue
    "Hypervisor vendor:                       KVM": None,
    "Virtualization type:                     full": None,
    # pip prints a distribution's name as its metadata spells it; the capture keeps the
    # normalised name (open: the metadata's spelling is not recorded)
    "[pip3] mypy_extensions==1.1.0": "[pip3] mypy-extensions==1.1.0",
}


def test_the_collect_env_of_a_capture_is_torchs_line_for_line_but_the_justified(
        cli: Cli) -> None:
    report = cli("report", str(RECORDED / "capture.yaml"), "--format", "collect-env")
    assert report.returncode == 0, report.stderr
    torchs = (RECORDED / "collect_env.txt").read_text().split("\n--- stderr\n")[0]
    expected = [JUSTIFIED.get(line.rstrip(), line.rstrip()) for line in torchs.splitlines()]
    assert [line.rstrip() for line in report.stdout.splitlines()] == \
        [line for line in expected if line is not None]
