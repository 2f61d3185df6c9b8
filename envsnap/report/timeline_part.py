"""`report --timeline WINDOW`: the timeline of the snapshot's host as a section of the report.

The same events `envsnap timeline` shows, read from the host by the CLI
(timeline/of_snapshot.py) and handed over as a Timeline: here they are only laid out, as rows
of plain strings, so that the report's masking and its markdown and html writers treat them
like every other fact. Nothing here reaches a host (tests/test_layers.py holds it).
"""
from __future__ import annotations

from dataclasses import dataclass

from envsnap.text import plural
from envsnap.timeline.model import EXACTNESS_SAID, Event, Timeline
from envsnap.timeline.render import mark_of, moment


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
