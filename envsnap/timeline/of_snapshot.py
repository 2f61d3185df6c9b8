"""`report --timeline WINDOW`: the timeline of the host a snapshot was captured on.

The same events `envsnap timeline` reads (run.py, from the host now), of the checkouts,
workers and hot paths the snapshot recorded; the CLI hands the Timeline to the report, which
only lays it out (report/timeline_part.py) and never reaches a host. Only the user's own
snapshot is followed to its host: a foreign one would pick the host to reach, the checkouts
and workers to read and the interpreter to run (refused, exit 2, with the way on: `envsnap
trust`, or `envsnap timeline HOST` where the user names the host).
"""
from __future__ import annotations

from dataclasses import replace

from envsnap.errors import UsageError
from envsnap.hosts.inventory import Inventory, resolve_hosts
from envsnap.hosts.inventory_graph import Vars
from envsnap.snapshot import document as snap
from envsnap.snapshot import provenance
from envsnap.snapshot.records import Snapshot
from envsnap.snapshot.store import Store
from envsnap.timeline.model import Timeline
from envsnap.timeline.run import TimelineOptions, timeline


def host_timeline(document: Snapshot, since: str, store: Store, inventory: Inventory,
                  options: TimelineOptions) -> Timeline:
    """The timeline of the host the snapshot was captured on, of its recorded checkouts,
    workers and hot paths."""
    verdict = provenance.verify_as_user(document)
    if not verdict.mine:      # its host, checkouts and workers would be a stranger's choice
        raise UsageError(f"--timeline reads the host a snapshot names, and "
                         f"{snap.label(document)!r} is {verdict.describe()}: `envsnap trust "
                         f"{snap.label(document)}` first, or run `envsnap timeline HOST`")
    config = snap.capture_config(document)
    wanted: Vars = {"repos": config.get("repos"), "procs": config.get("procs"),
                    "hot_paths": config.get("hot_paths"), "python": config.get("python")}
    hosts = resolve_hosts([snap.host(document, "local")], inventory, wanted)
    if len(hosts) != 1:
        raise UsageError(f"--timeline: the snapshot's host names {len(hosts)} hosts")
    return timeline(hosts[0], replace(options, since=since), store)
