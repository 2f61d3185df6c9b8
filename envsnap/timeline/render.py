"""A timeline as text (a person) and JSON (a script). Every string came from a host (a reflog
message, an apt command line, a kernel line), so each is shown with its control characters
made visible: a planted escape sequence cannot repaint the terminal. The text is folded to the
width the CLI gives (envsnap/fold.py): an event's continuation lines stand under its text, past
its time, so the times still make a column.

With a last good and a first bad benchmark, the changes between them come first, under their
own heading; the whole timeline follows, oldest first, the two benchmarks marked in it. The
JSON is versioned like diff's ({"envsnap_timeline": 1, ...}, keys sorted): each event with
its epoch `time` and ISO `at`, and `between`, `last_good`, `first_bad`, `unreadable`,
`looked_at` and `watched` (what the watched history covered, or that none did).
"""
from __future__ import annotations

from dataclasses import asdict
from datetime import datetime, timezone
from typing import TypedDict, cast

from envsnap.fold import DEFAULT_WIDTH, fold, keep
from envsnap.text import dump_json, plural, visible_line
from envsnap.timeline.model import EXACTNESS_SAID, Event, Exactness, Kind, Timeline


class EventJson(TypedDict):
    """An event as `timeline --json` prints it: the Event's fields, its time as ISO too."""

    time: float
    at: str
    kind: Kind
    subject: str
    what: str
    evidence: str
    exactness: Exactness
    details: list[str]
    test: str | None
    role: str | None
    metric: float | None
    digest: str | None
    argv: list[str]
    env: list[list[str]]
    undo_at: float | None
    until: float | None
    folded: int
    moved: list[str]


class LookedAtJson(TypedDict):
    """What the timeline read (`looked_at`), as its header says it."""

    checkouts: int
    pythons: int
    workers: int
    found: str
    not_looked_at: list[str]
    repos: list[str]
    pythons_read: list[str]


class TimelineJson(TypedDict, total=False):
    """`timeline --json` (a saved timeline keeps it without `envsnap_timeline`)."""

    envsnap_timeline: int
    host: str
    since: str
    until: str
    events: list[EventJson]
    last_good: EventJson | None
    first_bad: EventJson | None
    between: list[EventJson]
    unreadable: list[str]
    looked_at: LookedAtJson
    watched: str             # what the watched history covered, or that none did


def moment(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


MOMENT_WIDTH = len("2026-01-01 12:00:00  ")   # where an event's text starts
FOLDED_NOUN = {"boot": "kernel line"}          # what a folded event's details are, by kind


def event_lines(event: Event, mark: str = "", width: int = DEFAULT_WIDTH,
                verbose: bool = False) -> list[str]:
    """An event's lines; a folded one's (a pip run's packages) only with `verbose`, else one
    line that says how many there are."""
    role = f" [{event.role}]" if event.role else ""
    mark = f"{keep(mark.strip())} " if mark else ""
    lines = fold(f"{moment(event.time)}  {mark}{visible_line(event.what)}{role}", width,
                 MOMENT_WIDTH)
    lines += fold(f"    evidence: {visible_line(event.evidence)} "
                  f"({EXACTNESS_SAID[event.exactness]})", width)
    details = event.details if verbose or not event.folded else \
        (f"{plural(event.folded, FOLDED_NOUN.get(event.kind, 'package'))}: -v lists them",)
    lines += [part for detail in details
              for part in fold(f"      {visible_line(detail)}", width)]
    if event.test:
        lines += fold(f"    test/undo: {visible_line(event.test)}", width)
    return lines


def mark_of(timeline: Timeline, event: Event) -> str:
    if event is timeline.last_good:
        return "LAST GOOD "
    if event is timeline.first_bad:
        return "FIRST BAD "
    return ""


def render_text(timeline: Timeline, width: int = DEFAULT_WIDTH, verbose: bool = False) -> str:
    """The timeline for a person, every line within `width` but for an unbreakable token;
    a folded event's changes listed one a line with `verbose`."""
    window = timeline.window
    until = moment(window.until) if window.until_text else "now"
    lines = fold(f"timeline of {visible_line(timeline.host)}: {moment(window.since)} -> {until} "
                 f"UTC (since {visible_line(window.since_text)}), "
                 f"{plural(len(timeline.events), 'event')}", width)
    if timeline.looked_at is not None:
        lines += [part for line in timeline.looked_at.lines() if line
                  for part in fold(visible_line(line), width)]
    if timeline.watched:
        lines += fold(visible_line(timeline.watched), width)
    between = timeline.between
    if timeline.last_good and timeline.first_bad:
        lines += ["", *fold(f"between the last good and the first bad benchmark: "
                            f"{plural(len(between), 'change')}", width)]
        lines += fold(f"  {visible_line(timeline.last_good.what)}  ->  "
                      f"{visible_line(timeline.first_bad.what)}", width)
        for event in between:
            lines += event_lines(event, width=width, verbose=verbose)
    lines += ["", "all events, oldest first:" if between else "events, oldest first:"]
    for event in timeline.events:
        lines += event_lines(event, mark_of(timeline, event), width, verbose)
    if not timeline.events:
        lines.append("  (none in this window)")
    for problem in timeline.unreadable:
        lines += fold(f"unreadable: {visible_line(problem)}", width)
    return "\n".join(lines) + "\n"


def event_json(event: Event) -> EventJson:
    found = cast("EventJson", asdict(event))   # argv and env stay tuples until dumped
    found["at"] = datetime.fromtimestamp(event.time, timezone.utc).isoformat(timespec="seconds")
    found["details"] = list(event.details)
    found["moved"] = list(event.moved)
    return found


JSON_VERSION = 1   # {"envsnap_timeline": 1, ...}: a later version only adds keys


def render_json(timeline: Timeline) -> str:
    found: TimelineJson = {
        "envsnap_timeline": JSON_VERSION,
        "host": timeline.host,
        "since": event_time(timeline.window.since), "until": event_time(timeline.window.until),
        "events": [event_json(event) for event in timeline.events],
        "last_good": event_json(timeline.last_good) if timeline.last_good else None,
        "first_bad": event_json(timeline.first_bad) if timeline.first_bad else None,
        "between": [event_json(event) for event in timeline.between],
        "unreadable": timeline.unreadable,
    }
    if timeline.looked_at is not None:
        seen = timeline.looked_at
        found["looked_at"] = {"checkouts": seen.checkouts, "pythons": seen.pythons,
                              "workers": seen.workers, "found": seen.found,
                              "not_looked_at": list(seen.not_looked_at),
                              "repos": list(seen.repos), "pythons_read": list(seen.pythons_read)}
    if timeline.watched is not None:
        found["watched"] = timeline.watched
    return dump_json(found)


def event_time(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="seconds")
