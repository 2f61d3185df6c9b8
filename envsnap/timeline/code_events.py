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

import posixpath
import re
import shlex
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from envsnap.diff.hotpaths import HotPattern, hot_files, hot_patterns, touches
from envsnap.text import clipped, plural
from envsnap.timeline.model import (
    FILE_TIME,
    RECORDED,
    Event,
    RecordedStashes,
    RecordedVersion,
)
from envsnap.timeline.roles import ROLES, package_role

if TYPE_CHECKING:
    from envsnap.timeline.evidence import (
        DistRecord,
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
        undo_at=float((start or entry)["time"]) - 1, moved=(old, entry["new"]))


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


PIP_RUN_GAP = 30.0   # seconds: one install run writes each package's RECORD as it finishes it,
                     # the next one this long after at most (a large wheel's unpacking)
NAMED_IN_RUN = 3     # packages named on a run's line, the hot ones first
VersionBefore = Callable[[str, str, float, str], "RecordedVersion | None"]


def no_version(name: str, site_dir: str, time: float, version: str) -> RecordedVersion | None:
    return None


def normalised(name: str) -> str:
    """PEP 503, as a snapshot keys its packages: 'Foo.Bar_baz' -> 'foo-bar-baz'."""
    return re.sub(r"[-_.]+", "-", name).lower()


def install_runs(records: list[DistRecord], interpreter: str) -> list[list[DistRecord]]:
    """The records of one install run together: the same interpreter and installer, each
    RECORD written within PIP_RUN_GAP of the run's one before it; oldest first."""
    runs: list[list[DistRecord]] = []
    open_runs: dict[tuple[str, str], list[DistRecord]] = {}
    for record in sorted(records, key=lambda found: found["time"]):
        key = (record.get("interpreter") or interpreter, record.get("installer") or "")
        run = open_runs.get(key)
        if run is not None and record["time"] - run[-1]["time"] <= PIP_RUN_GAP:
            run.append(record)
            continue
        open_runs[key] = [record]
        runs.append(open_runs[key])
    return runs


def python_events(source: PythonSource, version_before: VersionBefore = no_version
                  ) -> list[Event]:
    """One event per install run (install_runs): a run of one package says it as it is,
    "installed", "upgraded from X" where a snapshot before it recorded X; a run of more
    folds its packages into its details. `version_before(name, site_dir, time, version)`: the
    newest snapshot before `time` that recorded that interpreter, and its version of `name`
    (`version` the one installed then)."""
    interpreter = source.get("interpreter") or "the interpreter"
    events = []
    for run in install_runs(source.get("records") or [], interpreter):
        priors = [version_before(normalised(record["name"]), posixpath.dirname(record["folder"]),
                                 float(record["time"]), record["version"]) for record in run]
        events.append(package_event(run[0], priors[0], interpreter) if len(run) == 1 else
                      run_event(run, priors, interpreter))
    for conda in source.get("conda") or []:
        command, changes = conda_block(conda["block"])
        added = sum(line.startswith("+") for line in changes)
        events.append(Event(time=float(conda["time"]), kind="conda", subject=conda["file"],
                            what=f"conda: {command}: +{added} -{len(changes) - added}",
                            evidence=f"{conda['file']}: # cmd: {command}",
                            exactness=RECORDED, details=tuple(changes[:SHOWN_COMMITS * 2])))
    return events


def package_change(version: str, prior: RecordedVersion | None) -> str:
    """How a package came to `version`, by the snapshot before it."""
    if prior is None or prior.version is None:
        return "installed"
    if prior.version == version:
        return f"reinstalled ({prior.named} recorded {version} too)"
    old, new = release(prior.version), release(version)
    moved = "changed" if old == new or not found_release(prior.version, version) else \
        "upgraded" if new > old else "downgraded"
    return f"{moved} from {prior.version}"


def found_release(*versions: str) -> bool:
    return all(re.match(r"\d", version) for version in versions)


def release(version: str) -> tuple[int, ...]:
    """A version's leading release numbers (PEP 440's N.N.N), enough to tell up from down."""
    found = re.match(r"\d+(?:\.\d+)*", version)
    parts = [int(part) for part in found.group(0).split(".")] if found else []
    while parts and parts[-1] == 0:   # 1.0 and 1.0.0 are one release
        parts.pop()
    return tuple(parts)


def package_undo(name: str, version: str, prior: RecordedVersion | None) -> str:
    if prior is None:
        return ("no snapshot recorded this interpreter before it: whether it replaced another "
                "version is not known")
    if prior.version is None:
        return (f"a fresh install ({prior.named} recorded the interpreter without "
                f"it): pip uninstall -y {shlex.quote(name)}")
    if prior.version == version:
        return f"the same version as {prior.named} recorded: nothing to undo"
    return f"pip install {pin(name, prior.version)} (as {prior.named} recorded{prior.restore})"


