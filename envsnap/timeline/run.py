"""`envsnap timeline`: what changed on a host, and when, from the evidence already on it.

One exec of the agent in its timeline mode (agent/timeline.py), over SSH like a capture or on
`local`; its records become events (code_events, system_events), the store's snapshots and
bench records of the host join them (history), all in time order, oldest first. A source
the host could not read is said (`unreadable`), never taken for "nothing changed".
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from envsnap.defaults import DEFAULT_COLLECTOR_TIMEOUT, DEFAULT_CONNECT_TIMEOUT
from envsnap.errors import UsageError
from envsnap.history.store import History, Span
from envsnap.hosts.capture import run_agent
from envsnap.hosts.connect import open_transport
from envsnap.hosts.inventory import Host
from envsnap.hosts.payload import TimelineConfig
from envsnap.snapshot import document as snap
from envsnap.snapshot.store import Store
from envsnap.text import plural
from envsnap.timeline import code_events, history, system_events, watched
from envsnap.timeline.model import (
    Event,
    LookedAt,
    RecordedStashes,
    RecordedVersion,
    Timeline,
    Window,
)
from envsnap.timeline.window import DEFAULT_SINCE, parse_moment

if TYPE_CHECKING:   # types only: records.py costs milliseconds to import
    from envsnap.history.store import Manifest
    from envsnap.snapshot.records import Snapshot
    from envsnap.timeline.evidence import Evidence, Source, Sources


@dataclass(frozen=True)
class TimelineOptions:
    since: str = DEFAULT_SINCE
    until: str | None = None
    root: str | None = None          # where / is for the host's logs (recorded ones in tests)
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    collector_timeout: float = DEFAULT_COLLECTOR_TIMEOUT
    accept_new_host_keys: bool = False


def window_of(options: TimelineOptions, store: Store, now: float) -> Window:
    def label_time(label: str) -> str | None:
        return snap.captured_at(store.load(label))

    since = parse_moment(options.since, now, label_time)
    until = parse_moment(options.until, now, label_time) if options.until else now + 60
    if since > until:
        raise UsageError(f"--since {options.since} is after --until {options.until}")
    return Window(since, until, options.since, options.until)


def host_documents(store: Store, host: Host) -> list[tuple[str, Snapshot]]:
    """This host's snapshots in the store (as reached: the same name)."""
    found = []
    for entry in store.entries():
        if entry.host == host.name:
            found.append((entry.label, store.load(str(entry.path))))
    return found


def names_nothing(host: Host) -> bool:
    """No checkout, worker or interpreter named, on the command line or in the inventory:
    the timeline then looks for them itself (agent/discover.py)."""
    return not (host.list_var("repos") or host.list_var("procs") or host.vars.get("python")
                or host.vars.get("ansible_python_interpreter"))


def timeline(host: Host, options: TimelineOptions, store: Store) -> Timeline:
    window = window_of(options, store, time.time())
    stored = history.stored_of(host_documents(store, host))
    span = History.of_store(store).span(host.name, window.since, window.until)
    records = watched_records(History.of_store(store), span)
    discover = names_nothing(host)
    known = stored + records[-1:]   # the newest record says what the watch looked at
    repos = history.recorded_repos(known) if discover else host.list_var("repos")
    procs = history.recorded_setting(known, "procs") if discover else host.list_var("procs")
    if host.is_local:
        repos = [os.path.abspath(os.path.expanduser(repo)) for repo in repos]
    config: TimelineConfig = {"mode": "timeline", "repos": repos, "procs": procs,
                              "since": window.since, "until": window.until,
                              "timeout": options.collector_timeout}
    if discover:
        config["discover"] = True
        config["pythons"] = history.recorded_setting(known, "python")
        if host.is_local:   # run inside a checkout: that one too
            config["here"] = os.getcwd()
    if options.root:
        config["root"] = os.path.abspath(options.root) if host.is_local else options.root
    with open_transport(host, options.connect_timeout, options.accept_new_host_keys) as transport:
        output = run_agent(transport, host, config, options.collector_timeout + 30)
    found: Evidence = output.get("timeline") or {}   # the agent's JSON, typed where it enters
    where = "found from running python processes, the store's snapshots of this host" + \
        (" and the current folder" if host.is_local else "") if discover else ""
    return build(host.name, window, found, host.list_var("hot_paths"), stored,
                 looked_at(found, repos, where), records,
                 watched.coverage(span, window, host.name, procs, repos))


def watched_records(source: History, span: Span) -> list[history.Stored]:
    """The watched records a timeline reads: of those inside its window and the last one
    before it (what held before its first change), the first and the last of each run whose
    facts are the same parts (a change lies between two runs; a record amid a run of the
    same facts adds nothing to read). Only these are loaded."""
    read = ([span.before] if span.before else []) + span.inside
    chosen = ends_of_runs(read, [facts_of(source, manifest) for manifest in read])
    return [history.Stored(manifest.id, manifest.captured_at, source.load(manifest),
                           manifest.reason, watched=True) for manifest in chosen]


def facts_of(source: History, manifest: Manifest) -> tuple[tuple[tuple[str, ...], str], ...]:
    """A record's facts as its manifest names them: (place, digest) of each part of them."""
    return tuple(part for part in source.contents(manifest).parts if part[0][:1] == ("facts",))


