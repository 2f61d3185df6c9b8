"""What the store knows of this host: its earlier snapshots and bench records as events, the
last good and first bad benchmark, and, for each change, how to test or undo it.

A benchmark is bad when bench/stats.compare calls it a regression against the first one in
the window of the same command and metric (or, with too few runs to tell, when its median
moved worse than the threshold); the last good is the latest benchmark of that command before
the first bad that was not. Records of other commands are never paired, as diff refuses them.

How to test or undo, from what exists, never guessed:
- a checkout move: `envsnap bisect` between the snapshots that hold the checkout before and
  after it, with the first bad bench record's command and metric, shell-quoted (else git's
  own bisect over the move's two commits), and to undo it, `envsnap restore --repo PATH --at
  TIME` of the second before it (restore/at_time.py);
- a package: the pin line back to the version the newest snapshot of its interpreter before
  it recorded (version_before; code_events words it), the uninstall of one that snapshot did
  not hold (dpkg's own line names the old version itself); a package that snapshot recorded
  and no site folder holds now was removed since (removed_events);
- a file: an older copy, in a snapshot that recorded it with another digest or in a backup
  envsnap made beside it; where there is none, it says so.

A worker that a snapshot before its start recorded under another pid, with the same command
line, was restarted: the event says which pid it replaced and how the env differs.
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass, replace

from envsnap.bench.stats import DEFAULT_THRESHOLD, compare
from envsnap.diff.findings import change
from envsnap.snapshot import document as snap
from envsnap.snapshot.records import CustomizeFile, Process, Snapshot
from envsnap.timeline.code_events import NAMED_IN_RUN, pin
from envsnap.timeline.model import (
    BETWEEN_RECORDS,
    RECORDED,
    Event,
    RecordedStashes,
    RecordedVersion,
    RecordNamed,
)
from envsnap.timeline.roles import ROLES, package_role
from envsnap.timeline.window import iso_seconds, moment_text
from envsnap.verdicts import REGRESSION


@dataclass(frozen=True)
class Stored(RecordNamed):
    label: str                 # a snapshot's label; a watched record's id
    time: float
    document: Snapshot
    reason: str = ""           # a watched record: why it was kept ("every 10m")
    watched: bool = False      # a record of the watched history (watched.py), not a snapshot


def stored_of(pairs: list[tuple[str, Snapshot]]) -> list[Stored]:
    """(label, document) of this host -> oldest first, those without a time left out."""
    found = []
    for label, document in pairs:
        when = iso_seconds(snap.captured_at(document) or "")
        if when is not None:
            found.append(Stored(label, when, document))
    return sorted(found, key=lambda stored: stored.time)


def stashes_before(stored: list[Stored], repo: str, time: float) -> RecordedStashes | None:
    """The stash list of `repo` in the newest snapshot captured by `time` that read it."""
    for item in reversed(stored):
        record = snap.repos(item.document).get(repo)
        if item.time > time or not record or snap.repo_error(record) \
                or record.get("stashes_error") or record.get("stashes") is None:
            continue
        entries = tuple((str(stash.get("sha")), str(stash.get("message") or "?"))
                        for stash in (record.get("stashes") or {}).values() if stash.get("sha"))
        return RecordedStashes(item.label, item.time, entries)
    return None


def recorded_repos(stored: list[Stored]) -> list[str]:
    """The checkouts the host's snapshots read, newest snapshot first."""
    found: list[str] = []
    for item in reversed(stored):
        for repo in [*snap.repos(item.document), *(snap.capture_config(item.document)
                                                    .get("repos") or [])]:
            if repo not in found:
                found.append(repo)
    return found


def recorded_setting(stored: list[Stored], key: str) -> list[str]:
    """The --python or --proc values the host's captures ran with, newest first."""
    found: list[str] = []
    for item in reversed(stored):
        value: object = snap.capture_config(item.document).get(key)
        for each in ([value] if isinstance(value, str) else
                     value if isinstance(value, list) else []):
            if isinstance(each, str) and each not in found:
                found.append(each)
    return found


def bench_time(stored: Stored) -> float:
    record = snap.bench(stored.document)
    finished = record.get("finished_at") if record else None
    return iso_seconds(finished or "") or stored.time


def store_events(stored: list[Stored], since: float, until: float) -> list[Event]:
    events = []
    for item in stored:
        record = snap.bench(item.document)
        if record is not None and record.get("values"):
            when = bench_time(item)
            median = (record.get("summary") or {}).get("median")
            what = f"bench {item.label}: median {median:g}" if median is not None else \
                f"bench {item.label}"
            if since <= when <= until:
                events.append(Event(time=when, kind="bench", subject=item.label, what=what,
                                    evidence=f"the store's bench record {item.label}: "
                                             f"{record.get('command') or '?'}",
                                    exactness=RECORDED, metric=median))
        elif since <= item.time <= until:
            events.append(Event(time=item.time, kind="snapshot", subject=item.label,
                                what=f"snapshot {item.label} captured",
                                evidence=f"the store's snapshot {item.label}",
                                exactness=RECORDED))
    return events


