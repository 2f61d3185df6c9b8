"""The host rule in each command's words, pip pins on a real (stand-in) python, and the
snapshot readers that decide what to pin and whether sitecustomize moved."""
from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pytest

from envsnap.errors import HostError, UsageError
from envsnap.hostops.hostrule import check_same_host, host_problem
from envsnap.hostops.pip import pin_packages
from envsnap.hostops.shell import HostShell
from envsnap.hosts.inventory import Host
from envsnap.hosts.transport import LocalTransport
from envsnap.snapshot import document as snap


def document(hostname: str | None, label: str = "good", **python_env: Any) -> dict[str, Any]:
    system = {"hostname": hostname} if hostname else {}
    return {"meta": {"label": label}, "facts": {"system": system, "python_env": python_env}}


def test_the_same_machine_passes_whatever_was_asked() -> None:
    same = document("gpu-box-07")
    for given, force in ((False, False), (True, False), (True, True)):
        assert host_problem(same, document("gpu-box-07"), given, force, "restore") is None


@pytest.mark.parametrize("command", ["restore", "explain"])
def test_another_machine_is_refused_in_the_commands_own_words(command: str) -> None:
    good, live = document("gpu-box-07"), document("gpu-box-08")
    unnamed = host_problem(good, live, False, False, command)
    assert unnamed == ("snapshot 'good' was taken on gpu-box-07, this host is gpu-box-08: a "
                       f"snapshot picks the host to {command} only when its hostname matches; "
                       f"name the target with --host (and --force-host to {command} it there "
                       "anyway)")
    named = host_problem(good, live, True, False, command)
    assert named == ("snapshot 'good' was taken on gpu-box-07, this host is gpu-box-08: "
                     f"refusing (--force-host {command}s it anyway)")
    assert host_problem(good, live, True, True, command) is None
    with pytest.raises(UsageError, match=f"--force-host {command}s it anyway"):
        check_same_host(good, live, True, False, command)


def test_a_label_with_the_word_restore_in_it_is_kept_as_it_is() -> None:
    """The explain message is made in its own words, not by rewriting restore's."""
    said = host_problem(document("a", label="pre-restore-1"), document("b"), True, False,
                        "explain")
    assert said is not None and "'pre-restore-1'" in said


def test_an_unknown_host_is_another_host() -> None:
    said = host_problem(document(None), document(None), True, False, "restore")
    assert said == ("snapshot 'good' records no hostname (unknown host), this host's name "
                    "could not be read: refusing (--force-host restores it anyway)")


def test_package_pins_put_back_drifted_and_missing_packages_only() -> None:
    recorded = document("a", packages={"torch": "2.4.0", "numpy": "1.26.4", "flash": "2.6"})
    live = document("a", packages={"torch": "2.5.1", "numpy": "1.26.4", "extra": "1.0"})
    assert snap.package_pins(recorded, live) == ["flash==2.6", "torch==2.4.0"]
    assert snap.package_pins(recorded, recorded) == []


def test_customize_digest_reads_a_blob_or_what_stands_for_it() -> None:
    blob = document("a", customize={"sitecustomize": {"sha256": "ab" * 32, "text": "x"}})
    assert snap.customize_digest(blob) == "ab" * 32
    assert snap.customize_digest(document("a", customize={"sitecustomize": None})) is None
    assert snap.customize_digest(document("a")) is None


def stand_in_python(tmp_path: Path, body: str) -> str:
    """A program in the python's place that records how pip was asked, then does `body`."""
    script = tmp_path / "python"
    script.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {tmp_path}/argv\n{body}\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def shell_with(python: str) -> HostShell:
    host = Host(name="gpu-box", vars={"python": python})
    return HostShell(host, LocalTransport(host))


def test_pins_go_to_the_hosts_pip_one_argument_each(tmp_path: Path) -> None:
    python = stand_in_python(tmp_path, "exit 0")
    pin_packages(shell_with(python), ["torch==2.4.0", "weird name==1"])
    assert (tmp_path / "argv").read_text().splitlines() == [
        "-m", "pip", "install", "--no-deps", "--quiet", "torch==2.4.0", "weird name==1"]


def test_a_pin_pip_refuses_is_a_host_error_with_pips_last_line(tmp_path: Path) -> None:
    python = stand_in_python(tmp_path, "echo 'Looking in indexes' >&2; "
                                       "echo 'ERROR: No matching distribution' >&2; exit 1")
    with pytest.raises(HostError, match="^gpu-box: pip could not pin 2 packages: ERROR: No "
                                        "matching distribution$"):
        pin_packages(shell_with(python), ["a==1", "b==2"])
    with pytest.raises(HostError, match="could not pin 1 package: "):
        pin_packages(shell_with(python), ["a==1"])