def ends_of_runs(manifests: list[Manifest], keys: list[object]) -> list[Manifest]:
    """The first and the last manifest of each run of equal keys, in order."""
    return [manifest for index, manifest in enumerate(manifests)
            if index in (0, len(manifests) - 1) or keys[index] != keys[index - 1]
            or keys[index] != keys[index + 1]]


def looked_at(found: Evidence, named_repos: list[str], discovered_from: str) -> LookedAt:
    """What the agent read, by its own account: with nothing named, what it found and what
    it could not read or left over its bounds (agent/discover.py); else the named ones."""
    sources: Sources = found.get("sources") or {}
    workers = len((sources.get("procs") or {}).get("records") or [])
    seen = found.get("looked_at")
    if seen is None or not discovered_from:
        return LookedAt(len(named_repos), 1, workers, "as named", repos=tuple(named_repos))
    missed = []
    if seen.get("unreadable"):
        missed.append(f"{plural(int(seen['unreadable']), 'process', 'es')} of other users "
                      "(not readable)")
    if seen.get("foreign_repos"):
        missed.append(f"{plural(int(seen.get('foreign_repos') or 0), 'checkout')} of other "
                      "users (their git config is theirs)")
    for left, what, suffix in ((seen.get("repos_left"), "checkout", "s"),
                               (seen.get("pythons_left"), "python", "s"),
                               (seen.get("pids_left"), "python process", "es")):
        if left:
            missed.append(f"{plural(int(left), what, suffix)} over the bound")
    return LookedAt(len(seen.get("repos") or []), 1 + len(seen.get("pythons") or []),
                    workers, discovered_from, tuple(missed), tuple(seen.get("repos") or []),
                    tuple(seen.get("pythons") or []))


def build(host: str, window: Window, found: Evidence, hot_paths: list[str],
          stored: list[history.Stored], seen: LookedAt | None = None,
          records: list[history.Stored] | None = None, coverage: str | None = None
          ) -> Timeline:
    """The agent's timeline evidence, the store's snapshots and the watched history's
    `records` (oldest first) -> the timeline (pure). A package's version before, a removal
    and a file's older copy are read from snapshots and records alike; benchmarks, bisects
    and restores from snapshots alone (a record's id is no label)."""
    sources: Sources = found.get("sources") or {}
    records = records or []
    recorded = sorted(stored + records, key=lambda item: item.time)
    python = sources.get("python") or {}
    events = source_events(sources, window, hot_paths, stored, recorded)
    events += history.store_events(stored, window.since, window.until)
    events += history.removed_events(recorded, python.get("held") or {},
                                     float(found.get("now") or window.until), window.since,
                                     window.until)
    events = history.with_tests(sorted(events, key=lambda event: event.time), stored, host,
                                recorded)
    if records:
        events = watched.merged(watched.watched_changes(records, python.get("records") or []),
                                events, window.since, window.until)
    last_good, first_bad = history.good_and_bad(events, stored)
    unreadable = [f"{name}: {source['error']}"
                  for name, source in cast("dict[str, Source]", sources).items()
                  if source.get("error")]
    return Timeline(host, window, events, unreadable, last_good, first_bad,
                    seen, coverage)


def source_events(sources: Sources, window: Window, hot_paths: list[str],
                  stored: list[history.Stored] | None = None,
                  recorded: list[history.Stored] | None = None) -> list[Event]:
    """The host's evidence as events; `recorded` (snapshots and watched records, else
    `stored`) tells a package's version before a change."""
    def within(time: float) -> bool:
        return window.since <= time <= window.until

    def stashes_before(repo: str, time: float) -> RecordedStashes | None:
        return history.stashes_before(stored or [], repo, time)

    sites = history.site_dirs_of(stored or [] if recorded is None else recorded)

    def version_before(name: str, site_dir: str, time: float, version: str
                       ) -> RecordedVersion | None:
        return history.version_before(sites, name, site_dir, time, version)

    apt = (sources.get("apt") or {}).get("records") or []
    events = code_events.git_events((sources.get("git") or {}).get("records") or [], hot_paths,
                                    stashes_before)
    python = sources.get("python") or {}
    by_apt, pips = system_events.apt_written(python.get("records") or [], apt)
    events += code_events.python_events({**python, "records": pips}, version_before)
    events += code_events.file_events([record for record in
                                       (sources.get("files") or {}).get("records") or []
                                       if within(record["time"])])
    events += code_events.unit_events([record for record in
                                       (sources.get("units") or {}).get("records") or []
                                       if within(record["time"])])
    events += code_events.process_events([record for record in
                                          (sources.get("procs") or {}).get("records") or []
                                          if within(record["time"])])
    _, dpkg_alone = system_events.inside_apt((sources.get("dpkg") or {}).get("records") or [],
                                             apt)
    events += system_events.dpkg_events(dpkg_alone)
    events += system_events.apt_events(apt, by_apt)
    events += system_events.rpm_events((sources.get("rpm") or {}).get("records") or [])
    events += system_events.host_events(sources.get("host") or {},
                                        (sources.get("kernel") or {}).get("records") or [],
                                        window.since, window.until)
    return events
