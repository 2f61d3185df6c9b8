"""`envsnap restore --repo PATH --at TIME`: one checkout back where its reflog says HEAD
stood at TIME (2h, 30m, an ISO time or a snapshot label, read by timeline/window.py).

No second way of changing a host: the state of that time becomes a restore input like any
snapshot, and restore.run.restore_document takes it through the same gate, locks, journal,
rollback point, plan (--check), apply, verify and --rerun. The target is the host's live
capture cut to that one checkout, with

- HEAD: the commit of the newest reflog entry at or before TIME;
- branch: the one a `checkout: moving from A to B` line says HEAD was on then (the first
  such line after TIME names it as A, else the last one before it as B, else it is the branch
  of now); restore takes it when it still points at that commit, else checks the commit out
  detached (a branch that moved on is never moved back: hostops/git.py);
- no uncommitted work: a reflog records commits only. The work there now is stashed, as
  by every restore, and the plan says so first;
- the benchmark: the newest stored snapshot of the host captured at or before TIME that
  holds one (so --rerun benches again against the numbers of that time).

It is signed with the user's key: it is made here, from the user's own capture of the host.
"""
from __future__ import annotations

import copy
import hashlib
import posixpath
import re
import shlex
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable

from envsnap.agent.gitparse import uncommitted_digest
from envsnap.errors import UsageError
from envsnap.hosts import capture
from envsnap.hosts.connect import open_transport
from envsnap.hosts.inventory import Inventory, resolve_hosts, with_vars
from envsnap.restore.run import RestoreOptions, RestoreReport, restore_document
from envsnap.snapshot import document as snap
from envsnap.snapshot import provenance
from envsnap.snapshot.store import Store
from envsnap.timeline.window import iso_seconds, moment_text, parse_moment

if TYPE_CHECKING:
    from envsnap.hostops.gate import ForeignPlan
    from envsnap.playbook.run import Event
    from envsnap.restore.policy import RecordedRerun
    from envsnap.snapshot.records import Bench, Blob, ReflogEntry, Repo, Snapshot, Uncommitted

CHECKOUT_MOVE = re.compile(r"^checkout: moving from (\S+) to (\S+)$")
SHA_LIKE = re.compile(r"^[0-9a-f]{7,64}$")
NO_WORK_NOTE = ("uncommitted work is not in a reflog: {path} is put back at its commit of "
                "{at} without any; the work there now is stashed first, as by every restore")


@dataclass(frozen=True)
class ReflogState:
    head: str
    branch: str | None           # None: HEAD was detached
    entry: ReflogEntry           # the reflog line that set it


def state_at(repo: Repo, path: str, moment: float) -> ReflogState:
    """Where the reflog says HEAD of `path` stood at `moment` (epoch seconds)."""
    reflog = [entry for entry in repo.get("reflog") or [] if entry.get("time") is not None
              and entry.get("new")]                        # newest first, as recorded
    before = [entry for entry in reflog if int(entry["time"] or 0) <= moment]
    if not before:
        oldest = moment_text(int(reflog[-1]["time"] or 0)) if reflog else None
        cut = " (the newest entries only were read)" if repo.get("reflog_truncated") else ""
        raise UsageError(f"{path}: its reflog{cut} " + (f"starts at {oldest}" if oldest else
                         "is empty") + f": it records no state at {moment_text(moment)}")
    after = [entry for entry in reflog if int(entry["time"] or 0) > moment]
    return ReflogState(str(before[0]["new"]),
                       branch_at(before, after, repo.get("branch")), before[0])


def branch_at(before: list[ReflogEntry], after: list[ReflogEntry],
              branch_now: str | None) -> str | None:
    for entry in reversed(after):           # the first move after the moment: moving from
        move = CHECKOUT_MOVE.match(entry.get("message") or "")
        if move:
            return branch_name(move.group(1))
    for entry in before:                    # the last move before it: moving to
        move = CHECKOUT_MOVE.match(entry.get("message") or "")
        if move:
            return branch_name(move.group(2))
    return branch_now


def branch_name(name: str) -> str | None:
    """git writes a detached HEAD's side of a checkout line as its (abbreviated) sha."""
    return None if SHA_LIKE.match(name) else name


