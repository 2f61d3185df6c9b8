"""The watched history in a timeline: what changed between two records `envsnap watch` kept
of the host, which the host's own evidence no longer shows.

A record is a whole snapshot with its capture time and the reason it was kept (history.Stored
with `watched` set). Consecutive records of one host are compared, oldest first:

- workers (facts.env.processes): a worker is known across a restart by its command, the argv
  with its own pid and its parent's pid, where an argument holds one as a whole number
  (`--pid-file /run/w-1917.pid`), read as the same word (`PID`); one run of a process is its
  pid and its start time (a pid the kernel reused starts at another time). Of the processes
  of one command, those running in both records are left; of the others, one whose env
  equals one gone is paired with it first, the rest in start order. A pair is a restart: its
  env change (the variables the capture records: the env prefixes, PATH, PYTHONPATH) is an
  event at the new start, with the command that starts it with the old env again; a restart
  with the same env adds no line (`merged` says it on the host's own start event where the
  timeline has one). A process gone with no new one of its command is a worker gone. A
  process whose env differs between two records without a restart is not a change (a
  process's env is fixed when it starts): nothing is said of it. Only where the later record
  looked for every --proc pattern the earlier one did, and read the processes whole.
- packages (python_env.packages) of one interpreter: a removal or a downgrade, with the old
  version and the pip line that puts it back (installs and upgrades the host's .dist-info
  records show already; their "upgraded from X" comes from the records through
  history.version_before);
- files whose content a record holds (sitecustomize/usercustomize, a startup .pth file's code
  lines): a change, before and after, naming both records' times.

Each change found between two records stands at the first record's time with the later one
as `until` ("between records"), but a restart, whose start time the kernel recorded.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from envsnap.diff.findings import ABSENT_TEXT
from envsnap.snapshot import document as snap
from envsnap.text import plural
from envsnap.timeline.code_events import UNSHOWN_ENV, found_release, normalised, pin, release
from envsnap.timeline.model import BETWEEN_RECORDS, RECORDED, Event, Window
from envsnap.timeline.roles import package_role

if TYPE_CHECKING:
    from envsnap.history.store import Span
    from envsnap.snapshot.records import Process, Snapshot
    from envsnap.timeline.evidence import DistRecord
    from envsnap.timeline.history import Stored

PID_WORD = "PID"
SHORT_ARGV = 60            # characters of a worker's command on its event's line
NAMED_CHANGES = 3          # env changes named on a restart's line; its details list them all
SHOWN_LINES = 12           # lines of a file's content before and after, each


def clock(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%H:%M:%S")


def moment(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def record_named(record: Stored) -> str:
    """"the record of 2026-12-05 14:00:10 (every 10m)": its time, and why it was kept."""
    reason = f" ({record.reason})" if record.reason else ""
    return f"the record of {moment(record.time)}{reason}"


# ---- workers --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Worker:
    """One run of a matched process, as one record holds it."""

    pid: str
    command: tuple[str, ...]            # argv, its own and its parent's pid read as PID
    argv: tuple[str, ...]
    cwd: str | None
    start: float | None
    env: tuple[tuple[str, str | None], ...] | None   # None: not readable then

    def same_run(self, other: Worker) -> bool:
        """The same process: one pid, started at one time (a capture keeps whole seconds)."""
        if self.pid != other.pid:
            return False
        return self.start is None or other.start is None or abs(self.start - other.start) < 1


@dataclass(frozen=True)
class Restart:
    """A worker gone between two records and one of its command started in its place."""

    before: Worker
    after: Worker
    earlier: Stored
    later: Stored
    changes: tuple[tuple[str, str | None, str | None], ...]   # (name, before, after)


@dataclass(frozen=True)
class Gone:
    worker: Worker
    earlier: Stored
    later: Stored


def command_of(argv: list[str], pid: str, ppid: int | None) -> tuple[str, ...]:
    """The argv with the process's own and its parent's pid, where an argument holds one as a
    whole number, read as PID: a worker restarted with `--pid-file w-<its pid>.pid` is the
    same command. Pid 1 (init) is left: a `1` in an argument is more often a count."""
    pids = [str(found) for found in (pid, ppid) if found is not None and str(found) not in
            ("0", "1")]
    if not pids:
        return tuple(argv)
    pattern = re.compile(r"(?<!\d)(?:" + "|".join(map(re.escape, pids)) + r")(?!\d)")
    return tuple(pattern.sub(PID_WORD, argument) for argument in argv)


def workers_of(document: Snapshot) -> list[Worker]:
    found = []
    for pid, process in (snap.env(document).get("processes") or {}).items():
        argv = list(process.get("cmdline") or [])
        if not argv:
            continue
        env = snap.process_env(process)
        found.append(Worker(str(pid), command_of(argv, str(pid), process.get("ppid")),
                            tuple(argv), process.get("cwd"), start_of(process),
                            None if env is None else tuple(sorted(env.items()))))
    return found


def start_of(process: Process) -> float | None:
    start = process.get("start_epoch")
    return float(start) if start is not None else None


def reads_workers_whole(earlier: Snapshot, later: Snapshot) -> bool:
    """The later record looked for every worker the earlier one did, and read all it found:
    else a worker missing from it may only not have been looked for."""
    if snap.collector_error(earlier, "env") or snap.collector_error(later, "env"):
        return False
    looked = set(snap.env(later).get("proc_patterns") or [])
    return set(snap.env(earlier).get("proc_patterns") or []) <= looked and \
        not snap.env(later).get("processes_omitted")


def worker_moves(earlier: Stored, later: Stored) -> tuple[list[Restart], list[Gone]]:
    """The restarts and the workers gone between two consecutive records."""
    if not reads_workers_whole(earlier.document, later.document):
        return [], []
    restarts: list[Restart] = []
    gone: list[Gone] = []
    after_all = workers_of(later.document)
    by_command: dict[tuple[str, ...], tuple[list[Worker], list[Worker]]] = {}
    for worker in workers_of(earlier.document):
        by_command.setdefault(worker.command, ([], []))[0].append(worker)
    for worker in after_all:
        if worker.command in by_command:
            by_command[worker.command][1].append(worker)
    for olds, news in by_command.values():
        left = [old for old in olds if not any(old.same_run(new) for new in news)]
        # a run it did not hold, started after it: one started before was not among its
        # processes (another pattern, a read that failed), not a restart it can place
        started = [new for new in news if not any(new.same_run(old) for old in olds)
                   and (new.start is None or new.start > earlier.time - 1)]
        for old, new in pairs(left, started):
            restarts.append(Restart(old, new, earlier, later, env_changes(old, new)))
        paired = {id(old) for old, _ in pairs(left, started)}
        gone += [Gone(old, earlier, later) for old in left if id(old) not in paired]
    return restarts, gone


def by_start(worker: Worker) -> tuple[float, str]:
    return (worker.start if worker.start is not None else 0.0, worker.pid)


def pairs(olds: list[Worker], news: list[Worker]) -> list[tuple[Worker, Worker]]:
    """Gone runs with new ones of one command: the same env first, then in start order."""
    olds, news = sorted(olds, key=by_start), sorted(news, key=by_start)
    found = []
    for old in list(olds):
        same = next((new for new in news if new.env is not None and new.env == old.env), None)
        if same is not None:
            found.append((old, same))
            olds.remove(old)
            news.remove(same)
    return found + list(zip(olds, news))


def env_changes(old: Worker, new: Worker) -> tuple[tuple[str, str | None, str | None], ...]:
    if old.env is None or new.env is None:
        return ()
    before, after = dict(old.env), dict(new.env)
    return tuple((name, before.get(name), after.get(name))
                 for name in sorted(set(before) | set(after))
                 if before.get(name) != after.get(name))


def value_text(value: str | None) -> str:
    return ABSENT_TEXT if value is None else value


def short_argv(argv: tuple[str, ...]) -> str:
    text = shlex.join(argv)
    return text if len(text) <= SHORT_ARGV else text[:SHORT_ARGV - 3] + "..."


def start_command(worker: Worker, names: list[str]) -> str:
    """A command line that starts `worker` again with its recorded value of each of `names`
    (unset where it had none); the rest of the env is the caller's."""
    env = dict(worker.env or ())
    unset = [f"-u {shlex.quote(name)}" for name in names if env.get(name) is None]
    put = [shlex.quote(f"{name}={env[name]}") for name in names if env.get(name) is not None]
    where = f"cd {shlex.quote(worker.cwd)} && " if worker.cwd else ""
    return f"{where}env {' '.join(unset + put + [shlex.join(worker.argv)])}"


