"""Who holds a checkout's envsnap lock at capture: a restore, bisect or explain that is
moving it. Their state of the checkout (bisect's detached HEAD, a half-done restore) is
envsnap's, not the user's, and the snapshot says so.

The lock is the folder hostops/locks.py makes: ~/.cache/envsnap/locks/<name>-<hash>.lock,
<hash> the first 16 hex digits of the sha256 of the checkout's real path, with an `owner`
file ({"controller", "pid", "command", "started"}). The capturing controller's own lock (a
restore capturing the host before it moves anything) is not another's: it is left out.
"""
from __future__ import annotations

import json
import os

TYPE_CHECKING = False   # typing's own, without its import: see runner.py
if TYPE_CHECKING:
    from typing import Any, Dict, Mapping, Optional

LOCKS_DIR = os.path.join(".cache", "envsnap", "locks")


def lock_holder(path: str, controller: Optional[Mapping[str, Any]]) -> Optional[Dict[str, Any]]:
    """{controller, pid, command, since} of the lock on the checkout at `path`, or None."""
    import hashlib

    real = os.path.realpath(path)
    digest = hashlib.sha256(real.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    folder = os.path.join(os.path.expanduser("~"), LOCKS_DIR)
    try:
        names = os.listdir(folder)
    except OSError:   # no envsnap lock was ever taken here
        return None
    for name in names:
        if name.endswith("-%s.lock" % digest):
            holder = read_owner(os.path.join(folder, name, "owner"))
            if not is_own(holder, controller) and not is_stale(holder):
                return holder
    return None


def read_owner(path: str) -> Dict[str, Any]:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            data = json.loads(handle.read())
    except (OSError, ValueError):   # taken this instant, its owner not written yet
        data = {}
    data = data if isinstance(data, dict) else {}
    pid = data.get("pid")
    return {"controller": str(data.get("controller") or "?"),
            "pid": pid if isinstance(pid, int) else None,
            "command": str(data.get("command") or ""), "since": str(data.get("started") or "")}


def is_own(holder: Dict[str, Any], controller: Optional[Mapping[str, Any]]) -> bool:
    if not controller:
        return False
    return (holder["controller"], holder["pid"]) == (controller.get("hostname"),
                                                     controller.get("pid"))


def is_stale(holder: Dict[str, Any]) -> bool:
    """Left by an envsnap killed on this machine: it holds nothing (locks.py takes it over)."""
    # the host's name as socket.gethostname() gives it (uname's), without socket's import
    if holder["pid"] is None or holder["controller"] != os.uname().nodename:
        return False
    try:
        os.kill(holder["pid"], 0)
    except ProcessLookupError:
        return True
    except OSError:   # alive, another user's
        return False
    return False
