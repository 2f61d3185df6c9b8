"""`envsnap timeline`'s Python packages and benchmarks, told as they happened: one event per
pip run (real `pip install` of real wheels into a real venv), "installed" against "upgraded
from X" by a stored snapshot, a `pip uninstall` the store's snapshot shows, and benchmarks
paired only when they ran the same command, with a bisect line that runs as printed."""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Cli, unique_marker
from helpers.folded import words
from helpers.timelinestory import Story, git, pip, prepare, upstream_commit
from helpers.wheels import make_wheel

RUN = (("torch", "2.5.1"), ("nvidia_nccl_cu12", "2.21.5"), ("filelock", "3.16.1"),
       ("sympy", "1.13.1"), ("mpmath", "1.3.0"))


@pytest.fixture
def story(tmp_path: Path) -> Iterator[Story]:
    found = prepare(tmp_path / "host", unique_marker("timeline-packages"))
    yield found
    found.stop()


def pip_run(python: Path, *wheels: Path) -> None:
    """One `pip install` of several wheels: one run, as pip does it."""
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
                    "--no-index", "--no-deps", *map(str, wheels)], check=True,
                   capture_output=True)


def timeline(cli: Cli, story: Story, *extra: str) -> subprocess.CompletedProcess[str]:
    cli.env["TZ"] = "UTC"
    result: subprocess.CompletedProcess[str] = cli(
        "timeline", "local", "--python", str(story.python), "--log-root",
                 str(story.root), "--since", "10m", *extra)
    assert result.returncode == 0, result.stderr
    return result


def packages(cli: Cli, story: Story) -> list[dict[str, Any]]:
    found = json.loads(timeline(cli, story, "--json").stdout)["events"]
    return [event for event in found if event["kind"] == "python-package"]


def capture(cli: Cli, story: Story, label: str) -> None:
    result = cli("capture", "local", "--label", label, "--python", str(story.python))
    assert result.returncode == 0, result.stderr
    time.sleep(1.1)   # a capture's time keeps whole seconds: what follows is after it


def test_one_pip_run_is_one_event_its_packages_listed_with_v(cli: Cli, story: Story,
                                                            tmp_path: Path) -> None:
    wheels = [make_wheel(tmp_path, version, name) for name, version in RUN]
    pip_run(story.python, *wheels)
    found = packages(cli, story)
    assert len(found) == 1, [event["what"] for event in found]
    run = found[0]
    # the hot ones named first, the rest counted; the hot roles kept
    head, _, named = run["what"].partition(" (")
    assert head == "pip install: 5 packages"
    assert sorted(named.split(", ")[:2]) == ["nvidia-nccl-cu12 2.21.5", "torch 2.5.1"]
    assert named.split(", ")[3].startswith("...)")
    assert run["role"] == "NCCL, torch"
    assert run["folded"] == 5 and run["exactness"] == "file time"
    assert "5 .dist-info RECORD mtimes" in run["evidence"] and "INSTALLER pip" in run["evidence"]
    # no snapshot of the venv before it: nothing is claimed about what it replaced
    assert sorted(run["details"]) == sorted(
        [f"{name.replace('_', '-')} {version} installed"
         + (" [torch]" if name == "torch" else " [NCCL]" if "nccl" in name else "")
         for name, version in RUN])
    assert "whether" in run["test"] and "replaced is not known" not in run["test"]
    short, full = words(timeline(cli, story).stdout), words(timeline(cli, story, "-v").stdout)
    assert "pip install: 5 packages (" in short and "[NCCL, torch]" in short
    assert "5 packages: -v lists them" in short and "sympy 1.13.1 installed" not in short
    assert "sympy 1.13.1 installed" in full and "-v lists them" not in full


def test_installed_against_upgraded_from_what_a_snapshot_recorded(cli: Cli, story: Story,
                                                                  tmp_path: Path) -> None:
    pip(story.python, make_wheel(tmp_path, "1.0"))   # tinypkg 1.0
    capture(cli, story, "before")
    # pip deletes 1.0's record as it upgrades: only the snapshot still knows 1.0
    pip_run(story.python, make_wheel(tmp_path, "2.0"), make_wheel(tmp_path, "0.4", "freshpkg"))
    found = packages(cli, story)
    assert len(found) == 1, [event["what"] for event in found]
    assert sorted(found[0]["details"]) == ["freshpkg 0.4 installed",
                                           "tinypkg 2.0 upgraded from 1.0"]
    assert found[0]["test"] == ("pip install 'tinypkg==1.0'; pip uninstall -y freshpkg (as "
                                "snapshot before recorded; envsnap restore before --pip)")
    assert not any("replaced is not known" in (event["test"] or "") for event in found)