def values_of(stored: list[Stored], label: str) -> tuple[list[float], bool]:
    for item in stored:
        if item.label == label and (record := snap.bench(item.document)):
            return list(record.get("values") or []), bool(record.get("lower_is_better"))
    return [], False


def is_worse(baseline: list[float], new: list[float], lower_is_better: bool) -> bool:
    result = compare(baseline, new, lower_is_better=lower_is_better)
    if result["verdict"] == REGRESSION:
        return True
    ratio = result["ratio"]
    if result["p_value"] is not None or ratio is None:
        return False
    return ratio > 1 + DEFAULT_THRESHOLD if lower_is_better else ratio < 1 - DEFAULT_THRESHOLD


def bench_key(stored: list[Stored], label: str) -> tuple[str, str, bool] | None:
    """What a bench record ran: its command, metric and direction, as `diff` compares them
    (two records of other commands measure other things)."""
    for item in stored:
        if item.label == label and (record := snap.bench(item.document)):
            return (str(record.get("command") or ""), str(record.get("metric") or ""),
                    bool(record.get("lower_is_better")))
    return None


def good_and_bad(events: list[Event], stored: list[Stored]) -> tuple[Event | None, Event | None]:
    """The last good and first bad benchmark of one command: each command's benchmarks
    against the first of them; of the commands that turned bad, the one that did first."""
    by_command: dict[tuple[str, str, bool] | None, list[Event]] = {}
    for event in events:
        if event.kind == "bench":
            by_command.setdefault(bench_key(stored, event.subject), []).append(event)
    pairs = [pair for benches in by_command.values()
             if (pair := first_turn(benches, stored))[1] is not None]
    if not pairs:
        return None, None
    return min(pairs, key=lambda pair: pair[1].time if pair[1] else 0.0)


def first_turn(benches: list[Event], stored: list[Stored]) -> tuple[Event | None, Event | None]:
    """Benchmarks of one command, oldest first -> (the last good, the first bad) of them."""
    if len(benches) < 2:
        return None, None
    baseline, lower = values_of(stored, benches[0].subject)
    last_good = benches[0]
    for event in benches[1:]:
        values, _ = values_of(stored, event.subject)
        if is_worse(baseline, values, lower):
            return last_good, event
        last_good = event
    return None, None


# ---- how to test or undo --------------------------------------------------------------------

def with_tests(events: list[Event], stored: list[Stored], host: str,
               recorded: list[Stored] | None = None) -> list[Event]:
    """Each event with how to test or undo it: from the snapshots (`stored`), and a file's
    older copy from the watched records too (`recorded`: both, oldest first)."""
    _, first_bad = good_and_bad(events, stored)
    bench_cmd = bench_command(stored, first_bad.subject if first_bad else None)
    events = [with_restart(event, stored) if event.kind == "process-start" else event
              for event in events]
    return [replace(event, test=test_of(event, stored, host, bench_cmd,
                                        stored if recorded is None else recorded))
            if event.test is None else event for event in events]


def with_restart(event: Event, stored: list[Stored]) -> Event:
    """A worker whose command line a snapshot before it recorded under another pid was
    restarted: say which pid it replaced and how its env differs from that one's."""
    for item in reversed([item for item in stored if is_before(item, event)]):
        for pid, process in (snap.env(item.document).get("processes") or {}).items():
            if pid != event.subject and tuple(process.get("cmdline") or ()) == event.argv:
                return replace(event, what=event.what.replace(" started:", " restarted:", 1),
                               details=event.details + restart_lines(pid, item.label,
                                                                     process, event))
    return event


def restart_lines(pid: str, label: str, process: Process, event: Event) -> tuple[str, ...]:
    before = snap.process_env(process)
    lines = [f"replaces pid {pid} of snapshot {label}"]
    if before is None:
        return tuple(lines)
    now = dict(event.env)
    for name in sorted(set(before) | set(now)):
        if before.get(name) != now.get(name):
            lines.append(f"env {name}: {change(before.get(name), now.get(name), None)}")
    return tuple(lines)


