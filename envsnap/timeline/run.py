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
from envsnap.hosts.capture import run_agent
from envsnap.hosts.connect import open_transport
from envsnap.hosts.inventory import Host
from envsnap.hosts.payload import TimelineConfig
from envsnap.snapshot import document as snap
from envsnap.snapshot.store import Store
from envsnap.timeline import code_events, history, system_events
from envsnap.timeline.model import Event, Timeline, Window
from envsnap.timeline.window import DEFAULT_SINCE, parse_moment

if TYPE_CHECKING:   # types only: records.py costs milliseconds to import
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


def timeline(host: Host, options: TimelineOptions, store: Store) -> Timeline:
    window = window_of(options, store, time.time())
    repos = host.list_var("repos")
    if host.is_local:
        repos = [os.path.abspath(os.path.expanduser(repo)) for repo in repos]
    config: TimelineConfig = {"mode": "timeline", "repos": repos, "procs": host.list_var("procs"),
                              "since": window.since, "until": window.until,
                              "timeout": options.collector_timeout}
    if options.root:
        config["root"] = os.path.abspath(options.root) if host.is_local else options.root
    with open_transport(host, options.connect_timeout, options.accept_new_host_keys) as transport:
        output = run_agent(transport, host, config, options.collector_timeout + 30)
    stored = history.stored_of(host_documents(store, host))
    found: Evidence = output.get("timeline") or {}   # the agent's JSON, typed where it enters
    return build(host.name, window, found, host.list_var("hot_paths"), stored)


def build(host: str, window: Window, found: Evidence, hot_paths: list[str],
          stored: list[history.Stored]) -> Timeline:
    """The agent's timeline evidence and the store's records -> the timeline (pure)."""
    sources: Sources = found.get("sources") or {}
    events = source_events(sources, window, hot_paths)
    events += history.store_events(stored, window.since, window.until)
    events = history.with_tests(sorted(events, key=lambda event: event.time), stored, host)
    last_good, first_bad = history.good_and_bad(events, stored)
    unreadable = [f"{name}: {source['error']}"
                  for name, source in cast("dict[str, Source]", sources).items()
                  if source.get("error")]
    return Timeline(host, window, events, unreadable, last_good, first_bad)


def source_events(sources: Sources, window: Window, hot_paths: list[str]) -> list[Event]:
    def within(time: float) -> bool:
        return window.since <= time <= window.until

    apt = (sources.get("apt") or {}).get("records") or []
    events = code_events.git_events((sources.get("git") or {}).get("records") or [], hot_paths)
    events += code_events.python_events(sources.get("python") or {})
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
    events += system_events.apt_events(apt)
    events += system_events.rpm_events((sources.get("rpm") or {}).get("records") or [])
    events += system_events.kernel_events((sources.get("kernel") or {}).get("records") or [])
    events += system_events.host_events(sources.get("host") or {}, window.since, window.until)
    return events