def test_a_single_fresh_install_says_installed_and_how_to_undo_it(cli: Cli, story: Story,
                                                                   tmp_path: Path) -> None:
    capture(cli, story, "before")
    pip(story.python, make_wheel(tmp_path, "0.4", "freshpkg"))
    [event] = [event for event in packages(cli, story) if event["subject"] == "freshpkg"]
    assert event["what"].startswith("python package freshpkg 0.4 installed by pip (")
    assert event["test"] == ("a fresh install (snapshot before recorded the interpreter "
                             "without it): pip uninstall -y freshpkg")


def test_a_pip_uninstall_a_snapshot_recorded_is_a_bounded_removal(cli: Cli, story: Story,
                                                                  tmp_path: Path) -> None:
    pip(story.python, make_wheel(tmp_path, "1.0"))
    capture(cli, story, "before")
    captured = json.loads(cli("show", "before", "--json").stdout)["meta"]["captured_at"]
    subprocess.run([sys.executable, "-m", "pip", "--python", str(story.python), "uninstall",
                    "-y", "-q", "tinypkg"], check=True, capture_output=True)
    removed = [event for event in packages(cli, story) if "removed" in event["what"]]
    assert [event["what"] for event in removed] == [
        "python package tinypkg 1.0 removed (recorded by snapshot before, gone now)"]
    event = removed[0]
    assert event["exactness"] == "between records"
    assert event["at"] == captured.replace("Z", "+00:00")   # from the capture ...
    assert time.time() - 30 < event["until"] <= time.time()   # ... to now
    assert event["details"][0].startswith("between snapshot before (")
    assert event["test"] == ("pip install 'tinypkg==1.0' (as snapshot before recorded; "
                             "envsnap restore before --pip)")
    text = words(timeline(cli, story).stdout)
    assert "(between two records: when within them is not known)" in text


BENCH = ("import runpy, sys; v = runpy.run_path(sys.argv[1])['VERIFY_MS']; "
         "print('gen throughput (token/s): %.2f' % (2000.0 / (v + 2.3) / float(sys.argv[2])))")
METRIC = r"gen throughput \(token/s\): ([0-9.]+)"


def test_benchmarks_are_paired_only_when_they_ran_the_same_command(
        cli: Cli, story: Story, tmp_path: Path) -> None:
    """Two commands: A (the server's own) turns slow with the pull; B, a tenth of the work,
    prints a lower figure from the start. Only A's pair is last good and first bad, and the
    pull's bisect line is A's, and runs as printed."""
    script = story.checkout / "pynccl.py"

    def bench(label: str, scale: str) -> None:
        cmd = f"{shlex.quote(sys.executable)} -c {shlex.quote(BENCH)} {script} {scale}"
        result = cli("bench", "local", "--cmd", cmd, "--metric", METRIC, "--repeat", "3",
                     "--label", label, "--repo", str(story.checkout))
        assert result.returncode == 0, result.stderr
        time.sleep(1.1)

    bench("a-fast", "1")        # ~94
    bench("b-first", "2")       # ~47: another command, never "bad" against A
    upstream_commit(tmp_path / "host" / "dev", story.env, "pynccl.py", "VERIFY_MS = 29\n")
    git(story.checkout, story.env, "-c", "pull.rebase=false", "pull", "-q", "origin", "main")
    time.sleep(1.1)
    bench("a-slow", "1")        # ~64
    bench("b-late", "2")        # the newest record: its command is not the one that turned
    found = json.loads(timeline(cli, story, "--repo", str(story.checkout), "--since", "a-fast",
                                "--json").stdout)
    assert (found["last_good"]["subject"], found["first_bad"]["subject"]) == ("a-fast",
                                                                              "a-slow")
    pull = next(event for event in found["events"] if event["what"].startswith("pull in"))
    bisect, _, undo = pull["test"].partition("; undo: ")
    assert undo.startswith(f"envsnap restore --repo {story.checkout} --at ")
    argv = shlex.split(bisect)
    assert argv[:4] == ["envsnap", "bisect", "b-first", "a-slow"]
    assert argv[argv.index("--cmd") + 1].endswith(f"{script} 1")   # A's, not B's
    assert argv[argv.index("--metric") + 1] == METRIC
    ran = cli(*argv[1:])
    assert ran.returncode == 1, ran.stdout + ran.stderr   # a regression: its first bad commit
    assert "first bad commit: " in ran.stdout and "Change pynccl.py" in ran.stdout