def bench_command(stored: list[Stored], label: str | None) -> str | None:
    """`--cmd ... --metric ...` of the bench record `label` (the first bad benchmark), else of
    the newest one that has both; shell-quoted, so the bisect line runs as printed."""
    records = [item for item in reversed(stored) if (record := snap.bench(item.document))
               and record.get("command") and record.get("metric")]
    chosen = next((item for item in records if item.label == label), None) or \
        next(iter(records), None)
    record = snap.bench(chosen.document) if chosen else None
    if record is None:
        return None
    lower = " --lower-is-better" if record.get("lower_is_better") else ""
    return (f"--cmd {shlex.quote(str(record['command']))} "
            f"--metric {shlex.quote(str(record['metric']))}{lower}")


def test_of(event: Event, stored: list[Stored], host: str, bench_cmd: str | None,
            recorded: list[Stored]) -> str | None:
    if event.kind == "checkout":
        return checkout_test(event, stored, host, bench_cmd)
    if event.kind == "file":
        return file_copy(event, recorded)
    return None


def checkout_test(event: Event, stored: list[Stored], host: str, bench_cmd: str | None
                  ) -> str:
    return f"{checkout_bisect(event, stored, host, bench_cmd)}; undo: " \
           f"{checkout_undo(event, host)}"


def checkout_bisect(event: Event, stored: list[Stored], host: str, bench_cmd: str | None
                    ) -> str:
    """A command that runs as printed: `envsnap bisect` between the snapshots around the
    move with the recorded benchmark's command; without a snapshot before it, git's own
    bisect over the move's two commits; without a bench record, what is missing, said."""
    repo = shlex.quote(event.subject)
    holding = [item for item in stored if event.subject in snap.repos(item.document)]
    before = [item for item in holding if is_before(item, event)]
    after = [item for item in holding if item.time >= event.time]
    if not before:
        if len(event.moved) != 2:
            return f"no snapshot holds {event.subject} before it"
        old, new = event.moved
        return (f"no snapshot holds {event.subject} before it: git -C {repo} bisect start "
                f"{new} {old}, then at each step run the benchmark and mark "
                f"`git -C {repo} bisect good` or `bad`")
    good = shlex.quote(before[-1].label)
    if bench_cmd is None:
        missing = "no bench record names the benchmark: add your own --cmd and --metric to "
        bench_cmd = ""
    else:
        missing, bench_cmd = "", f" {bench_cmd}"
    if not after:
        return (f"{missing}envsnap capture {shlex.quote(host)} --repo {repo} --label after-move"
                f" && envsnap bisect {good} after-move --repo {repo}{bench_cmd}")
    return (f"{missing}envsnap bisect {good} {shlex.quote(after[0].label)} --repo "
            f"{repo}{bench_cmd}")


def checkout_undo(event: Event, host: str) -> str:
    """The checkout back where its reflog says HEAD stood before the move (restore --at)."""
    where = "" if host == "local" else f"--host {shlex.quote(host)} "
    moment = event.undo_at if event.undo_at is not None else event.time - 1
    return f"envsnap restore {where}--repo {shlex.quote(event.subject)} --at {moment_text(moment)}"


def is_before(item: Stored, event: Event) -> bool:
    """Captured before the event for sure: a capture time keeps whole seconds."""
    return item.time + 1 <= event.time


SiteDirs = list[tuple[Stored, frozenset[str]]]


def site_dirs_of(stored: list[Stored]) -> SiteDirs:
    """Each snapshot with its interpreter's site folders, read once for every package."""
    return [(item, frozenset(recorded_site_dirs(item.document))) for item in stored]


def version_before(stored: SiteDirs, name: str, site_dir: str, time: float,
                   installed: str | None = None) -> RecordedVersion | None:
    """The newest snapshot captured before `time` of the interpreter that reads `site_dir`,
    and the version of `name` it recorded (None: it had none). A capture reads the packages
    a moment after its time: one that holds the version `installed` at `time` and may still
    have been reading then saw the install itself, not what it replaced, and is passed over."""
    for item, folders in reversed(stored):
        if item.time + 1 > time or site_dir not in folders:
            continue
        packages = snap.packages(item.document)
        version = (packages[name] or "?") if name in packages else None
        if installed is not None and version == installed and time < read_until(item):
            continue
        return RecordedVersion(item.label, item.time, version, item.watched)
    return None


def read_until(item: Stored) -> float:
    """The latest moment a capture may have read the host: its time keeps whole seconds, and
    the agent started and its collectors ran after it (their seconds summed bound it,
    whether they ran one after another or side by side)."""
    meta = snap.meta(item.document)
    seconds = (meta.get("agent") or {}).get("startup_seconds") or 0.0
    seconds += sum(collector.get("seconds") or 0.0
                   for collector in (meta.get("collectors") or {}).values())
    return item.time + 1 + seconds


