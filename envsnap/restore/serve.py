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

STARTED_BY_ENVSNAP = "envsnap --serve"   # agent/benchserve.py MATCHED


@dataclass(frozen=True)
class ServerEnv:
    """What the rerun's server is started with, relative to the host's environment now."""

    worker: str | None          # the snapshot's server worker (its key in a diff), or None
    changes: EnvChanges = ()    # set (name, value) / unset (name, None)
    masked: tuple[str, ...] = ()   # variables whose recorded value was masked: not put back


def server_workers(document: Snapshot) -> dict[str, Process]:
    """{pid: worker} of the processes a --serve server ran as, in the document's env."""
    processes = snap.env(document).get("processes", {})
    return {pid: info for pid, info in processes.items() if info.get("role") == "server"}


def main_server(document: Snapshot) -> tuple[str, Process] | None:
    """(its key in a diff, the worker) of the server itself (not one of its children)."""
    workers = server_workers(document)
    for pid, info in sorted(workers.items()):
        if info.get("matched") == STARTED_BY_ENVSNAP:
            keys = worker_keys(snap.env(document).get("processes", {}))
            return keys[pid], info
    return None


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


def recorded_server_env(document: Snapshot) -> dict[str, str]:
    """Every variable the snapshot's server ran with: what --rerun --serve may start one with
    (where it differs from the host's), for a foreign snapshot's review (hostops/gate.py)."""
    found = main_server(document)
    recorded = snap.process_env(found[1]) if found is not None else None
    return {name: value for name, value in (recorded or {}).items() if isinstance(value, str)}


def serve_shown(document: Snapshot, serve: ServeSpec | None) -> str | None:
    """What --rerun --serve would start, for a foreign snapshot's review: the command; the
    variables it may set are listed with the review's env (LD_PRELOAD is code to run too)."""
    if serve is None:
        return None
    if main_server(document) is None or not recorded_server_env(document):
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
