"""`envsnap timeline`: what changed, and when, from the evidence on the host (real git, pip,
files, a worker, Debian's own dpkg and apt lines), locally and over the test sshd."""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Cli, unique_marker
from helpers.folded import words
from helpers.timelinestory import STEP, Story, git, happen, prepare

DATA = Path(__file__).resolve().parent.parent / "data" / "timeline"
SINCE = "2025-06-01T00:00:00Z"   # before the oldest recorded dpkg line


@pytest.fixture
def story(tmp_path: Path) -> Iterator[Story]:
    found = prepare(tmp_path / "host", unique_marker("timeline-worker"))
    yield found
    found.stop()


def timeline(cli: Cli, host: str, story: Story, *extra: str) -> dict[str, Any]:
    cli.env["TZ"] = "UTC"   # dpkg and apt write local time; the recorded host's was UTC
    result = cli("timeline", host, "--repo", str(story.checkout), "--python", str(story.python),
                 "--proc", story.marker, "--log-root", str(story.root), "--since", SINCE,
                 "--json", *extra)
    assert result.returncode == 0, result.stderr
    found: dict[str, Any] = json.loads(result.stdout)
    return found


def first(events: list[dict[str, Any]], kind: str, text: str) -> int:
    """The index of the first event of `kind` whose line holds `text`."""
    for index, event in enumerate(events):
        if event["kind"] == kind and text in event["what"]:
            return index
    raise AssertionError(f"no {kind} event with {text!r} in: "
                         + "\n".join(e["what"] for e in events))


