"""What the watched history adds to a timeline (timeline/watched.py), from records made of one
real capture (real workers with their own env, the real interpreter's packages and startup
.pth files), each later record that capture with planted changes: every planted restart, env
change, worker gone, removal, downgrade and file change is found, with its old value, and
nothing else is (an upgrade, an install, an env that differs without a restart)."""
from __future__ import annotations

import copy
import random
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from conftest import cli_env, unique_marker

from envsnap.history.store import Manifest, Span
from envsnap.snapshot.records import Process, Snapshot
from envsnap.snapshot.store import Store
from envsnap.timeline.code_events import found_release, release
from envsnap.timeline.evidence import DistRecord
from envsnap.timeline.history import Stored
from envsnap.timeline.model import RECORDED, Event, Window
from envsnap.timeline.run import ends_of_runs
from envsnap.timeline.watched import (
    PID_WORD,
    command_of,
    coverage,
    merged,
    package_moves,
    watched_changes,
)

PERIOD = 600.0
SEEDS = range(12)


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Snapshot]:
    """A real capture of three real workers: two with NCCL variables of their own, one whose
    command line holds its own pid (a shell that execs the worker passes its `$$`)."""
    folder = tmp_path_factory.mktemp("watched")
    env = cli_env(folder)
    marker = unique_marker("watched")
    sleep = "import time; time.sleep(120)"
    workers = [
        subprocess.Popen([sys.executable, "-c", sleep, f"{marker}-a"],
                         env={"PATH": "/usr/bin:/bin", "NCCL_PROTO": "LL", "NCCL_DEBUG": "WARN"}),
        subprocess.Popen([sys.executable, "-c", sleep, f"{marker}-b"],
                         env={"PATH": "/usr/bin:/bin", "NCCL_ALGO": "Ring"}),
        subprocess.Popen(["sh", "-c", f'exec "{sys.executable}" -c "{sleep}" {marker}-c '
                          '--pid-file /tmp/worker-$$.pid'], env={"PATH": "/usr/bin:/bin"}),
    ]
    try:
        done = subprocess.run([sys.executable, "-m", "envsnap", "capture", "local", "--proc",
                               marker, "--label", "base"], env=env, cwd=folder,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        document = Store(folder / "store").load("base")
        assert len(document["facts"]["env"]["processes"]) == 3
        yield document
    finally:
        for worker in workers:
            worker.kill()
            worker.wait()


@dataclass
class Planted:
    """What a scenario changed, as the records should show it."""

    restarts: set[tuple[str, str, tuple[tuple[str, str | None, str | None], ...]]] = \
        field(default_factory=set)
    gone: set[str] = field(default_factory=set)
    packages: dict[int, set[tuple[str, str, str | None]]] = field(default_factory=dict)
    files: set[tuple[str, float]] = field(default_factory=set)


def processes(document: Snapshot) -> dict[str, Process]:
    return document["facts"]["env"]["processes"]


def restart(document: Snapshot, pid: str, new_pid: str, start: float,
            env: dict[str, str | None]) -> None:
    """The worker `pid` started again as `new_pid`, its argv's own pid moved along."""
    process = copy.deepcopy(processes(document).pop(pid))
    process["cmdline"] = [part.replace(f"-{pid}.", f"-{new_pid}.")
                          for part in process.get("cmdline") or []]
    process["start_epoch"] = start
    process["env"] = env
    processes(document)[new_pid] = process


def env_moved(rng: random.Random, env: dict[str, str | None]) -> dict[str, str | None]:
    moved = dict(env)
    choice = rng.choice(["drop", "add", "change", "same"])
    ncclish = sorted(name for name in moved if name.startswith("NCCL_"))
    if choice == "drop" and ncclish:
        del moved[rng.choice(ncclish)]
    elif choice == "change" and ncclish:
        moved[rng.choice(ncclish)] = f"v{rng.randrange(100)}"
    elif choice in ("add", "drop", "change"):
        moved[f"NCCL_TEST_{rng.randrange(100)}"] = "1"
    return moved


def changes_of(before: dict[str, str | None], after: dict[str, str | None]
               ) -> tuple[tuple[str, str | None, str | None], ...]:
    return tuple((name, before.get(name), after.get(name))
                 for name in sorted(set(before) | set(after))
                 if before.get(name) != after.get(name))


def downgradable(version: str | None) -> bool:
    return bool(version) and found_release(str(version), "0.0.1") and \
        release(str(version)) > release("0.0.1")


def scenario(base: Snapshot, seed: int) -> tuple[list[Stored], Planted]:
    """Records of one host every PERIOD, each the one before with a few planted changes."""
    rng = random.Random(seed)
    start = 1_796_400_000.0
    records = [Stored("local/0", start, copy.deepcopy(base), "every 10m", watched=True)]
    planted = Planted()
    next_pid = 900_000
    for step in range(1, rng.randrange(3, 8)):
        document = copy.deepcopy(records[-1].document)
        now = start + step * PERIOD
        running = sorted(processes(document))
        for pid in running:
            roll = rng.random()
            process = processes(document)[pid]
            before = dict(process.get("env") or {})
            if roll < 0.35:                               # restarted, its env maybe moved
                next_pid += 1
                after = env_moved(rng, before)
                restart(document, pid, str(next_pid), now - rng.uniform(1, PERIOD - 2), after)
                planted.restarts.add((pid, str(next_pid), changes_of(before, after)))
            elif roll < 0.45 and len(processes(document)) > 1:   # gone
                del processes(document)[pid]
                planted.gone.add(pid)
            elif roll < 0.55:     # its env read otherwise, no restart: not a change
                process["env"] = env_moved(rng, before)
        packages = document["facts"]["python_env"]["packages"]
        moves: set[tuple[str, str, str | None]] = set()
        for name in rng.sample(sorted(packages), 4):
            roll, version = rng.random(), packages[name]
            if roll < 0.25:
                del packages[name]
                moves.add((name, version or "?", None))
            elif roll < 0.5 and downgradable(version):
                packages[name] = "0.0.1"
                moves.add((name, str(version), "0.0.1"))
            elif roll < 0.75:
                packages[name] = "99999.0"                 # an upgrade: the host dates it
        if rng.random() < 0.3:
            packages[f"fresh-{step}"] = "1.0"              # an install: the host dates it
        if moves:
            planted.packages[len(records) - 1] = moves
        pth = document["facts"]["python_env"].get("startup_pth") or {}
        if pth and rng.random() < 0.4:
            path = rng.choice(sorted(pth))
            pth[path] = {"code_lines": [f"import planted_{step}"], "sha256": f"{step:064x}"}
            planted.files.add((path, records[-1].time))
        records.append(Stored(f"local/{step}", now, document, "every 10m", watched=True))
    return records, planted


@pytest.mark.parametrize("seed", SEEDS)
def test_each_planted_change_is_found_and_nothing_else(captured: Snapshot, seed: int) -> None:
    records, planted = scenario(captured, seed)
    found = watched_changes(records)
    assert {(move.before.pid, move.after.pid, move.changes) for move in found.restarts} == \
        planted.restarts
    assert {event.subject for event in found.events if event.kind == "process-start"} == \
        planted.gone
    for index, (earlier, later) in enumerate(zip(records, records[1:])):
        assert set(package_moves(earlier, later)) == planted.packages.get(index, set())
    assert sum(event.kind == "python-package" for event in found.events) == len(planted.packages)
    assert {(event.subject, event.time) for event in found.events if event.kind == "file"} == \
        planted.files
    # alone, a restart is a line only where its env moved
    window = Window(records[0].time - 1, records[-1].time + 1, "1d")
    shown = merged(found, [], window.since, window.until)
    restarted = [event for event in shown if "restarted" in event.what]
    assert len(restarted) == sum(bool(changes) for _, _, changes in planted.restarts)


def test_a_restart_names_the_old_value_and_puts_it_back(captured: Snapshot) -> None:
    records, _ = scenario(captured, 0)
    base = records[0]
    worker = next(pid for pid, process in processes(base.document).items()
                  if (process.get("env") or {}).get("NCCL_PROTO") == "LL")
    later = copy.deepcopy(base.document)
    env = dict(processes(later)[worker].get("env") or {})
    del env["NCCL_PROTO"]
    restart(later, worker, "4242", base.time + 300.5, env)
    pair = [base, Stored("local/1", base.time + PERIOD, later, "process 4242 started",
                         watched=True)]
    [event] = merged(watched_changes(pair), [], base.time - 1, base.time + PERIOD + 1)
    assert "restarted at" in event.what and "NCCL_PROTO: LL -> (absent) (between" in event.what
    assert event.time == base.time + 300.5 and event.exactness == RECORDED
    assert event.subject == "4242" and f"replaces pid {worker}" in event.details[0]
    assert event.test is not None and "env NCCL_PROTO=LL " in event.test
    assert "process 4242 started" in event.evidence


def test_the_hosts_start_event_becomes_the_restart(captured: Snapshot) -> None:
    """The host's own start event of the new pid is replaced, not doubled; with the same env
    it still says restarted (no line of its own without one)."""
    base = Stored("local/0", 1_796_400_000.0, copy.deepcopy(captured), "", watched=True)
    later = copy.deepcopy(captured)
    worker = sorted(processes(later))[0]
    restart(later, worker, "5151", base.time + 100.0,
            dict(processes(later)[worker].get("env") or {}))
    pair = [base, Stored("local/1", base.time + PERIOD, later, "", watched=True)]
    host_start = Event(time=base.time + 100.2, kind="process-start", subject="5151",
                       what="process 5151 started: ...", evidence="/proc", exactness=RECORDED,
                       details=("its env now: ...",))
    assert merged(watched_changes(pair), [], base.time, base.time + PERIOD) == []
    [event] = merged(watched_changes(pair), [host_start], base.time, base.time + PERIOD)
    assert "restarted" in event.what and "its env as before" in event.what
    assert event.details[-1] == "its env now: ..."


def test_a_downgrade_the_host_dates_is_left_to_it(captured: Snapshot) -> None:
    packages = captured["facts"]["python_env"]["packages"]
    name = next(name for name in sorted(packages) if downgradable(packages[name]))
    base = Stored("local/0", 1_796_400_000.0, copy.deepcopy(captured), "", watched=True)
    later = copy.deepcopy(captured)
    later["facts"]["python_env"]["packages"][name] = "0.0.1"
    pair = [base, Stored("local/1", base.time + PERIOD, later, "", watched=True)]
    [event] = watched_changes(pair).events
    assert f"{name} downgraded from {packages[name]} to 0.0.1" in event.what
    assert f"'{name}=={packages[name]}'" in str(event.test)
    dated: list[DistRecord] = [{"name": name, "version": "0.0.1", "time": base.time + 10.0,
                                "folder": "x"}]
    assert watched_changes(pair, dated).events == []


def test_a_pid_in_the_command_line_is_one_command() -> None:
    assert command_of(["w", "--pid-file", "/run/w-1917.pid", "--port", "19170"], "1917", 1) == \
        ("w", "--pid-file", f"/run/w-{PID_WORD}.pid", "--port", "19170")
    assert command_of(["w", "--workers", "1"], "77", 1) == ("w", "--workers", "1")


def test_the_header_says_what_the_history_covered() -> None:
    window = Window(1000.0, 5000.0, "1h")
    line = coverage(Span(None, [], None), window, "local", ["sglang"], ["/srv/repo"])
    assert "none of this host" in line
    assert "`envsnap watch local --proc sglang --repo /srv/repo` keeps one" in line
    before = Manifest("local/a", "local", 900.0, "every 10m")
    inside = Manifest("local/b", "local", 1500.0, "every 10m")
    assert coverage(Span(before, [inside], None), window, "local", [], []) == \
        "watched history: 1 record in the window and the one before it (1970-01-01 00:15:00)"
    assert coverage(Span(None, [inside], None), window, "local", [], []).startswith(
        "watched history: 1 record in the window, none before it")
    assert "no record covers this window (the first is 1970-01-01 00:25:00)" in coverage(
        Span(None, [], inside), Window(100.0, 200.0, "1h"), "local", [], [])


def test_of_a_run_of_the_same_facts_only_its_ends_are_read() -> None:
    manifests = [Manifest(f"local/{number}", "local", float(number), "") for number in range(8)]
    keys: list[object] = ["a", "a", "a", "b", "b", "c", "c", "c"]
    assert [manifest.id for manifest in ends_of_runs(manifests, keys)] == \
        ["local/0", "local/2", "local/3", "local/4", "local/5", "local/7"]
