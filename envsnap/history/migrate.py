"""The YAML snapshots of a store, copied into its history with nothing lost.

Each snapshot is recorded as it is (its signature, or none, kept: a foreign one stays
foreign), read back, and compared with what was read from its file; one that does not
come back equal stops the migration. The YAML files stay where they are. A snapshot
recorded already (a record of its host and time holds the same document) is not recorded
twice, so migrating again adds nothing.
"""
from __future__ import annotations

from dataclasses import dataclass

from envsnap.errors import StoreError
from envsnap.history.store import History, Manifest, epoch_of
from envsnap.snapshot.document import host
from envsnap.snapshot.store import Store

REASON = "migrated"


@dataclass(frozen=True)
class Migrated:
    recorded: tuple[tuple[str, Manifest], ...]   # (label, its record)
    already: tuple[str, ...]                     # labels recorded before
    unreadable: tuple[str, ...]                  # labels whose file is no valid snapshot
    bytes_added: int


def migrate(store: Store, history: History) -> Migrated:
    recorded: list[tuple[str, Manifest]] = []
    already: list[str] = []
    unreadable: list[str] = []
    added = 0
    for entry in store.entries():
        if entry.captured_at == "(unreadable)":
            unreadable.append(entry.label)
            continue
        document = store.load(str(entry.path))
        epoch = epoch_of(document)
        if any(history.load(manifest) == document for manifest in history.manifests(host(document))
               if manifest.captured_at == epoch):
            already.append(entry.label)
            continue
        made = history.record(document, reason=REASON, sign=False)
        if history.load(made.manifest) != store.load(str(entry.path)):
            raise StoreError(f"{entry.label}: its record {made.manifest.id} does not read back "
                             "as its file; the migration stopped here (the YAML files are "
                             "untouched)")
        recorded.append((entry.label, made.manifest))
        added += made.bytes_added
    return Migrated(tuple(recorded), tuple(already), tuple(unreadable), added)
