"""The timeline's pure parts: the window's times, package roles, the text renderer."""
from __future__ import annotations

from typing import cast

import pytest

from envsnap.errors import UsageError
from envsnap.snapshot.records import Snapshot
from envsnap.text import visible_line as visible
from envsnap.timeline.code_events import (
    PIP_RUN_GAP,
    install_runs,
    package_change,
    process_events,
)
from envsnap.timeline.evidence import DistRecord
from envsnap.timeline.history import Stored, site_dirs_of, version_before
from envsnap.timeline.model import RECORDED, Event, RecordedVersion, Timeline, Window
from envsnap.timeline.render import render_text
from envsnap.timeline.roles import package_role
from envsnap.timeline.window import parse_moment

NOW = 1_796_140_000.0


def no_label(label: str) -> str | None:
    return None


@pytest.mark.parametrize("text, expected", [
    ("2h", NOW - 7200), ("30m", NOW - 1800), ("1d", NOW - 86400), ("45s", NOW - 45),
    ("1.5h", NOW - 5400),
    ("2026-12-01T13:50:00Z", 1_796_133_000.0),
    ("2026-12-01T13:50:00", 1_796_133_000.0),          # no zone: UTC, as envsnap writes
    ("2026-12-01T14:50:00+01:00", 1_796_133_000.0),
])
def test_a_span_or_an_iso_time(text: str, expected: float) -> None:
    assert parse_moment(text, NOW, no_label) == expected


def test_a_snapshot_label_is_its_capture_time() -> None:
    def label_time(label: str) -> str | None:
        return "2026-12-01T13:50:00+00:00" if label == "good" else None

    assert parse_moment("good", NOW, label_time) == 1_796_133_000.0
    with pytest.raises(UsageError, match="time 'bad': give a span back from now"):
        parse_moment("bad", NOW, label_time)


@pytest.mark.parametrize("name, role", [
    ("nvidia-driver-580-open", "NVIDIA driver"), ("libnvidia-compute-580", "NVIDIA driver"),
    ("nvidia-dkms-550", "NVIDIA driver"), ("kmod-nvidia-open-dkms", "NVIDIA driver"),
    ("libnccl2", "NCCL"), ("libnccl-dev", "NCCL"), ("nvidia-nccl-cu12", "NCCL"),
    ("cuda-toolkit-13-0", "CUDA"), ("libcudnn9-cuda-13", "CUDA"),
    ("nvidia-cublas-cu12", "CUDA"), ("linux-image-6.8.0-45-generic", "kernel"),
    ("kernel-core", "kernel"), ("torch", "torch"), ("triton", "torch"),
    ("perl", None), ("libxnvctrl0", None), ("kernelshark", None),
])
def test_packages_named_by_what_they_are_to_a_gpu_job(name: str, role: str | None) -> None:
    assert package_role(name) == role


def test_control_characters_are_shown_not_obeyed() -> None:
    assert visible("pull \x1b[2J\rdone\t") == "pull \\x1b[2J\\rdone\\t"   # text's one renderer
    assert visible("Fix PCG MoE Error — ok") == "Fix PCG MoE Error — ok"


def test_an_empty_window_says_so_and_names_what_was_unreadable() -> None:
    timeline = Timeline("gpu01", Window(NOW - 3600, NOW + 60, "1h"), [],
                        ["kernel: dmesg: Operation not permitted"])
    text = render_text(timeline)
    assert "timeline of gpu01: 2026-12-01 14:46:40 -> now UTC (since 1h), 0 events" in text
    assert "(none in this window)" in text
    assert "unreadable: kernel: dmesg: Operation not permitted" in text


def test_the_changes_between_the_benchmarks_come_first() -> None:
    good = Event(NOW - 600, "bench", "good", "bench good: median 94.1", "record", RECORDED)
    pull = Event(NOW - 500, "checkout", "/root/sglang", "pull in /root/sglang", "reflog",
                 RECORDED)
    bad = Event(NOW - 60, "bench", "bad", "bench bad: median 60.2", "record", RECORDED)
    timeline = Timeline("gpu01", Window(NOW - 3600, NOW + 60, "1h"), [good, pull, bad],
                        last_good=good, first_bad=bad)
    text = render_text(timeline)
    head, _, rest = text.partition("all events, oldest first:")
    assert "between the last good and the first bad benchmark: 1 change\n" in head
    assert "pull in /root/sglang" in head and "LAST GOOD bench good" in rest
    assert timeline.between == [pull]


