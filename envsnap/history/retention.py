"""Which records of a history to keep: every one that is recent, then fewer as they age.

The rule has three spans, each an age: every record younger than `every` is kept; of those
younger than `hourly`, the first of each hour (UTC); of those younger than `daily` (None:
any age), the first of each day. Each host's records are thinned apart, so a host that is
captured rarely never loses its few records to one captured often.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from envsnap.errors import UsageError
from envsnap.history.store import Manifest

HOUR = 3600.0
DAY = 24 * HOUR
UNITS = {"m": 60.0, "h": HOUR, "d": DAY, "w": 7 * DAY}
AGE = re.compile(r"^(\d{1,6})([mhdw])$")
FOREVER = "forever"
SPANS = ("every", "hourly", "daily")


@dataclass(frozen=True)
class Retention:
    every: float = 2 * DAY          # seconds: every record this young is kept
    hourly: float = 14 * DAY        # the first of each hour this young
    daily: float | None = None      # the first of each day this young; None: at any age

    def describe(self) -> str:
        return ",".join(f"{name}={age_text(getattr(self, name))}" for name in SPANS)


DEFAULT = Retention()


def age_text(seconds: float | None) -> str:
    if seconds is None:
        return FOREVER
    for unit in ("d", "h", "m"):
        if seconds % UNITS[unit] == 0:
            size = UNITS[unit]
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def parse_age(text: str, span: str) -> float | None:
    if text == FOREVER:
        return None
    if text == "0":
        return 0.0
    matched = AGE.match(text)
    if matched is None:
        raise UsageError(f"--keep {span}={text}: expected an age such as 90m, 36h, 14d, 8w, "
                         f"0 or {FOREVER}")
    return int(matched.group(1)) * UNITS[matched.group(2)]


def parse_keep(texts: Iterable[str]) -> Retention:
    """`every=2d,hourly=14d,daily=forever` (one --keep or several): each span named replaces
    the default's; one not named keeps it."""
    chosen: dict[str, float | None] = {name: getattr(DEFAULT, name) for name in SPANS}
    for text in texts:
        for item in filter(None, (piece.strip() for piece in text.split(","))):
            span, equals, age = item.partition("=")
            if not equals or span not in SPANS:
                raise UsageError(f"--keep {item!r}: expected SPAN=AGE, SPAN one of "
                                 f"{', '.join(SPANS)} (e.g. --keep every=2d,hourly=14d,"
                                 f"daily={FOREVER})")
            chosen[span] = parse_age(age, span)
    every, hourly = chosen["every"], chosen["hourly"]
    return Retention(every=every if every is not None else float("inf"),
                     hourly=hourly if hourly is not None else float("inf"),
                     daily=chosen["daily"])


def kept(manifests: Iterable[Manifest], rule: Retention, now: float) -> set[str]:
    """The ids the rule keeps, at time `now` (epoch seconds)."""
    by_host: dict[str, list[Manifest]] = {}
    for manifest in manifests:
        by_host.setdefault(manifest.host, []).append(manifest)
    keep: set[str] = set()
    for records in by_host.values():
        keep |= kept_of_host(sorted(records, key=lambda each: (each.captured_at, each.id)),
                             rule, now)
    return keep


def kept_of_host(records: list[Manifest], rule: Retention, now: float) -> set[str]:
    """One host's records, oldest first."""
    keep: set[str] = set()
    first_of: set[tuple[str, int]] = set()
    for manifest in records:
        age = now - manifest.captured_at
        hour = ("hour", int(manifest.captured_at // HOUR))
        day = ("day", int(manifest.captured_at // DAY))
        is_first_of_hour, is_first_of_day = hour not in first_of, day not in first_of
        first_of |= {hour, day}
        if age <= rule.every \
                or (age <= rule.hourly and is_first_of_hour) \
                or ((rule.daily is None or age <= rule.daily) and is_first_of_day):
            keep.add(manifest.id)
    return keep