@pytest.mark.parametrize("over_ssh", [False, True], ids=["local", "ssh"])
def test_each_change_in_order_with_its_time_and_exactness(
        over_ssh: bool, story: Story, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    cli: Cli = request.getfixturevalue("ssh_cli" if over_ssh else "cli")
    host = request.getfixturevalue("sshd").addresses[0] if over_ssh else "local"
    happen(story, tmp_path / "host")
    events = timeline(cli, host, story)["events"]
    order = [first(events, "system-package", "dpkg upgrade libsystemd0 252.36-1~deb12u1"),
             first(events, "system-package", "dpkg install perl "),
             first(events, "system-package", "apt: apt-get install -y tzdata"),
             first(events, "checkout", "pull in"),
             first(events, "checkout", "rebase in"),
             first(events, "stash", "stash pushed"),
             # no snapshot recorded the stash list: a pop is not told from a slow push
             first(events, "stash", "was rewritten"),
             first(events, "python-package", "tinypkg 2.0"),
             first(events, "kernel-message", "GPU fallen off the bus"),
             first(events, "file", "sitecustomize.py"),
             # --proc picks only the story's worker; its command line is cut where a long
             # checkout path (a test worker's) pushes the marker past the line's end
             first(events, "process-start", "time.sleep(120)")]
    assert order == sorted(order)
    by_index = [events[index] for index in order]
    # the times, as each tool wrote them (dpkg, apt: local time, here UTC)
    assert by_index[0]["at"] == "2025-06-24T14:36:25+00:00"      # from dpkg.log.2.gz
    assert by_index[1]["at"] == "2025-06-24T14:36:30+00:00"      # from dpkg.log.1
    assert by_index[2]["at"] == "2026-05-09T07:28:46+00:00"
    for event, step in zip(by_index[3:], ["pull", "rebase", "stash push", "stash pop",
                                          "pip upgrade", "kernel", "sitecustomize", "worker"]):
        # each is marked just after it was done; git keeps whole seconds, a process's start
        # is read to the hundredth (the clock less the uptime: never the whole-second btime)
        early = 0.3 if step == "worker" else 2.5
        assert story.times[step] - early < event["time"] <= story.times[step] + 0.05, \
            (step, event)
    assert [event["exactness"] for event in by_index] == [
        "recorded", "recorded", "recorded", "recorded", "recorded", "recorded", "file time",
        "file time", "recorded", "file time", "recorded"]
    # the evidence each was read from
    assert "dpkg.log.2.gz" in by_index[0]["evidence"]
    assert "Commandline: apt-get install -y tzdata" in by_index[2]["evidence"]
    assert "pull -q origin main: Fast-forward" in by_index[3]["evidence"]
    assert any("Change pynccl.py" in line for line in by_index[3]["details"])
    assert "--rebase origin main (finish): returning to refs/heads/main" in \
        by_index[4]["evidence"]
    assert any("Change engine.py" in line for line in by_index[4]["details"])
    assert "On main: first try" in by_index[5]["what"]   # the popped one left no line
    assert "a pop or drop, or a push that took over a second: cannot tell (1 left)" in \
        by_index[6]["what"]
    assert "tinypkg-2.0.dist-info" in by_index[7]["evidence"]
    assert "NVRM: Xid" in by_index[8]["evidence"]
    assert "NCCL_ALGO=Ring" in by_index[10]["details"][0]


def test_text_lists_the_changes_with_how_to_undo_them(cli: Cli, story: Story,
                                                      tmp_path: Path) -> None:
    assert story.worker is not None
    old_worker = story.worker.pid

    def capture() -> None:
        assert cli("capture", "local", "--label", "before-upgrade", "--repo",
                   str(story.checkout), "--python", str(story.python), "--proc",
                   story.marker).returncode == 0

    happen(story, tmp_path / "host", before_upgrade=capture)
    cli.env["TZ"] = "UTC"
    result = cli("timeline", "local", "--repo", str(story.checkout), "--python",
                 str(story.python), "--log-root", str(story.root), "--since", "10m",
                 "--proc", story.marker)
    assert result.returncode == 0, result.stderr
    out = words(result.stdout)   # folded to 80 columns: where a line breaks varies
    # 10 minutes back: Debian's old lines are out of the window, the story's changes in it
    assert "tzdata" not in out and "libsystemd0" not in out
    assert out.index("pull in") < out.index("rebase in") < out.index("tinypkg 2.0") < \
        out.index("sitecustomize.py written")
    assert "(recorded by the tool)" in out and "(file time: a later touch may move it)" in out
    # how to test or undo each: the pin a snapshot recorded, the old copy it holds
    assert "test/undo: pip install 'tinypkg==1.0' (as snapshot before-upgrade recorded" in out
    assert "test/undo: older copy: snapshot before-upgrade holds its content" in out
    assert "snapshot before-upgrade captured" in out
    # the worker is known from that snapshot: a restart, the pid it replaced
    assert re.search(r"process \d+ restarted: ", out)
    assert f"replaces pid {old_worker} of snapshot before-upgrade" in out
    # the pull came before any snapshot of the checkout: git's own bisect is what is left
    assert "no snapshot holds " + str(story.checkout) + " before it: git -C " + \
        str(story.checkout) + " bisect start " in out


def test_a_move_after_a_snapshot_offers_envsnap_bisect(cli: Cli, story: Story,
                                                      tmp_path: Path) -> None:
    captured = time.time()
    assert cli("capture", "local", "--label", "good", "--repo", str(story.checkout),
               "--python", str(story.python)).returncode == 0
    time.sleep(STEP)   # a capture's time keeps whole seconds: the pull must be after it
    happen(story, tmp_path / "host")
    assert cli("capture", "local", "--label", "bad", "--repo", str(story.checkout),
               "--python", str(story.python)).returncode == 0
    events = timeline(cli, "local", story, "--since", "good")["events"]
    pull = events[first(events, "checkout", "pull in")]
    # no bench record: the bisect line is whole but for the benchmark, and says so
    assert pull["test"].startswith(f"no bench record names the benchmark: add your own --cmd "
                                   f"and --metric to envsnap bisect good bad --repo "
                                   f"{story.checkout}; undo: ")
    # --since good: nothing before that capture (its time kept in whole seconds), however
    # long the machine took between the capture and the pull
    assert all(event["time"] >= int(captured) - 1 for event in events), events


def test_rotated_logs_are_opened_only_while_the_window_reaches_them(
        cli: Cli, story: Story) -> None:
    broken = story.root / "var" / "log" / "dpkg.log.2.gz"
    broken.write_bytes(b"\x1f\x8b not a gzip stream")
    cli.env["TZ"] = "UTC"
    base = ["timeline", "local", "--python", str(story.python), "--log-root", str(story.root),
            "--json", "--until", "2026-06-01T00:00:00Z"]
    recent = cli(*base, "--since", "2026-05-01T00:00:00Z")
    assert recent.returncode == 0 and "dpkg.log.2.gz" not in recent.stderr
    older = cli(*base, "--since", SINCE)
    assert older.returncode == 0
    assert "cannot read dpkg: " in older.stderr and "dpkg.log.2.gz" in older.stderr
    found = json.loads(older.stdout)
    assert found["envsnap_timeline"] == 1
    assert any("dpkg install perl " in e["what"] for e in found["events"])   # .1 still read


def test_a_workers_systemd_unit_file_and_drop_in_are_file_events(cli: Cli,
                                                                   story: Story) -> None:
    """The real worker, its /proc/PID/cgroup as systemd writes it for a service (recorded:
    this machine runs no systemd), and the unit's file and drop-in under the log root."""
    assert story.worker is not None
    pid = story.worker.pid
    (story.root / "proc" / str(pid)).mkdir(parents=True)
    shutil.copy(DATA / "systemd" / "cgroup", story.root / "proc" / str(pid) / "cgroup")
    units = story.root / "lib" / "systemd" / "system"
    drop_in = story.root / "etc" / "systemd" / "system" / "sglang-worker.service.d"
    drop_in.mkdir(parents=True)
    units.mkdir(parents=True)
    (units / "sglang-worker.service").write_text("[Service]\nExecStart=/usr/bin/worker\n")
    (drop_in / "nccl.conf").write_text("[Service]\nEnvironment=NCCL_PROTO=Simple\n")
    os.utime(units / "sglang-worker.service", (1_780_000_000, 1_780_000_000))
    os.utime(drop_in / "nccl.conf", (1_780_000_100, 1_780_000_100))
    events = [event for event in timeline(cli, "local", story)["events"]
              if "systemd unit" in event["what"]]
    assert [(event["time"], event["subject"]) for event in events] == [
        (1_780_000_000, str(units / "sglang-worker.service")),
        (1_780_000_100, str(drop_in / "nccl.conf"))]
    assert all(f"systemd unit sglang-worker.service of process {pid}" in event["what"]
               and event["exactness"] == "file time"
               and event["evidence"].startswith(f"/proc/{pid}/cgroup names sglang-worker")
               for event in events)


def test_a_missing_log_is_not_a_change(cli: Cli, story: Story) -> None:
    shutil.rmtree(story.root / "var" / "log")
    os.makedirs(story.root / "var" / "log")
    gone = story.root / "no-checkout"
    result = cli("timeline", "local", "--python", str(story.python), "--log-root",
                 str(story.root), "--since", "1h", "--repo", str(gone), "--json")
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert not [e for e in found["events"] if e["kind"] == "system-package"]
    assert not [e for e in found["unreadable"] if e.startswith(("dpkg", "apt"))]   # absent
    assert [e for e in found["unreadable"] if e.startswith(f"git: {gone}: ")]   # said
    assert f"warning: local: cannot read git: {gone}: " in result.stderr


def test_a_window_that_ends_before_it_starts_is_refused(cli: Cli) -> None:
    result = cli("timeline", "local", "--since", "2h", "--until", "3h")
    assert result.returncode == 2
    assert result.stderr.strip() == "envsnap: error: --since 2h is after --until 3h"


@pytest.mark.parametrize("since", ["yesterday", "2h ago", "no-such-label"])
def test_a_bad_time_is_one_clear_usage_error(cli: Cli, since: str) -> None:
    result = cli("timeline", "local", "--since", since)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith(f"envsnap: error: time {since!r}")


BENCH = ("import random, runpy, sys; v = runpy.run_path(sys.argv[1])['VERIFY_MS']; "
         "print('gen throughput (token/s): %.2f' % "
         "(2000.0 / (v + 2.3) * random.uniform(0.99, 1.01)))")
METRIC = r"gen throughput \(token/s\): ([0-9.]+)"


def test_the_changes_between_the_last_good_and_first_bad_benchmark_come_first(
        cli: Cli, story: Story, tmp_path: Path) -> None:
    cmd = f"{sys.executable} -c {shlex.quote(BENCH)} {story.checkout / 'pynccl.py'}"

    def bench(label: str) -> None:
        result = cli("bench", "local", "--cmd", cmd, "--metric", METRIC, "--repeat", "3",
                     "--label", label, "--repo", str(story.checkout))
        assert result.returncode == 0, result.stderr

    bench("fast")          # VERIFY_MS 19: ~94 tok/s
    time.sleep(1.1)
    bench("still-fast")
    time.sleep(1.1)
    happen(story, tmp_path / "host")   # the pull brings VERIFY_MS 29
    bench("slow")          # ~64 tok/s
    cli.env["TZ"] = "UTC"
    result = cli("timeline", "local", "--repo", str(story.checkout), "--python",
                 str(story.python), "--log-root", str(story.root), "--since", "fast",
                 "--hot-path", "pynccl*", "--json")
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert found["last_good"]["subject"] == "still-fast"
    assert found["first_bad"]["subject"] == "slow"
    assert "median 9" in found["last_good"]["what"] and "median 6" in found["first_bad"]["what"]
    between = [event["what"] for event in found["between"]]
    assert any(line.startswith("pull in") for line in between)
    assert any("sitecustomize.py written" in line for line in between)
    assert not any(line.startswith("bench") for line in between)
    # the pull's test is a bisect over the benchmark's own command, from a bench record
    pull = next(e for e in found["between"] if e["what"].startswith("pull in"))
    assert pull["role"] == "hot path"
    assert any(line.endswith("Change pynccl.py  (touches pynccl.py: configured hot path)")
               for line in pull["details"])
    rebase = next(e for e in found["between"] if e["what"].startswith("pull --rebase in"))
    assert rebase["role"] is None   # it brought engine.py only
    assert pull["test"].startswith(f"envsnap bisect still-fast slow --repo {story.checkout}")
    assert "--metric " in pull["test"] and "pynccl.py" in pull["test"]
    text = cli("timeline", "local", "--repo", str(story.checkout), "--python",
               str(story.python), "--log-root", str(story.root), "--since", "fast").stdout
    head, _, rest = words(text).partition("all events, oldest first:")
    assert "between the last good and the first bad benchmark:" in head and "pull in" in head
    assert "LAST GOOD bench still-fast" in rest and "FIRST BAD bench slow" in rest


TOKEN = "ghp_" + "Zq8vR2mXk4Lw9TnB7yHc3Fd6Js1Pa0Ue5Gi"   # a made-up GitHub token's shape


def test_secrets_and_control_characters_never_reach_the_terminal(cli: Cli, story: Story,
                                                                 tmp_path: Path) -> None:
    """A commit message carrying a token and an escape sequence: the reflog's line and the
    pulled commit's subject are masked on the host and shown with the escape made visible."""
    dev = tmp_path / "host" / "dev"
    (dev / "evil.py").write_text("X = 1\n")
    git(dev, story.env, "add", "-A")
    git(dev, story.env, "commit", "-q", "-m", f"export GITHUB_TOKEN={TOKEN} \x1b[2J done")
    git(dev, story.env, "push", "-q", "origin", "main")
    git(story.checkout, story.env, "-c", "pull.rebase=false", "pull", "-q", "origin", "main")
    git(story.checkout, story.env, "commit", "-q", "--allow-empty", "-m", f"token={TOKEN}")
    for form in ([], ["--json"]):
        result = cli("timeline", "local", "--repo", str(story.checkout), "--python",
                     str(story.python), "--log-root", str(story.root), "--since", "10m", *form)
        assert result.returncode == 0, result.stderr
        assert TOKEN not in result.stdout and "Zq8vR2mXk4" not in result.stdout
        assert "\x1b" not in result.stdout
        assert "<secret:" in result.stdout
    text = cli("timeline", "local", "--repo", str(story.checkout), "--since", "10m").stdout
    assert "\\x1b[2J done" in words(text)   # the subject, its escape made visible


def file_tests(cli: Cli, story: Story, path: Path) -> list[str]:
    result = cli("timeline", "local", "--python", str(story.python), "--log-root",
                 str(story.root), "--since", "5m", "--json")
    assert result.returncode == 0, result.stderr
    return [e["test"] for e in json.loads(result.stdout)["events"]
            if e["kind"] == "file" and e["subject"] == str(path)]


def test_a_sitecustomize_put_back_by_restore_names_the_rollback_point(cli: Cli,
                                                                     story: Story) -> None:
    site = story.site / "sitecustomize.py"
    assert cli("capture", "local", "--label", "good", "--python",
               str(story.python)).returncode == 0
    time.sleep(1.1)
    site.write_text("import os\nos.environ['NCCL_PROTO'] = 'Simple'\n")   # the bad rewrite
    restored = cli("restore", "good", "--yes")
    assert restored.returncode == 0, restored.stdout + restored.stderr
    rollback = re.search(r"rollback point: envsnap restore (\S+)", restored.stdout)
    assert rollback is not None, restored.stdout
    assert file_tests(cli, story, site) == [
        f"older copy: snapshot {rollback.group(1)} holds its content before this write"]


def test_a_config_file_a_playbook_replaced_names_its_backup(cli: Cli, story: Story,
                                                           tmp_path: Path) -> None:
    conf = Path(cli.env["HOME"]) / ".nccl.conf"
    conf.write_text("NCCL_PROTO=LL\n")
    playbook = tmp_path / "tune.yml"
    playbook.write_text("- hosts: all\n  tasks:\n    - name: NCCL by its config file\n"
                        "      copy: {dest: ~/.nccl.conf, content: \"NCCL_PROTO=Simple\\n\"}\n")
    played = cli("play", str(playbook), "-l", "local")
    assert played.returncode == 0, played.stdout + played.stderr
    backups = sorted(conf.parent.glob(".nccl.conf.envsnap-backup-*"))
    assert len(backups) == 1 and backups[0].read_text() == "NCCL_PROTO=LL\n"
    assert file_tests(cli, story, conf) == [f"older copy: envsnap backup {backups[0]}"]
    conf.unlink()
    backups[0].unlink()
    conf.write_text("NCCL_PROTO=Simple\n")
    assert file_tests(cli, story, conf) == ["no older copy: no snapshot or envsnap backup holds it"]


def test_conda_history_of_the_interpreters_prefix(cli: Cli, story: Story) -> None:
    """A real conda-meta/history (tests/data/timeline/README.md says whose) in the prefix of
    the interpreter: each block one event at the time conda wrote, with its command."""
    meta = story.python.parent.parent / "conda-meta"
    meta.mkdir()
    shutil.copy(DATA / "conda" / "history", meta / "history")
    cli.env["TZ"] = "UTC"
    result = cli("timeline", "local", "--python", str(story.python), "--log-root",
                 str(story.root), "--since", "2016-02-16T13:31:35Z", "--until",
                 "2016-02-18T00:00:00Z", "--json")
    assert result.returncode == 0, result.stderr
    conda = [e for e in json.loads(result.stdout)["events"] if e["kind"] == "conda"]
    assert [(e["at"], e["what"]) for e in conda] == [
        ("2016-02-16T13:31:41+00:00", "conda: /home/ilan/minonda/bin/conda update conda: +7 -7"),
        ("2016-02-16T13:34:30+00:00",
         "conda: /home/ilan/minonda/bin/conda install cas-mirror: +3 -0"),
        ("2016-02-16T14:17:47+00:00",
         "conda: /home/ilan/minonda/bin/conda update cas-mirror: +1 -1"),
        ("2016-02-16T17:19:39+00:00", "conda: /home/ilan/minonda/bin/conda install grin: +1 -0")]
    assert conda[2]["details"] == ["-cas-mirror-1.4.0-py27_x0", "+cas-mirror-1.4.1-py27_x0"]
    assert all(e["exactness"] == "recorded" for e in conda)


def test_a_stash_pushed_and_popped_leaves_its_reset(cli: Cli, story: Story) -> None:
    """Popping the only stash deletes the stash reflog: what is left is the reset git wrote
    when the stash was pushed."""
    (story.checkout / "local.py").write_text("LOCAL = 9\n")
    git(story.checkout, story.env, "add", "-A")
    git(story.checkout, story.env, "stash", "push", "-q", "-m", "only try")
    git(story.checkout, story.env, "stash", "pop", "-q")
    assert not (story.checkout / ".git" / "logs" / "refs" / "stash").exists()
    result = cli("timeline", "local", "--repo", str(story.checkout), "--python",
                 str(story.python), "--log-root", str(story.root), "--since", "5m", "--json")
    assert result.returncode == 0, result.stderr
    moves = [e for e in json.loads(result.stdout)["events"] if e["kind"] in ("checkout", "stash")]
    assert moves[-1]["what"].startswith(f"reset to HEAD (as `git stash push` does; no stash of "
                                        f"that time remains: popped or dropped since) in "
                                        f"{story.checkout}")
    assert moves[-1]["exactness"] == "recorded"
    assert moves[-1]["test"] == "HEAD did not move: nothing to test"