def test_an_uninstall_of_several_is_one_removal(cli: Cli, story: Story, tmp_path: Path) -> None:
    pip_run(story.python, make_wheel(tmp_path, "1.0"), make_wheel(tmp_path, "2.5.1", "torch"),
            make_wheel(tmp_path, "0.4", "freshpkg"))
    capture(cli, story, "before")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(story.python), "uninstall",
                    "-y", "-q", "tinypkg", "torch", "freshpkg"], check=True, capture_output=True)
    removed = [event for event in packages(cli, story) if "removed" in event["what"]]
    assert [event["what"] for event in removed] == [
        "3 python packages removed (recorded by snapshot before, gone now): torch 2.5.1, "
        "freshpkg 0.4, tinypkg 1.0"]
    assert removed[0]["details"] == ["freshpkg 0.4 removed", "tinypkg 1.0 removed",
                                     "torch 2.5.1 removed [torch]"]
    assert removed[0]["role"] == "torch" and removed[0]["folded"] == 3
    assert removed[0]["test"] == ("pip install 'freshpkg==0.4' 'tinypkg==1.0' 'torch==2.5.1' "
                                  "(as snapshot before recorded; envsnap restore before --pip)")
    text = words(timeline(cli, story).stdout)
    assert "3 packages: -v lists them" in text


def test_a_package_on_pythonpath_is_not_taken_for_removed(cli: Cli, story: Story,
                                                          tmp_path: Path) -> None:
    """A snapshot recorded a distribution found through PYTHONPATH, outside the site
    folders the timeline looks into: it is not gone, only elsewhere."""
    extra = tmp_path / "on-pythonpath" / "offsite_pkg-1.0.dist-info"
    extra.mkdir(parents=True)
    (extra / "METADATA").write_text("Metadata-Version: 2.1\nName: offsite-pkg\nVersion: 1.0\n")
    cli.env["PYTHONPATH"] = f"{extra.parent}:{cli.env.get('PYTHONPATH', '')}"
    capture(cli, story, "before")
    removals = [event["what"] for event in packages(cli, story) if "removed" in event["what"]]
    assert removals == []


def test_a_python_package_apt_wrote_is_named_by_its_apt_run(cli: Cli, story: Story) -> None:
    """A distro's python3-* package, as apt leaves it (a .dist-info with no INSTALLER, dated
    inside the run's history.log block), is one of apt's changes, not a pip run; a pip
    install of the same minute outside the block stays its own event."""
    site = story.site
    started = time.time() - 120
    dist = site / "PyYAML-6.0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: PyYAML\nVersion: 6.0.1\n")
    os.utime(dist, (started + 1, started + 1))
    stamp = time.strftime("%Y-%m-%d  %H:%M:%S", time.gmtime(started))
    end = time.strftime("%Y-%m-%d  %H:%M:%S", time.gmtime(started + 3))
    log = story.root / "var" / "log" / "apt" / "history.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(f"\nStart-Date: {stamp}\nCommandline: apt-get install -y python3-yaml\n"
                   f"Install: python3-yaml:amd64 (6.0.1-2)\nEnd-Date: {end}\n")
    wheels = story.root / "wheels"
    wheels.mkdir()
    pip_run(story.python, make_wheel(wheels, "3.16.1", "filelock"))
    found = json.loads(timeline(cli, story, "--json").stdout)["events"]
    apt = [event for event in found if event["what"].startswith("apt: apt-get install")]
    assert len(apt) == 1 and f"python package PyYAML 6.0.1 ({dist})" in apt[0]["details"]
    pips = [event["what"] for event in found if event["kind"] == "python-package"]
    assert len(pips) == 1 and "filelock 3.16.1" in pips[0] and "PyYAML" not in pips[0]
