"""`restore --rerun --serve`: the server's environment put back by starting it with it.

A running server's environment cannot be changed from outside, so without --serve restore
reports it as drift left to the user. With --serve envsnap starts the server itself for the
rerun: with the variables the snapshot's server worker had (a `bench --serve` recorded it,
role "server") that differ from the environment the agent runs in now, set or unset on top
of it. The drift findings about that worker are then not "left to the user" any more. Pure.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from envsnap.agent.redact import holds_marker
from envsnap.bench.run import EnvChanges, ServeSpec
from envsnap.diff.findings import Finding
from envsnap.diff.keys import worker_keys
from envsnap.snapshot import document as snap

if TYPE_CHECKING:
    from envsnap.snapshot.records import Process, Snapshot

@dataclass(frozen=True)
class ServerEnv:
    """What the rerun's server is started with, relative to the host's environment now."""

    worker: str | None          # the snapshot's server worker (its key in a diff), or None
    changes: EnvChanges = ()    # set (name, value) / unset (name, None)
    masked: tuple[str, ...] = ()   # variables whose recorded value was masked: not put back


def main_server(document: Snapshot) -> tuple[str, Process] | None:
    """(its key in a diff, the worker) of the server itself (not one of its children)."""
    found = snap.server_worker(document)
    if found is None:
        return None
    pid, worker = found
    return worker_keys(snap.env(document).get("processes", {}))[pid], worker


def server_env(snapshot: Snapshot, live: Snapshot) -> ServerEnv:
    """The env changes that start a server as the snapshot's server was started: every
    recorded variable that differs from the live environment (the agent's: env.shell) is
    set, every one the server did not have is unset."""
    found = main_server(snapshot)
    if found is None:
        return ServerEnv(None)
    key, worker = found
    recorded = snap.process_env(worker)
    if recorded is None:
        return ServerEnv(key)
    now = snap.env(live).get("shell", {})
    masked = tuple(sorted(name for name, value in recorded.items()
                          if isinstance(value, str) and holds_marker(value)))
    changes: list[tuple[str, str | None]] = [
        (name, value) for name, value in sorted(recorded.items())
        if name not in masked and isinstance(value, str) and now.get(name) != value]
    changes += [(name, None) for name in sorted(now) if name not in recorded]
    return ServerEnv(key, tuple(changes), masked)


def serve_shown(document: Snapshot, serve: ServeSpec | None) -> str | None:
    """What --rerun --serve would start, for a foreign snapshot's review: the command; the
    variables it may set are listed with the review's env (LD_PRELOAD is code to run too)."""
    if serve is None:
        return None
    if not snap.recorded_server_env(document):
        return f"{serve.cmd}  (the snapshot records no server env)"
    return f"{serve.cmd}  (with the snapshot's server env where it differs, listed below)"


def about_server(finding: Finding, server: ServerEnv) -> bool:
    """A drift finding about the server worker's env (or its being there at all), which
    the rerun's server puts back."""
    path = finding.path
    return server.worker is not None and finding.section == "env" and len(path) >= 2 \
        and path[0] == "processes" and path[1] == server.worker \
        and (len(path) == 2 or path[2] == "env")


def changes_text(server: ServerEnv) -> str:
    """"NCCL_PROTO=LL set, NCCL_DEBUG unset" (values are the masked ones the snapshot has)."""
    parts = [f"{name}={value} set" if value is not None else f"{name} unset"
             for name, value in server.changes]
    return ", ".join(parts) or "no variable differs from the host's environment"