def clean_work() -> Uncommitted:
    """What a capture records of a checkout with no uncommitted work."""
    nothing = hashlib.sha256(b"").hexdigest()

    def empty() -> Blob:
        return {"bytes": 0, "sha256": nothing, "text": "", "truncated": False}
    return {"dirty": False, "tracked": {}, "patch": empty(), "staged": empty(),
            "untracked": {}, "untracked_count": 0, "untracked_truncated": False,
            "digest": uncommitted_digest(nothing, {})}


def target_of(live: Snapshot, path: str, state: ReflogState, label: str,
              bench: Bench | None) -> Snapshot:
    """The live capture, cut to `path`, with HEAD and branch of the reflog's state, no
    uncommitted work, and the benchmark of that time (pure)."""
    target = copy.deepcopy(live)
    repo = snap.repos(target)[path]
    repo["head"], repo["branch"] = state.head, state.branch
    repo["detached"], repo["uncommitted"] = state.branch is None, clean_work()
    repo["ahead"] = repo["behind"] = None
    snap.git(target)["repos"] = {path: repo}
    snap.set_label(target, label)
    target.pop("bench", None)
    if bench is not None:
        snap.set_bench(target, bench)
    return target


def bench_of_that_time(store: Store, host: str, moment: float) -> Bench | None:
    found = []
    for entry in store.entries():
        captured = iso_seconds(entry.captured_at)
        if entry.host == host and captured is not None and captured <= moment:
            found.append((captured, entry.path))
    for _, path in sorted(found, reverse=True):
        record = snap.bench(store.load(str(path)))
        if record is not None and record.get("command"):
            return record
    return None


@dataclass(frozen=True)
class AtTime:
    repo: str            # --repo PATH
    at: str              # --at TIME, as given


def restore_at(store: Store, inventory: Inventory, options: RestoreOptions, at: AtTime,
               confirm: Callable[[RestoreReport], bool],
               on_event: Callable[[Event], None] | None = None,
               review_foreign: Callable[[ForeignPlan], bool] | None = None,
               confirm_rerun: Callable[[RecordedRerun], bool] | None = None) -> RestoreReport:
    """The checkout `at.repo` of --host (default local) back to its reflog state of `at.at`."""
    moment = parse_moment(at.at, time.time(),
                          lambda label: snap.captured_at(store.load(label)))
    hosts = resolve_hosts([options.host or "local"], inventory)
    if len(hosts) != 1:
        raise UsageError(f"--host {options.host!r} names {len(hosts)} hosts: restore one at "
                         "a time")
    host = with_vars(hosts[0], {"repos": [at.repo], "python": options.python})
    with open_transport(host, options.capture.connect_timeout,
                        options.capture.accept_new_host_keys) as transport:
        live = capture.snapshot_document(transport, host, "live", options.capture)
    path, repo = only_repo(live, at.repo)
    state = state_at(repo, path, moment)
    label = f"reflog-{posixpath.basename(path.rstrip('/')) or 'repo'}-{state.head[:12]}"
    bench = bench_of_that_time(store, host.name, moment)
    if options.rerun and not options.check and bench is None:   # before anything moves
        raise UsageError(f"--rerun compares with the benchmark of that time, and no snapshot "
                         f"of {host.name} captured by {moment_text(moment)} holds one (record "
                         "one with envsnap bench HOST --label ...); nothing was changed")
    target = target_of(live, path, state, label, bench)
    target = provenance.signed(target, provenance.user_key())   # type: ignore[assignment]
    note = NO_WORK_NOTE.format(path=path, at=moment_text(moment))
    said = (f"{path} at {moment_text(moment)}: {state.head[:12]}"
            + (f" on {state.branch}" if state.branch else " (detached)")
            + f", as its reflog {state.entry.get('selector') or 'HEAD'} says: "
            + str(state.entry.get("message") or ""))
    where = "" if host.is_local else f"--host {shlex.quote(host.name)} "
    resume = f"envsnap restore {where}--repo {shlex.quote(path)} --at {moment_text(moment)}"
    return restore_document(target, store, inventory,
                            replace(options, label=label, host=host.name, repos=(path,),
                                    resume=resume),
                            confirm, on_event, review_foreign, confirm_rerun,
                            notes=(said, note))


def only_repo(live: Snapshot, given: str) -> tuple[str, Repo]:
    repos = snap.repos(live)
    if len(repos) != 1:
        raise UsageError(f"--repo {given}: the capture recorded {len(repos)} checkouts")
    path, repo = next(iter(repos.items()))
    if repo.get("error") or not repo.get("head"):
        raise UsageError(f"--repo {given}: {repo.get('error') or 'no commit recorded'}")
    return path, repo
