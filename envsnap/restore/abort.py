"""`envsnap restore --abort`: the one-line way out of an interrupted or failed restore.

Its journal (safety.py) holds up every restore of the same checkouts. Aborting it brings
them back to where they were before that restore: its rollback point is restored (as
`envsnap restore pre-restore-<time>` would), or, when the journal is itself that of a
rollback, the rollback is finished. With no rollback point left in the store, the journal
is cleared (under the checkouts' locks, so a restore running now keeps its own) and the
host is left as it is. A rollback verified drops the aborted restore's stash of the user's
work, whose content it has put back (standing.py checks it is all back first).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable

from envsnap.errors import UsageError
from envsnap.hostops.locks import CheckoutLocks
from envsnap.hostops.shell import HostShell, OthersCheckouts
from envsnap.hosts.connect import open_transport
from envsnap.hosts.inventory import Inventory, resolve_hosts
from envsnap.restore import policy
from envsnap.restore.run import RestoreOptions, RestoreReport, restore
from envsnap.restore.safety import Journal, JournalBook
from envsnap.restore.standing import drop_restored_stashes
from envsnap.snapshot.store import Store

if TYPE_CHECKING:
    from envsnap.hostops.gate import ForeignPlan
    from envsnap.playbook.run import Event


@dataclass(frozen=True)
class Aborted:
    journal: Journal | None              # None: nothing was pending
    target: str | None = None            # the rollback point restored
    report: RestoreReport | None = None  # that restore's report
    cleared: bool = False                # no rollback point: the journal was only removed
    dropped: tuple[str, ...] = ()        # the aborted restore's stashes, dropped once back


def find_journal(book: JournalBook, host: str | None, label: str | None) -> Journal | None:
    """The one pending journal the user means (of --host, of LABEL: the snapshot it was
    restoring or its rollback point); more than one is refused, naming them."""
    found = [journal for journal in book.pending()
             if (host is None or journal.host == host)
             and (label is None or label in (journal.label, journal.pre_restore))]
    if len(found) > 1:
        listed = ", ".join(f"{j.label} on {j.host} (started {j.started})" for j in found)
        raise UsageError(f"{len(found)} interrupted restores are pending ({listed}): name "
                         "one with --host HOST or its LABEL")
    return found[0] if found else None


def rollback_target(journal: Journal) -> str:
    """Where aborting takes the checkouts back to: the journal's rollback point, or, for an
    interrupted rollback, the point it was rolling back to (its own rollback point is the
    half-done state, which is no way back)."""
    if policy.rollback_backup_source(journal.label) is not None:
        return journal.label
    return journal.pre_restore


def abort(store: Store, inventory: Inventory, host: str | None, label: str | None,
          options: RestoreOptions, *, on_event: Callable[[Event], None] | None = None,
          review_foreign: Callable[[ForeignPlan], bool] | None = None) -> Aborted:
    """Abort the pending restore; `options` carries the connection settings, on_event and
    review_foreign are the restore's callbacks (restore/run.py)."""
    book = JournalBook(store)
    journal = find_journal(book, host, label)
    if journal is None:
        return Aborted(None)
    target = rollback_target(journal)
    if not store.exists(target):
        clear_under_locks(book, journal, inventory, options)
        return Aborted(journal, target, cleared=True)
    rollback = replace(options, label=target, host=journal.host, check=False,
                       repos=tuple(journal.touched))
    report = restore(store, inventory, rollback, consented, on_event=on_event,
                     review_foreign=review_foreign)
    # the rollback drops the stashes made since its point; those of the aborted restore's
    # label that are back go too
    dropped = [*report.dropped, *drop_stashes(journal, report, inventory, options)]
    return Aborted(journal, target, report, dropped=tuple(dropped))


def drop_stashes(journal: Journal, report: RestoreReport, inventory: Inventory,
                 options: RestoreOptions) -> list[str]:
    """Once rolled back and verified, the stash the aborted restore made holds what is back
    in the checkout: it is dropped, each one only where git shows its content is all back
    (standing.py); the rest stay."""
    failed = report.plan.outcome != "ok" or report.mismatches or \
        (report.applied is not None and report.applied.outcome != "ok")
    hosts = resolve_hosts([journal.host], inventory)
    if failed or len(hosts) != 1 or not journal.touched:
        return []
    with open_transport(hosts[0], options.capture.connect_timeout,
                        options.capture.accept_new_host_keys) as transport, \
            CheckoutLocks(transport, hosts[0], list(journal.touched), options.wait,
                          on_wait=options.on_wait):
        others = OthersCheckouts() if options.others_checkouts else None
        return drop_restored_stashes(HostShell(hosts[0], transport, others=others),
                                     list(journal.touched), journal.label)


def consented(_report: RestoreReport) -> bool:
    """Typing --abort is the consent: the rollback point is the user's own host as it was."""
    return True


def clear_under_locks(book: JournalBook, journal: Journal, inventory: Inventory,
                      options: RestoreOptions) -> None:
    """Remove the journal while holding its checkouts' locks: a restore that is running
    (and owns the journal) makes this stop with its name instead."""
    hosts = resolve_hosts([journal.host], inventory)
    if len(hosts) != 1:
        raise UsageError(f"host {journal.host!r} of the pending restore names "
                         f"{len(hosts)} hosts: pass the inventory it was restored with")
    host = hosts[0]
    with open_transport(host, options.capture.connect_timeout,
                        options.capture.accept_new_host_keys) as transport, \
            CheckoutLocks(transport, host, list(journal.touched), options.wait,
                          on_wait=options.on_wait):
        book.clear(journal)