def restart_event(restart: Restart) -> Event:
    """The env a restart changed, at the new run's start (or, not known, between the two
    records)."""
    new, old = restart.after, restart.before
    start = new.start if new.start is not None else restart.later.time
    named = "; ".join(f"{name}: {value_text(before)} -> {value_text(after)}"
                      for name, before, after in restart.changes[:NAMED_CHANGES])
    more = "; ..." if len(restart.changes) > NAMED_CHANGES else ""
    changed = f": {named}{more}" if restart.changes else \
        (": its env as before" if old.env is not None and new.env is not None else
         ": its env before or after not readable")
    names = [name for name, _, _ in restart.changes]
    return Event(
        time=start, kind="process-start", subject=new.pid,
        what=f"worker {short_argv(new.argv)} restarted at {clock(start)}{changed} (between "
             f"{clock(restart.earlier.time)} and {clock(restart.later.time)})",
        evidence=f"the watched history: {record_named(restart.earlier)} held pid {old.pid}, "
                 f"{record_named(restart.later)} holds pid {new.pid} in its place; its start "
                 "from /proc",
        exactness=RECORDED if new.start is not None else BETWEEN_RECORDS,
        until=None if new.start is not None else restart.later.time,
        details=(f"replaces pid {old.pid}" + (f", started {moment(old.start)}"
                                              if old.start is not None else ""),
                 *(f"env {name}: {value_text(before)} -> {value_text(after)}"
                   for name, before, after in restart.changes)),
        test=(f"start it with the env {record_named(restart.earlier)} held: "
              f"{start_command(old, names)}") if names else None,
        argv=new.argv,
        env=tuple((name, value) for name, value in new.env or () if value is not None))