def recorded_site_dirs(document: Snapshot) -> list[str]:
    """The site folders of the interpreter whose packages the snapshot recorded."""
    if snap.collector_error(document, "python_env"):
        return []
    return list(snap.python_env(document).get("site_dirs") or [])


def removed_events(stored: list[Stored], held: dict[str, list[str]], now: float,
                   since: float, until: float) -> list[Event]:
    """Packages the newest snapshot of an interpreter recorded that none of its site folders
    holds now: removed between that capture and now (an uninstall leaves no record). Only
    where the agent read each of those folders now (`held`: folder -> the names it holds),
    and where that span meets the window."""
    events = []
    seen: set[tuple[str, ...]] = set()
    for item in reversed(stored):
        folders = tuple(recorded_site_dirs(item.document))
        if not folders or folders in seen or not all(folder in held for folder in folders):
            continue
        seen.add(folders)
        if item.time > until or now < since:
            continue
        # a package found outside the site folders (PYTHONPATH) is not judged by them
        present = {name for folder in folders for name in held[folder]} | set(
            snap.python_env(item.document).get("outside_site") or ())
        gone = [(name, version or "?") for name, version in
                sorted(snap.packages(item.document).items()) if name not in present]
        if len(gone) == 1:
            events.append(removed_event(item, *gone[0], folders, now))
        elif gone:
            events.append(removed_run_event(item, gone, folders, now))
    return events


def removed_run_event(item: Stored, gone: list[tuple[str, str]], folders: tuple[str, ...],
                      now: float) -> Event:
    """Several packages gone since one snapshot (an uninstall of many, or several): one
    event, its packages folded into its details as an install run's are."""
    roles = [package_role(name) for name, _ in gone]
    named = sorted(range(len(gone)), key=lambda index: roles[index] is None)
    shown = ", ".join(f"{gone[index][0]} {gone[index][1]}" for index in named[:NAMED_IN_RUN])
    more = ", ..." if len(gone) > NAMED_IN_RUN else ""
    return Event(
        time=item.time, until=now, kind="python-package", subject=", ".join(folders),
        what=f"{len(gone)} python packages removed (recorded by {item.named}, gone "
             f"now): {shown}{more}",
        evidence=f"{item.named} recorded them; no .dist-info of them in "
                 f"{', '.join(folders)} now (an uninstall writes no record), between "
                 f"{iso_text(item.time)} and now ({iso_text(now)})",
        exactness=BETWEEN_RECORDS, folded=len(gone),
        details=tuple(f"{name} {version} removed" + (f" [{role}]" if role else "")
                      for (name, version), role in zip(gone, roles)),
        role=", ".join(role for role, _ in ROLES if role in roles) or None,
        test=f"pip install {' '.join(pin(name, version) for name, version in gone)} (as "
             f"{item.named} recorded{item.restore})")


def removed_event(item: Stored, name: str, version: str, folders: tuple[str, ...],
                  now: float) -> Event:
    return Event(
        time=item.time, until=now, kind="python-package", subject=name,
        what=f"python package {name} {version} removed (recorded by {item.named}, "
             "gone now)",
        evidence=f"{item.named} recorded it; no .dist-info of it in "
                 f"{', '.join(folders)} now (an uninstall writes no record)",
        exactness=BETWEEN_RECORDS,
        details=(f"between {item.named} ({iso_text(item.time)}) and now "
                 f"({iso_text(now)})",),
        role=package_role(name),
        test=f"pip install {pin(name, version)} (as {item.named} recorded{item.restore})")


def iso_text(seconds: float) -> str:
    return moment_text(seconds).replace("T", " ").rstrip("Z")


def file_copy(event: Event, stored: list[Stored]) -> str:
    """The newest snapshot, up to the write's second, that holds other bytes of the file
    (a restore's rollback point is captured the second it writes); else one from before it
    that holds the same bytes, which says the write changed nothing."""
    held = [(item, recorded) for item in reversed(stored) if item.time <= event.time
            for recorded in recorded_copies(item.document, event.subject)]
    for item, recorded in held:
        if event.digest is None or recorded.get("sha256") != event.digest:
            return f"older copy: {item.named} holds its content before this write"
    for item, _ in held:
        if is_before(item, event):
            return (f"older copy: {item.named} holds its content (the same bytes: "
                    "this write changed nothing)")
    return "no older copy: no snapshot or envsnap backup holds it"


def recorded_copies(document: Snapshot, path: str) -> list[CustomizeFile]:
    customize = snap.python_env(document).get("customize") or {}
    return [recorded for recorded in customize.values() if recorded is not None
            and recorded.get("path") == path and recorded.get("content") is not None]