def pin(name: str, version: str) -> str:
    text = f"{name}=={version}"
    return f"'{text}'" if re.fullmatch(r"[\w.+!=-]+", text) else shlex.quote(text)


def package_event(record: DistRecord, prior: RecordedVersion | None, interpreter: str) -> Event:
    name, version = record["name"], record["version"]
    where = record.get("interpreter") or interpreter
    by = f" by {record['installer']}" if record.get("installer") else ""
    what_file = "RECORD" if record.get("has_record") else "folder"
    return Event(time=float(record["time"]), kind="python-package", subject=name,
                 what=f"python package {name} {version} {package_change(version, prior)}{by} "
                      f"({where})",
                 evidence=f"{record['folder']}: {what_file} mtime", exactness=FILE_TIME,
                 role=package_role(normalised(name)), test=package_undo(name, version, prior))


def run_event(run: list[DistRecord], priors: list[RecordedVersion | None],
              interpreter: str) -> Event:
    """A run of several packages as one event: its line names the hot ones first, its
    details list each with how it changed."""
    installer = run[0].get("installer")
    where = run[0].get("interpreter") or interpreter
    roles = [package_role(normalised(record["name"])) for record in run]
    named = sorted(range(len(run)), key=lambda index: roles[index] is None)
    shown = ", ".join(f"{normalised(run[index]['name'])} {run[index]['version']}"
                      for index in named[:NAMED_IN_RUN])
    more = ", ..." if len(run) > NAMED_IN_RUN else ""
    lines = tuple(f"{normalised(record['name'])} {record['version']} "
                  f"{package_change(record['version'], prior)}" + (f" [{role}]" if role else "")
                  for record, prior, role in zip(run, priors, roles))
    found_roles = [role for role, _ in ROLES if role in roles]
    return Event(
        time=float(run[-1]["time"]), kind="python-package",
        subject=posixpath.dirname(run[0]["folder"]),
        what=f"{installer or 'python packages'} install: {len(run)} packages ({shown}{more}) "
             f"({where})",
        evidence=f"{len(run)} .dist-info RECORD mtimes in {posixpath.dirname(run[0]['folder'])}"
                 f", {moment_iso(run[0]['time'])} to {moment_iso(run[-1]['time'])}, each "
                 f"within {PIP_RUN_GAP:g} s of the one before"
                 + (f", INSTALLER {installer}" if installer else ""),
        exactness=FILE_TIME, details=lines, folded=len(run),
        role=", ".join(found_roles) or None, test=run_undo(run, priors))


def run_undo(run: list[DistRecord], priors: list[RecordedVersion | None]) -> str:
    if any(prior is None for prior in priors):
        return ("no snapshot recorded this interpreter before it: whether it replaced other "
                "versions is not known")
    known = [(normalised(record["name"]), prior) for record, prior in zip(run, priors)
             if prior is not None]
    pins = [pin(name, prior.version) for name, prior in known
            if prior.version is not None and prior.version != version_of(run, name)]
    fresh = [shlex.quote(name) for name, prior in known if prior.version is None]
    named = ", ".join(sorted({prior.named for _, prior in known}))
    snapshots = sorted(prior.label for _, prior in known if not prior.watched)
    restore = f"; envsnap restore {snapshots[-1]} --pip" if snapshots else ""
    steps = ([f"pip install {' '.join(pins)}"] if pins else []) + \
        ([f"pip uninstall -y {' '.join(fresh)}"] if fresh else [])
    if not steps:
        return f"the same versions as {named} recorded: nothing to undo"
    return "; ".join(steps) + f" (as {named} recorded{restore})"


def version_of(run: list[DistRecord], name: str) -> str:
    return next(record["version"] for record in run if normalised(record["name"]) == name)


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
                     tuple(f"{k}={clipped(str(v))}" for k, v in sorted(env.items())
                           if k not in UNSHOWN_ENV))
        argv = " ".join(record.get("cmdline") or [])
        events.append(Event(
            time=float(record["time"]), kind="process-start", subject=str(record["pid"]),
            what=f"process {record['pid']} started: {argv[:160]}",
            evidence=f"/proc/{record['pid']}/stat start time + boot time", exactness=RECORDED,
            details=("its env now: " + ", ".join(shown_env),) if shown_env else (),
            argv=tuple(record.get("cmdline") or ()),
            env=tuple((k, str(v)) for k, v in sorted(env.items()) if k != "error")))
    return events
