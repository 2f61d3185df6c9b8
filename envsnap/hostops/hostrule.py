"""The host rule: a command that changes a host from a snapshot does so on the machine the
snapshot was taken on, or on a named other one with --force-host.

Restore and explain both keep it, each in its own words (`command` names it in the
message). The recorded host picks the target only when the machine reached is the one the
snapshot was taken on; a snapshot without a hostname is of an unknown host, like another
one. It is checked on a fresh capture of the host, before anything moves.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from envsnap.errors import UsageError
from envsnap.snapshot import document as snap

if TYPE_CHECKING:
    from envsnap.snapshot.records import Snapshot


def host_problem(snapshot: Snapshot, live: Snapshot, host_given: bool,
                 force: bool, command: str) -> str | None:
    """Why `command` ("restore", "explain") must not go on here (one line), or None."""
    recorded, current = snap.hostname(snapshot), snap.hostname(live)
    if recorded and current and recorded == current:
        return None
    label = snap.label(snapshot)
    taken = f"was taken on {recorded}" if recorded else "records no hostname (unknown host)"
    here = f"this host is {current}" if current else "this host's name could not be read"
    if not host_given:
        return (f"snapshot {label!r} {taken}, {here}: a snapshot picks the host to {command} "
                f"only when its hostname matches; name the target with --host (and "
                f"--force-host to {command} it there anyway)")
    if not force:
        return (f"snapshot {label!r} {taken}, {here}: refusing (--force-host {command}s it "
                "anyway)")
    return None


def check_same_host(snapshot: Snapshot, live: Snapshot, host_given: bool,
                    force: bool, command: str) -> None:
    """UsageError with host_problem's line, when there is one."""
    problem = host_problem(snapshot, live, host_given, force, command)
    if problem:
        raise UsageError(problem)