def gone_event(gone: Gone) -> Event:
    worker = gone.worker
    names = [name for name, value in worker.env or () if name not in UNSHOWN_ENV
             and value is not None]
    return Event(
        time=gone.earlier.time, until=gone.later.time, kind="process-start", subject=worker.pid,
        what=f"worker {short_argv(worker.argv)} (pid {worker.pid}) gone (between "
             f"{clock(gone.earlier.time)} and {clock(gone.later.time)})",
        evidence=f"the watched history: {record_named(gone.earlier)} held pid {worker.pid}, "
                 f"{record_named(gone.later)} holds no process of its command",
        exactness=BETWEEN_RECORDS, argv=worker.argv,
        test=(f"start it again with the variables {record_named(gone.earlier)} held (the "
              f"rest are yours): {start_command(worker, names)}")
        if worker.env is not None else None)


# ---- packages and files ---------------------------------------------------------------------

def interpreter_of(document: Snapshot) -> tuple[str, tuple[str, ...]] | None:
    """Which interpreter's packages a record holds: its executable and site folders."""
    if snap.collector_error(document, "python_env"):
        return None
    python = snap.python_env(document)
    return (str((python.get("interpreter") or {}).get("executable") or "?"),
            tuple(python.get("site_dirs") or ()))


def is_downgrade(old: str, new: str) -> bool:
    return found_release(old, new) and release(new) < release(old)


def package_moves(earlier: Stored, later: Stored) -> list[tuple[str, str, str | None]]:
    """(name, old version, new version or None: removed) of each package removed or
    downgraded between two records of one interpreter."""
    if interpreter_of(earlier.document) is None or \
            interpreter_of(earlier.document) != interpreter_of(later.document):
        return []
    before, after = snap.packages(earlier.document), snap.packages(later.document)
    if before == after:    # most records: only what differs is read
        return []
    moves: list[tuple[str, str, str | None]] = []
    for name, old in sorted(before.items()):
        new = after.get(name)
        if name not in after:
            moves.append((name, old or "?", None))
        elif old and new and new != old and is_downgrade(old, new):
            moves.append((name, old, new))
    return moves


def move_text(name: str, old: str, new: str | None) -> str:
    return f"{name} {old} removed" if new is None else f"{name} downgraded from {old} to {new}"


