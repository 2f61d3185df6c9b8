"""`envsnap timeline --label L`: a timeline kept in the store, like a snapshot but not one.

    envsnap_timeline: 1
    meta: {label, host, saved_at, since, until, envsnap_version, signature}
    timeline: the events, as `timeline --json` prints them

It lies beside the snapshots as `L.timeline` (store.TIMELINE_SUFFIX), so no command that
reads snapshots takes it for one, while a label names one thing only: a capture refuses a
label a timeline holds, as the timeline refuses a snapshot's or another timeline's. It is
signed with the user's key as a snapshot is (snapshot/provenance.py), so `show` says whose it
is; its strings were redacted on the host and are shown through the renderer of untrusted
text again when read back.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, cast

from envsnap import __version__
from envsnap.errors import SnapshotError, StoreError, UsageError
from envsnap.shape import is_object
from envsnap.snapshot import provenance
from envsnap.snapshot.store import (
    TIMELINE_SUFFIX,
    Store,
    dump_yaml,
    parse_document,
    read_snapshot_text,
    write_new,
)
from envsnap.text import timestamp
from envsnap.timeline.model import Event, LookedAt, Timeline, Window
from envsnap.timeline.render import EventJson, TimelineJson, render_json
from envsnap.timeline.window import iso_seconds

if TYPE_CHECKING:
    from envsnap.snapshot.records import Signature

FORMAT = 1
EVENT_FIELDS = {field.name for field in fields(Event)}
TUPLE_FIELDS = ("details", "argv", "moved")


class SavedMeta(TypedDict, total=False):
    label: str
    host: str
    saved_at: str
    since: str
    until: str | None
    envsnap_version: str
    signature: Signature


class SavedTimeline(TypedDict):
    envsnap_timeline: int
    meta: SavedMeta
    timeline: TimelineJson


@dataclass(frozen=True)
class SavedEntry:
    label: str
    host: str
    saved_at: str
    path: Path


def check_free(store: Store, label: str) -> None:
    """Refused before the host is contacted, as a capture refuses a label in use."""
    store.check_writable()
    if store.exists(label):
        raise UsageError(f"label {label!r} already exists in {store.root} (a snapshot or a "
                         "timeline): give another --label")


def saved_document(found: Timeline, label: str) -> SavedTimeline:
    events: TimelineJson = json.loads(render_json(found))
    events.pop("envsnap_timeline", None)
    meta: SavedMeta = {"label": label, "host": found.host, "saved_at": timestamp(),
            "since": found.window.since_text, "until": found.window.until_text,
            "envsnap_version": __version__}
    document: SavedTimeline = {"envsnap_timeline": FORMAT, "meta": meta, "timeline": events}
    return cast("SavedTimeline", provenance.signed(document, provenance.user_key()))


def save(store: Store, found: Timeline, label: str) -> Path:
    path = store.timeline_path(label)
    path.parent.mkdir(parents=True, exist_ok=True)
    if store.exists(label) or not write_new(path, dump_yaml(saved_document(found, label))):
        raise StoreError(f"label {label!r} was saved in {store.where} meanwhile; this "
                         "timeline is not saved (give another --label)")
    return path


def load(store: Store, label: str) -> SavedTimeline:
    """The saved timeline, its frame checked (the one reader of a `.timeline` file)."""
    path = store.timeline_path(label)
    document = parse_document(read_snapshot_text(path), str(path))
    if not (is_object(document) and document.get("envsnap_timeline") == FORMAT
            and is_object(document.get("meta")) and is_object(document.get("timeline"))):
        raise SnapshotError(f"{path}: not a saved timeline of this envsnap")
    return cast("SavedTimeline", document)


def entries(store: Store) -> list[SavedEntry]:
    found = []
    for path in sorted(store.root.rglob(f"*{TIMELINE_SUFFIX}")) if store.root.is_dir() else []:
        label = path.relative_to(store.root).as_posix()[:-len(TIMELINE_SUFFIX)]
        try:
            meta = load(store, label)["meta"]
        except (SnapshotError, UsageError):
            found.append(SavedEntry(label, "?", "(unreadable)", path))
            continue
        found.append(SavedEntry(label, str(meta.get("host")), str(meta.get("saved_at")), path))
    return found


def event_of(saved: EventJson) -> Event:
    values: dict[str, Any] = {name: value for name, value in saved.items() if name in EVENT_FIELDS}
    for name in TUPLE_FIELDS:
        values[name] = tuple(values.get(name) or ())
    values["env"] = tuple(tuple(pair) for pair in values.get("env") or ())
    return Event(**values)


def timeline_of(document: SavedTimeline) -> Timeline:
    """The saved events as a Timeline again, for timeline/render (the marks kept)."""
    saved, meta = document["timeline"], document["meta"]
    events = [event_of(event) for event in saved.get("events") or []]

    def same(marked: EventJson | None) -> Event | None:
        return next((event for event in events if marked and event == event_of(marked)), None)

    window = Window(iso_seconds(str(saved.get("since"))) or 0.0,
                    iso_seconds(str(saved.get("until"))) or 0.0, str(meta.get("since")),
                    meta.get("until"))
    seen = saved.get("looked_at")
    looked = None if seen is None else LookedAt(
        count(seen.get("checkouts")), count(seen.get("pythons")), count(seen.get("workers")),
        str(seen.get("found") or "?"), strings(seen.get("not_looked_at")),
        strings(seen.get("repos")), strings(seen.get("pythons_read")))
    covered = saved.get("watched")
    return Timeline(str(meta.get("host")), window, events, list(saved.get("unreadable") or []),
                    same(saved.get("last_good")), same(saved.get("first_bad")), looked,
                    covered if isinstance(covered, str) else None)


def count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def strings(value: object) -> tuple[str, ...]:
    return tuple(str(item) for item in value) if isinstance(value, list) else ()
