"""--since and --until: `2h`, `30m`, `1d`, `45s` back from now, an ISO time, or a snapshot
label (the moment it was captured). An ISO time without a zone is UTC, like every time
envsnap writes; anything else is one clear usage error."""
from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, timezone

from envsnap.errors import EnvsnapError, UsageError

AGO = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhd])$")
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
DEFAULT_SINCE = "24h"


def moment_text(seconds: float) -> str:
    """A moment as --since, --until and `restore --at` take it back: ISO, UTC, to the second."""
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def iso_seconds(text: str) -> float | None:
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed.timestamp()


def parse_moment(text: str, now: float, label_time: Callable[[str], str | None]) -> float:
    """Epoch seconds of `text`; `label_time` gives a snapshot label's captured_at (or None
    when there is no such label)."""
    ago = AGO.match(text.strip())
    if ago:
        return now - float(ago.group(1)) * UNIT_SECONDS[ago.group(2)]
    seconds = iso_seconds(text.strip())
    if seconds is not None:
        return seconds
    try:
        captured = label_time(text)
    except EnvsnapError:
        captured = None
    if captured is not None and (seconds := iso_seconds(captured)) is not None:
        return seconds
    raise UsageError(f"time {text!r}: give a span back from now (2h, 30m, 1d), an ISO time "
                     "(2026-01-01T13:50:00Z), or a snapshot label")