def package_event(earlier: Stored, later: Stored,
                  moves: list[tuple[str, str, str | None]]) -> Event:
    executable = (interpreter_of(earlier.document) or ("python3",))[0]
    roles = [package_role(name) for name, _, _ in moves]
    between = f"between {clock(earlier.time)} and {clock(later.time)}"
    if len(moves) == 1:
        what = f"python package {move_text(*moves[0])} ({between})"
    else:
        shown = ", ".join(move_text(*move) for move in moves[:NAMED_CHANGES])
        what = (f"{len(moves)} python packages removed or downgraded ({between}): {shown}"
                + (", ..." if len(moves) > NAMED_CHANGES else ""))
    return Event(
        time=earlier.time, until=later.time, kind="python-package",
        subject=moves[0][0] if len(moves) == 1 else executable, what=what,
        evidence=f"the watched history: {record_named(earlier)} and {record_named(later)} of "
                 f"{executable} (an uninstall or a downgrade's old version leaves no record "
                 "on the host)",
        exactness=BETWEEN_RECORDS, folded=len(moves) if len(moves) > 1 else 0,
        details=tuple(move_text(*move) + (f" [{role}]" if role else "")
                      for move, role in zip(moves, roles)) if len(moves) > 1 else (),
        role=", ".join(sorted({role for role in roles if role})) or None,
        test=f"put back the versions {record_named(earlier)} held: "
             f"{shlex.quote(executable)} -m pip install "
             f"{' '.join(pin(name, old) for name, old, _ in moves)}")


@dataclass(frozen=True)
class Content:
    """A file a record holds the content of: its digest and its lines."""

    digest: str | None
    lines: tuple[str, ...] | None      # None: not held (too large, unreadable)


def contents_of(document: Snapshot) -> dict[str, Content]:
    """{path: content} of the customize files and startup .pth files a record holds."""
    if snap.collector_error(document, "python_env"):
        return {}
    python = snap.python_env(document)
    found: dict[str, Content] = {}
    for customize in (python.get("customize") or {}).values():
        if customize is not None and customize.get("path") and not customize.get("error"):
            text = customize.get("content")
            found[str(customize["path"])] = Content(
                customize.get("sha256"), None if text is None or customize.get("truncated")
                else tuple(text.splitlines()))
    for path, pth in (python.get("startup_pth") or {}).items():
        if not pth.get("error"):
            found[path] = Content(pth.get("sha256"), tuple(pth.get("code_lines") or ()))
    return found


def file_moves(earlier: Stored, later: Stored) -> list[Event]:
    """A held file whose digest differs between two records; one there and not in the other
    (written, or removed) where the two records read the same interpreter."""
    if interpreter_of(earlier.document) is None or \
            interpreter_of(earlier.document) != interpreter_of(later.document):
        return []
    before, after = contents_of(earlier.document), contents_of(later.document)
    events = []
    for path in sorted(set(before) | set(after)):
        old, new = before.get(path), after.get(path)
        if old is not None and new is not None and old.digest == new.digest:
            continue
        events.append(file_event(path, old, new, earlier, later))
    return events


def content_lines(when: str, content: Content | None) -> list[str]:
    if content is None:
        return [f"{when}: absent"]
    if content.lines is None:
        return [f"{when}: content not held (sha256 {str(content.digest)[:12]})"]
    shown = [f"  {line}" for line in content.lines[:SHOWN_LINES]]
    more = [f"  ... ({len(content.lines) - SHOWN_LINES} more lines)"] \
        if len(content.lines) > SHOWN_LINES else []
    return [f"{when}: {len(content.lines)} lines", *shown, *more]


def file_event(path: str, old: Content | None, new: Content | None, earlier: Stored,
               later: Stored) -> Event:
    how = "written" if old is None else "removed" if new is None else "changed"
    between = f"between {clock(earlier.time)} and {clock(later.time)}"
    return Event(
        time=earlier.time, until=later.time, kind="file", subject=path,
        what=f"{path} {how} ({between})",
        evidence=f"the watched history: {record_named(earlier)} and {record_named(later)} "
                 "hold its content",
        exactness=BETWEEN_RECORDS, digest=new.digest if new else None,
        details=tuple(content_lines(f"before ({moment(earlier.time)})", old)
                      + content_lines(f"after ({moment(later.time)})", new)),
        test=f"older copy: {record_named(earlier)} holds its content before"
        if old is not None and old.lines is not None else None)


# ---- all of it, and with the host's own evidence --------------------------------------------

@dataclass(frozen=True)
class Found:
    """What the records show: events of their own, and the restarts (with the same env too,
    which only ever amend the host's own start event)."""

    events: list[Event]
    restarts: list[Restart]


