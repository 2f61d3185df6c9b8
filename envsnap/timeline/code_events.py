"""The agent's evidence about code and its start-up -> events: checkouts, Python packages,
customize and config files, worker processes and their systemd units (agent/timeline.py reads
them on the host).

A rebase writes one reflog line per step (start, each pick, finish); a timeline shows it as
one move, from where HEAD stood before the start to where the finish left it, with the
commits the start brought in. A stash push shows as its stash-reflog line (git's own
"reset: moving to HEAD" beside it is the same act); a pop or drop leaves no line anywhere,
only the stash reflog's rewritten file. A stash a stored snapshot recorded and the file no
longer lists was popped or dropped, by the file's time; without a record, a file written
after its newest line may as well be a push that took over a second (git stamps the line
early): it is said as that, never as a pop.
"""
from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from envsnap.diff.hotpaths import HotPattern, hot_files, hot_patterns, touches
from envsnap.text import plural
from envsnap.timeline.model import FILE_TIME, RECORDED, Event, RecordedStashes
from envsnap.timeline.roles import package_role

if TYPE_CHECKING:
    from envsnap.timeline.evidence import (
        FileRecord,
        MovedCommits,
        ProcessRecord,
        PythonSource,
        ReflogRecord,
        UnitRecord,
    )

# "rebase (pick): ...", "rebase -i (finish): ...", "pull --rebase origin main (start): ..."
REBASE_STEP = re.compile(r"^(?:pull\b[^(]*--rebase[^(]*|rebase[^(]*) \((start|pick|continue|"
                         r"squash|fixup|reword|edit|finish)\)")
MOVE_NAMES = (("pull", "pull"), ("merge", "merge"), ("checkout", "checkout"),
              ("reset", "reset"), ("commit", "commit"), ("cherry-pick", "cherry-pick"),
              ("revert", "revert"), ("clone", "clone"), ("rebase", "rebase"))
ZERO_SHA = ("0" * 40, "0" * 64)
SHOWN_COMMITS = 10
UNSHOWN_ENV = ("PATH",)   # long, and rarely what moved a benchmark; --json keeps nothing less


def short(sha: str) -> str:
    return sha[:10]


def move_name(message: str) -> str:
    if not message:
        return "HEAD set (a new checkout or worktree)"
    if REBASE_STEP.match(message):
        return "pull --rebase" if message.startswith("pull") else "rebase"
    for prefix, name in MOVE_NAMES:
        if message.startswith(prefix):
            return name
    return message.split(":", 1)[0] or "move"


def commit_lines(commits: MovedCommits, patterns: tuple[HotPattern, ...]
                 ) -> tuple[tuple[str, ...], bool]:
    """(a line a commit brought in, with its hottest file as the diff weighs it; whether
    any of them is hot)."""
    added = commits.get("added") or []
    hot = [hot_files(c.get("files") or [], patterns) for c in added]
    lines = [f"{short(c['sha'])} {c['subject']}" + (f"  ({touches(found[0])})" if found else "")
             for c, found in zip(added[:SHOWN_COMMITS], hot)]
    total = int(commits.get("added_total") or len(added))
    if total > SHOWN_COMMITS:
        lines.append(f"... {total - SHOWN_COMMITS} more")
    if commits.get("removed"):
        lines.append(f"{plural(commits['removed'], 'commit')} left behind (no longer in HEAD's "
                     "history)")
    return tuple(lines), any(hot)


StashesBefore = Callable[[str, float], "RecordedStashes | None"]


def no_record(repo: str, time: float) -> RecordedStashes | None:
    return None


def git_events(records: list[ReflogRecord], hot_paths: list[str],
               stashes_before: StashesBefore = no_record) -> list[Event]:
    """Reflog entries (newest first per checkout, as read) -> one event per move; the
    commits a move brought in weighed as the diff weighs them (its default hot paths and
    the configured ones). `stashes_before(repo, time)`: the stash list a stored snapshot
    recorded of the checkout before that time, if one did."""
    patterns = hot_patterns(hot_paths)
    events = []
    rebase_start: dict[str, ReflogRecord] = {}
    stashed = {(entry["repo"], entry["time"]) for entry in records
               if entry.get("ref") == "stash" and not entry.get("state")}
    for entry in reversed(records):   # oldest first, so a rebase's start comes before its end
        repo = entry["repo"]
        if entry.get("state"):
            events.extend(stash_state_events(entry, stashes_before(repo, entry["time"])))
            continue
        if entry.get("ref") == "stash":
            events.append(stash_event(entry))
            continue
        if is_stash_reset(entry, stashed):
            continue
        step = REBASE_STEP.match(entry["message"])
        if step and step.group(1) == "start":
            rebase_start[repo] = entry
        if step and step.group(1) != "finish":
            continue
        start = rebase_start.pop(repo, None) if step else None
        events.append(move_event(entry, start, patterns))
    return events


