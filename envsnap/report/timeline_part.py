"""`report --timeline WINDOW`: the timeline of the snapshot's host as a section of the report.

The same events `envsnap timeline` shows (timeline/run.py, read from the host now, with the
snapshot's checkouts, workers and hot paths), laid out as rows of plain strings, so that the
report's masking and its markdown and html writers treat them like every other fact. Only
the user's own snapshot is followed to its host: a foreign one would pick the host to reach,
the checkouts and workers to read and the interpreter to run (refused, exit 2, with the way
on: `envsnap trust`, or `envsnap timeline HOST` where the user names the host).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from envsnap.errors import UsageError
from envsnap.hosts.inventory import Inventory, resolve_hosts
from envsnap.hosts.inventory_graph import Vars
from envsnap.snapshot import document as snap
from envsnap.snapshot import provenance
from envsnap.snapshot.records import Snapshot
from envsnap.snapshot.store import Store
from envsnap.text import plural
from envsnap.timeline.model import EXACTNESS_SAID, Event, Timeline
from envsnap.timeline.render import mark_of, moment

if TYPE_CHECKING:
    from envsnap.timeline.run import TimelineOptions


@dataclass(frozen=True)
class TimelineRow:
    at: str                  # UTC, to the second
    what: str                # with LAST GOOD / FIRST BAD where it is one
    evidence: str            # and how exact its time is
    details: tuple[str, ...]
    test: str


@dataclass(frozen=True)
class TimelineSection:
    heading: str
    between: str | None      # the line over the changes between last good and first bad
    between_rows: list[TimelineRow]
    rows: list[TimelineRow]
    unreadable: list[str]


def host_timeline(document: Snapshot, since: str, store: Store, inventory: Inventory,
                  options: TimelineOptions) -> Timeline:
    """The timeline of the host the snapshot was captured on, of its recorded checkouts,
    workers and hot paths."""
    from envsnap.timeline.run import timeline  # on use: it loads the transports

    verdict = provenance.verify_as_user(document)
    if not verdict.mine:      # its host, checkouts and workers would be a stranger's choice
        raise UsageError(f"--timeline reads the host a snapshot names, and "
                         f"{snap.label(document)!r} is {verdict.describe()}: `envsnap trust "
                         f"{snap.label(document)}` first, or run `envsnap timeline HOST`")
    config = snap.capture_config(document)
    wanted: Vars = {"repos": config.get("repos"), "procs": config.get("procs"),
                    "hot_paths": config.get("hot_paths"), "python": config.get("python")}
    hosts = resolve_hosts([snap.host(document, "local")], inventory, wanted)
    if len(hosts) != 1:
        raise UsageError(f"--timeline: the snapshot's host names {len(hosts)} hosts")
    return timeline(hosts[0], replace(options, since=since), store)


def row_of(found: Timeline, event: Event) -> TimelineRow:
    return TimelineRow(moment(event.time), mark_of(found, event) + event.what
                       + (f" [{event.role}]" if event.role else ""),
                       f"{event.evidence} ({EXACTNESS_SAID[event.exactness]})",
                       event.details, event.test or "")


def section_of(found: Timeline) -> TimelineSection:
    """What timeline.render_text says, as rows (pure)."""
    window = found.window
    until = moment(window.until) if window.until_text else "now"
    heading = (f"{found.host}: {moment(window.since)} -> {until} UTC (since "
               f"{window.since_text}), {plural(len(found.events), 'event')}")
    between = None
    if found.last_good and found.first_bad:
        between = (f"Between the last good and the first bad benchmark "
                   f"({found.last_good.what} -> {found.first_bad.what}): "
                   f"{plural(len(found.between), 'change')}")
    return TimelineSection(heading, between, [row_of(found, e) for e in found.between],
                           [row_of(found, e) for e in found.events], list(found.unreadable))
