"""A period as a person types it (`30s`, `10m`, `2h`, `1d`, or bare seconds) and as it is
said back, the same way (`every 10m` is the reason a scheduled capture is recorded with)."""
from __future__ import annotations

import math
import re

from envsnap.errors import UsageError

UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
PERIOD = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhd]?)$")


def parse_period(text: str) -> float:
    """Seconds of `text`; UsageError for anything else, a zero or an infinite period."""
    match = PERIOD.match(text.strip())
    if match is None:
        raise UsageError(f"{text!r} is not a period: give a number and a unit, e.g. 30s, "
                         "10m, 2h or 1d")
    seconds = float(match.group(1)) * UNITS[match.group(2) or "s"]
    if seconds <= 0 or not math.isfinite(seconds):
        raise UsageError(f"{text!r} is not a period of more than 0 seconds")
    return seconds


def period_text(seconds: float) -> str:
    """The shortest of `10m`, `90s`, `2h`, `1d` that says `seconds` exactly."""
    for unit in ("d", "h", "m"):
        count = seconds / UNITS[unit]
        if count >= 1 and count == int(count):
            return f"{int(count)}{unit}"
    return f"{seconds:g}s"