@pytest.mark.parametrize("before, now, said", [
    (None, "2.0", "installed"),
    ("1.0", "2.0", "upgraded from 1.0"),
    ("2.10.1", "2.9.0", "downgraded from 2.10.1"),
    ("1.0", "1.0.0", "changed from 1.0"),              # one release, written two ways
    ("2.5.1", "2.5.1+cu124", "changed from 2.5.1"),    # a local build of the same release
    ("2.5.1", "2.5.1", "reinstalled (snapshot good recorded 2.5.1 too)"),
    ("dev", "1.0", "changed from dev"),
])
def test_a_package_upgraded_downgraded_or_changed_by_its_recorded_version(
        before: str | None, now: str, said: str) -> None:
    assert package_change(now, RecordedVersion("good", NOW, before)) == said


def dist(name: str, time: float, installer: str = "pip") -> DistRecord:
    return {"time": time, "folder": f"/venv/site-packages/{name}-1.0.dist-info", "name": name,
            "version": "1.0", "installer": installer, "has_record": True}


def test_an_install_run_is_one_interpreter_one_installer_records_close_together() -> None:
    records = [dist("c", NOW + 2), dist("a", NOW), dist("b", NOW + 1),
               dist("u", NOW + 1.5, "uv"),                       # another installer
               dist("d", NOW + 2 + PIP_RUN_GAP + 1)]             # a later run
    runs = install_runs(records, "/venv/bin/python")
    assert [[record["name"] for record in run] for run in runs] == [["a", "b", "c"], ["u"],
                                                                   ["d"]]


def recorded_with(time: float, version: str, seconds: float) -> Stored:
    """A record of one interpreter holding `torch` at `version`; its agent ran `seconds`."""
    document = {"meta": {"agent": {"startup_seconds": 0.1},
                         "collectors": {"python_env": {"seconds": seconds - 0.1}}},
                "facts": {"python_env": {"packages": {"torch": version},
                                         "site_dirs": ["/venv/site"]}}}
    return Stored(f"at-{time:g}", time, cast("Snapshot", document), watched=True)


@pytest.mark.parametrize("read_for, expected", [
    (0.5, "2.5.0"),   # done reading before the install: it holds what the install replaced
    (4.0, "2.4.0"),   # still reading when it came: the record before it is asked
])
def test_a_record_that_saw_the_install_itself_is_not_what_it_replaced(
        read_for: float, expected: str) -> None:
    records = [recorded_with(100.0, "2.4.0", 0.5), recorded_with(200.0, "2.5.0", read_for)]
    before = version_before(site_dirs_of(records), "torch", "/venv/site", 202.5, "2.5.0")
    assert before is not None and before.version == expected
    # one that holds another version read before the install, however long it read
    records[1] = recorded_with(200.0, "2.3.0", read_for)
    before = version_before(site_dirs_of(records), "torch", "/venv/site", 202.5, "2.5.0")
    assert before is not None and (before.label, before.version) == ("at-200", "2.3.0")


def test_a_long_env_value_is_clipped_on_the_line_and_whole_in_the_json() -> None:
    required = "cuda>=13.0 " + " ".join(f"brand=b{n},driver>=535,driver<536" for n in range(40))
    event, = process_events([{"time": NOW, "pid": 7, "cmdline": ["python3", "serve.py"],
                              "env": {"NVIDIA_REQUIRE_CUDA": required, "NCCL_PROTO": "LL"}}])
    line, = event.details
    assert line.startswith("its env now: NCCL_PROTO=LL, NVIDIA_REQUIRE_CUDA=cuda>=13.0 brand")
    assert line.endswith(f"... ({len(required)} characters)") and len(line) < 160
    assert dict(event.env)["NVIDIA_REQUIRE_CUDA"] == required