def is_stash_reset(entry: ReflogRecord, stashed: set[tuple[str, float]]) -> bool:
    """`git stash push` resets the worktree, which HEAD's reflog writes as "reset: moving to
    HEAD" in the same second: the stash's own line says it better."""
    return (entry["message"] == "reset: moving to HEAD" and entry["old"] == entry["new"]
            and any((entry["repo"], entry["time"] + delta) in stashed for delta in (-1, 0, 1)))


def move_event(entry: ReflogRecord, start: ReflogRecord | None,
               patterns: tuple[HotPattern, ...]) -> Event:
    repo, message = entry["repo"], entry["message"]
    old = (start or entry)["old"]
    commits: MovedCommits = (start or entry).get("commits") or {}
    total = int(commits.get("added_total") or len(commits.get("added") or []))
    name = move_name(message)
    if message == "reset: moving to HEAD" and old == entry["new"]:
        name = ("reset to HEAD (as `git stash push` does; no stash of that time remains: "
                "popped or dropped since)")
    brought = f", {plural(total, 'commit')} brought in" if total else ""
    lines, hot = commit_lines(commits, patterns)
    return Event(
        time=float(entry["time"]), kind="checkout", subject=repo,
        what=f"{name} in {repo}: {short(old)} -> {short(entry['new'])}{brought}",
        evidence=f"reflog {entry.get('selector', 'HEAD')}: {message}",
        exactness=RECORDED, details=lines,
        test="HEAD did not move: nothing to test" if old == entry["new"] else
        "a new checkout: nothing before it to test" if old in ZERO_SHA else None,
        role="hot path" if hot else None,
        # The second before the move began (a rebase's start): the reflog's state then is
        # where HEAD stood before it.
        undo_at=float((start or entry)["time"]) - 1)


def stash_event(entry: ReflogRecord) -> Event:
    repo = entry["repo"]
    return Event(time=float(entry["time"]), kind="stash", subject=repo,
                 what=f"stash pushed in {repo}: {entry['message']}",
                 evidence=f"stash reflog: {entry['message']}", exactness=RECORDED,
                 test=f"git -C {shlex.quote(repo)} stash list; `git stash apply` puts it back")


def stash_state_events(entry: ReflogRecord, recorded: RecordedStashes | None) -> list[Event]:
    """The stash reflog file's state against the stash list a snapshot recorded before it:
    each stash recorded then and gone now was popped or dropped, between the two times;
    without a record, a file written after its newest line cannot tell a pop from a slow
    push, and says so."""
    repo, when, left = entry["repo"], float(entry["time"]), int(entry.get("left") or 0)
    now = set(entry.get("shas") or [])
    gone = [] if recorded is None else [
        Event(time=when, kind="stash", subject=repo,
              what=f"stash popped or dropped in {repo}: {message} ({left} left)",
              evidence=f"snapshot {recorded.label} recorded stash {sha[:10]}, which "
                       + (f"no stash reflog lists now ({entry['file']} is gone); its folder's "
                          "mtime" if entry.get("deleted") else
                          f"{entry['file']} no longer lists; its mtime")
                       + " (git records no line for a pop or drop)",
              exactness=FILE_TIME,
              details=(f"between snapshot {recorded.label} ({moment_iso(recorded.time)}) "
                       "and this rewrite",),
              test=f"the stash commit may still be reachable: `git -C {shlex.quote(repo)} "
                   f"stash apply {sha}` until git gc prunes it")
        for sha, message in recorded.entries if sha not in now]
    if gone:
        return gone
    if not entry.get("rewritten"):
        return []
    remain = () if recorded is None else (
        f"every stash snapshot {recorded.label} recorded is still listed: a slow push, or a "
        "pop or drop of one pushed since",)
    return [Event(time=when, kind="stash", subject=repo, details=remain,
                  what=f"the stash reflog of {repo} was rewritten at {moment_iso(when)}: a pop "
                       f"or drop, or a push that took over a second: cannot tell ({left} left)",
                  evidence=f"{entry['file']}: mtime after its newest line (git records no line "
                           "for a pop or drop, and stamps a push's line as it begins)",
                  exactness=FILE_TIME,
                  test=None if recorded else "no snapshot recorded the stash list before it: "
                       "a capture with this --repo keeps one, so the next rewrite can be told")]