def watched_changes(records: list[Stored], dists: list[DistRecord] | None = None) -> Found:
    """Consecutive records of one host, oldest first -> what changed between each two. A
    downgrade whose new version the host's own .dist-info records (`dists`) date between the
    two records is left to the host's install event, which has its time."""
    dated = {(normalised(dist.get("name", "")), dist.get("version")): float(dist.get("time", 0))
             for dist in dists or []}
    events: list[Event] = []
    restarts: list[Restart] = []
    for earlier, later in zip(records, records[1:]):
        moved, gone = worker_moves(earlier, later)
        restarts += moved
        events += [gone_event(each) for each in gone]
        moves = [(name, old, new) for name, old, new in package_moves(earlier, later)
                 if new is None or not earlier.time - 1 <= dated.get((name, new), -1.0)
                 <= later.time + 1]
        if moves:
            events.append(package_event(earlier, later, moves))
        events += file_moves(earlier, later)
    return Found(events, restarts)


def merged(found: Found, host_events: list[Event], since: float, until: float) -> list[Event]:
    """The host's events with what the records add: a restart takes the place of the
    host's start event of its pid (and is shown alone only where the env changed); a file
    change the host dated lends it its content before and after. Only what meets
    [since, until]."""
    restarts = {restart.after.pid: restart for restart in found.restarts}
    used: set[int] = set()
    events = []
    for event in host_events:
        restart = restarts.get(event.subject) if event.kind == "process-start" else None
        if restart is not None and starts_with(event, restart):
            used.add(id(restart))
            own = restart_event(restart)
            events.append(replace(own, details=own.details + told_once(event, own, restart)))
            continue
        change = next((change for change in found.events if change.kind == "file"
                       and change.subject == event.subject and id(change) not in used
                       and change.until is not None
                       and change.time - 1 <= event.time <= change.until + 1), None) \
            if event.kind == "file" else None
        if change is not None:
            used.add(id(change))
            events.append(replace(event, details=event.details + change.details,
                                  test=change.test or event.test))
            continue
        events.append(event)
    events += [restart_event(restart) for restart in found.restarts
               if id(restart) not in used and restart.changes]
    events += [event for event in found.events if id(event) not in used]
    return sorted((event for event in events if meets(event, since, until)),
                  key=lambda event: event.time)


def told_once(event: Event, own: Event, restart: Restart) -> tuple[str, ...]:
    """The host's start event's lines that the restart's own do not say already: a snapshot
    that held the same old pid tells the same replacement and the same env change."""
    same_pid = f"replaces pid {restart.before.pid} of snapshot "
    return tuple(line for line in event.details
                 if line not in own.details and not line.startswith(same_pid))


def starts_with(event: Event, restart: Restart) -> bool:
    start = restart.after.start
    return start is None or abs(event.time - start) < 2


def meets(event: Event, since: float, until: float) -> bool:
    return event.time <= until and (event.until if event.until is not None
                                    else event.time) >= since


# ---- the header's line ----------------------------------------------------------------------

def watch_command(host: str, procs: list[str], repos: list[str]) -> str:
    """The `envsnap watch` that keeps a history of what this timeline looked at."""
    return shlex.join(["envsnap", "watch", host,
                       *(word for proc in procs for word in ("--proc", proc)),
                       *(word for repo in repos for word in ("--repo", repo))])


def coverage(span: Span, window: Window, host: str, procs: list[str], repos: list[str]) -> str:
    """What the watched history covered of the window, said once: where no record does, what
    that leaves unknown and the command that would have kept one."""
    keep = f"`{watch_command(host, procs, repos)}` keeps one"
    unknown = "a restarted worker's env before, a removed package's version and a file's " \
        "content before are known only from a record made then"
    inside, before = span.inside, span.before
    if not inside and not before:
        if span.after is None:
            return f"watched history: none of this host; {unknown}: {keep}"
        return (f"watched history: no record covers this window (the first is "
                f"{moment(span.after.captured_at)}); {unknown}: {keep}")
    said = f"watched history: {plural(len(inside), 'record')} in the window"
    if before:
        return f"{said} and the one before it ({moment(before.captured_at)})"
    return (f"{said}, none before it: what changed before {moment(inside[0].captured_at)} is "
            "not known from it")
