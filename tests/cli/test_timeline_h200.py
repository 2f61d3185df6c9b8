"""`envsnap timeline` on a real H200 host's recorded evidence (tests/data/h200-evidence, its
README says how it was made): the boot, the NVIDIA module and its kernel messages, Ubuntu's
package logs, read through the same readers as a live host's, under --log-root."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from conftest import Cli

from envsnap.agent.timelinelogs import DMESG_TIME, kernel_line_time
from envsnap.timeline.system_events import nvidia_version

EVIDENCE = Path(__file__).resolve().parent.parent / "data" / "h200-evidence"


def recorded(name: str) -> str:
    return (EVIDENCE / name).read_text()


def module_times() -> dict[str, list[int]]:
    """`stat -c '%n %W %X %Y %Z'` lines: path -> birth, access, modify, change seconds."""
    rows = (line.split() for line in recorded("sys_module_times.txt").splitlines())
    return {row[0]: [int(value) for value in row[1:]] for row in rows if len(row) == 5}


@pytest.fixture
def h200_root(tmp_path: Path) -> Path:
    """The recording laid out where the host had it: /proc/stat's btime, the driver's
    version files, /sys/module/nvidia with its recorded mtime, dmesg as /var/log/dmesg
    (the file Ubuntu writes at boot), dpkg's and apt's logs."""
    root = tmp_path / "h200"
    files = {"proc/stat": recorded("proc_stat_btime.txt"),
             "proc/driver/nvidia/version": recorded("proc_driver_nvidia_version.txt"),
             "var/log/dmesg": recorded("dmesg.txt"),
             "var/log/dpkg.log": recorded("dpkg_log.txt"),
             "var/log/apt/history.log": recorded("apt_history.txt")}
    for line in recorded("sys_module_nvidia.txt").splitlines():
        path, _, value = line.partition(": ")
        if value.strip():
            files[path.lstrip("/")] = value + "\n"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    modified = module_times()["/sys/module/nvidia"][2]
    os.utime(root / "sys" / "module" / "nvidia", (modified, modified))
    return root


def events_of(cli: Cli, root: Path, since: str, until: str) -> list[dict[str, Any]]:
    cli.env["TZ"] = "UTC"   # the recorded host's dpkg and apt wrote UTC
    result = cli("timeline", "local", "--log-root", str(root), "--since", since,
                 "--until", until, "--json")
    assert result.returncode == 0, result.stderr
    found: list[dict[str, Any]] = json.loads(result.stdout)["events"]
    return found


def boot_of(events: list[dict[str, Any]]) -> dict[str, Any]:
    return next(event for event in events if event["kind"] == "boot")


def test_the_boot_folds_its_own_kernel_lines_then_the_nvidia_module(
        cli: Cli, h200_root: Path) -> None:
    events = events_of(cli, h200_root, "2026-12-01T14:00:00Z", "2026-12-01T14:03:03Z")
    boot = boot_of(events)
    assert (boot["what"], boot["at"], boot["exactness"]) == (
        "host booted", "2026-12-01T14:02:38+00:00", "recorded")
    module = events.index(next(e for e in events if e["kind"] == "kernel-module"))
    assert events[module]["what"] == "NVIDIA kernel module 580.159.04 loaded"
    assert events[module]["at"] == "2026-12-01T14:02:39+00:00"
    assert events.index(boot) < module
    # the driver's loading, 0.74 s after the boot, is one of the boot's own lines
    assert [line for line in boot["details"] if "NVRM: loading NVIDIA UNIX Open Kernel Module "
            "for x86_64  580.159.04" in line]
    assert boot["folded"] == len(boot["details"]) >= 2
    assert "Linux version" in boot["details"][0]   # in the kernel's order
    assert not [e for e in events if e["kind"] == "kernel-message"]
    assert not [e for e in events if e["kind"] == "system-package"]   # none that minute


def test_a_boot_reads_as_one_event_with_its_lines_behind_v(cli: Cli, h200_root: Path) -> None:
    cli.env["TZ"] = "UTC"
    since, until = "2026-12-01T14:00:00Z", "2026-12-01T14:03:03Z"
    plain = cli("timeline", "local", "--log-root", str(h200_root), "--since", since,
                "--until", until)
    verbose = cli("timeline", "local", "--log-root", str(h200_root), "--since", since,
                  "--until", until, "-v")
    assert plain.returncode == verbose.returncode == 0, plain.stderr + verbose.stderr
    folded = boot_of(events_of(cli, h200_root, since, until))["folded"]
    assert f"{folded} kernel lines: -v lists them" in plain.stdout
    assert "NVRM: loading" not in plain.stdout and "NVRM: loading" in verbose.stdout


def test_trouble_at_boot_and_lines_after_it_stay_their_own_events(
        cli: Cli, h200_root: Path) -> None:
    dmesg = h200_root / "var" / "log" / "dmesg"
    dmesg.write_text(dmesg.read_text()
                     + "[    6.250000] NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the "
                       "bus.\n"
                     + "[  900.500000] NVRM: Persistence mode is deprecated and will be removed.\n")
    events = events_of(cli, h200_root, "2026-12-01T14:00:00Z", "2026-12-01T14:20:00Z")
    own = [(e["what"], e["at"]) for e in events if e["kind"] == "kernel-message"]
    assert own == [("kernel: GPU fallen off the bus", "2026-12-01T14:02:44+00:00"),
                   ("kernel: GPU/PCIe message", "2026-12-01T14:17:38+00:00")]
    assert not [line for line in boot_of(events)["details"] if "Xid" in line]


def test_ubuntus_package_logs_name_cuda_and_fold_dpkg_into_its_apt_run(
        cli: Cli, h200_root: Path) -> None:
    events = events_of(cli, h200_root, "2025-10-10T00:00:00Z", "2026-10-17T00:00:00Z")
    packages = [e for e in events if e["kind"] == "system-package"]
    assert all(e["exactness"] == "recorded" for e in packages)
    cudnn = next(e for e in packages if "libcudnn9-cuda-13=9.14.0.64-1" in e["what"])
    assert cudnn["at"] == "2025-10-10T18:00:55+00:00" and cudnn["role"] == "system: CUDA"
    assert "install libcudnn9-cuda-13 9.14.0.64-1 [CUDA]" in cudnn["details"]
    # the last run's dpkg lines (its last 400 were recorded) say what its apt block says
    last = packages[-1]
    assert last["at"] == "2026-10-16T22:00:28+00:00" and last["what"].startswith("apt: apt-get")
    assert not [e for e in packages if e["what"].startswith("dpkg ")]


def test_a_message_in_two_kernel_logs_is_one_event(cli: Cli, h200_root: Path) -> None:
    (h200_root / "var" / "log" / "kern.log").write_text(recorded("dmesg_iso.txt"))
    events = events_of(cli, h200_root, "2026-12-01T14:00:00Z", "2026-12-01T14:03:03Z")
    said = [line for e in events for line in [e["evidence"], *e["details"]]
            if "NVRM: loading NVIDIA UNIX" in line]
    assert len(said) == 1 and said[0] in boot_of(events)["details"]


def test_the_iso_and_since_boot_dmesg_agree_with_the_boot_time() -> None:
    """The recording holds dmesg twice, as seconds since boot and as ISO times: read with the
    recorded btime, each line's time is the same to within a second."""
    btime = float(recorded("proc_stat_btime.txt").split()[1])
    raw = recorded("dmesg.txt").splitlines()
    iso = recorded("dmesg_iso.txt").splitlines()
    assert len(raw) == len(iso)
    pairs = [(kernel_line_time(a, btime), kernel_line_time(b, None)) for a, b in zip(raw, iso)
             if DMESG_TIME.match(a)]
    assert len(pairs) > 300
    assert all(a is not None and b is not None and abs(a - b) < 1.0 for a, b in pairs)


def test_the_driver_version_from_proc_driver_nvidia_version() -> None:
    assert nvidia_version(recorded("proc_driver_nvidia_version.txt")) == "580.159.04"