def moment_iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def python_events(source: PythonSource) -> list[Event]:
    interpreter = source.get("interpreter") or "the interpreter"
    events = []
    for record in source.get("records") or []:
        name, version = record["name"], record["version"]
        where = record.get("interpreter") or interpreter
        by = f" by {record['installer']}" if record.get("installer") else ""
        what_file = "RECORD" if record.get("has_record") else "folder"
        events.append(Event(
            time=float(record["time"]), kind="python-package", subject=name,
            what=f"python package {name} {version} installed{by} ({where})",
            evidence=f"{record['folder']}: {what_file} mtime", exactness=FILE_TIME,
            role=package_role(name)))
    for conda in source.get("conda") or []:
        command, changes = conda_block(conda["block"])
        added = sum(line.startswith("+") for line in changes)
        events.append(Event(time=float(conda["time"]), kind="conda", subject=conda["file"],
                            what=f"conda: {command}: +{added} -{len(changes) - added}",
                            evidence=f"{conda['file']}: # cmd: {command}",
                            exactness=RECORDED, details=tuple(changes[:SHOWN_COMMITS * 2])))
    return events


def conda_block(block: str) -> tuple[str, list[str]]:
    """A conda-meta/history block: its `# cmd:` and its +package/-package lines (a first
    block lists what the prefix held, without signs: not a change of this moment)."""
    command = next((line[len("# cmd: "):] for line in block.splitlines()
                    if line.startswith("# cmd: ")), "(no command recorded)")
    return command, [line for line in block.splitlines() if line[:1] in "+-"]


def file_events(records: list[FileRecord]) -> list[Event]:
    return [Event(time=float(record["time"]), kind="file", subject=record["path"],
                  what=f"{record['path']} written ({record['size']} bytes)",
                  evidence=f"{record['path']}: mtime, sha256 {str(record['sha256'])[:12]}",
                  exactness=FILE_TIME, digest=record.get("sha256"),
                  test=f"older copy: envsnap backup {record['backups'][-1]}"
                  if record.get("backups") else None)
            for record in records]


def unit_events(records: list[UnitRecord]) -> list[Event]:
    """A worker's systemd unit file or drop-in written: a restart of the unit runs it."""
    return [Event(time=float(record["time"]), kind="file", subject=record["path"],
                  what=f"{record['path']} written ({record['size']} bytes): systemd unit "
                       f"{record['unit']} of process {record['pid']}",
                  evidence=f"/proc/{record['pid']}/cgroup names {record['unit']}; "
                           f"{record['path']}: mtime, sha256 {str(record['sha256'])[:12]}",
                  exactness=FILE_TIME, digest=record.get("sha256"), role="worker's unit")
            for record in records]


def process_events(records: list[ProcessRecord]) -> list[Event]:
    events = []
    for record in records:
        env = record.get("env") or {}
        shown_env = ((f"env unreadable: {env['error']}",) if "error" in env else
                     tuple(f"{k}={v}" for k, v in sorted(env.items()) if k not in UNSHOWN_ENV))
        argv = " ".join(record.get("cmdline") or [])
        events.append(Event(
            time=float(record["time"]), kind="process-start", subject=str(record["pid"]),
            what=f"process {record['pid']} started: {argv[:160]}",
            evidence=f"/proc/{record['pid']}/stat start time + boot time", exactness=RECORDED,
            details=("its env now: " + ", ".join(shown_env),) if shown_env else (),
            argv=tuple(record.get("cmdline") or ()),
            env=tuple((k, str(v)) for k, v in sorted(env.items()) if k != "error")))
    return events
