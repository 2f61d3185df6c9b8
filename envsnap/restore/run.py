"""Bring a host back to a snapshot: plan, then apply, then verify; never lose work.

    fresh capture (the rollback point, pre-restore-<time>)
      -> plan: playbooks/restore.yml in check+diff mode (only what drifted shows up)
      -> apply: the same playbook for real (stash, checkout, patch, untracked, sitecustomize)
      -> verify: capture again; restorable facts must match the snapshot
      -> what was checked equal is said, by name (verify.py); what no tool can restore
         (driver, kernel module, PCIe, clocks, packages without --pip) is reported as
         remaining drift with what to do about it (advice.py)
      -> a rollback (restoring pre-restore-<time>) drops the stash of the work it put back
      -> optionally rerun the snapshot's benchmark and give a verdict.

A lock on the host (hostops.locks) and a journal in the store (safety.py) guard the whole run.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from envsnap.bench import run as bench
from envsnap.errors import EnvsnapError, HostError, Interrupted, UsageError
from envsnap.hostops import hostrule
from envsnap.hostops.gate import ForeignPlan, foreign_plan, gate, rerun_shown
from envsnap.hostops.git import GitFailure, toplevel
from envsnap.hostops.locks import CheckoutLocks, LockHolder, LockWait
from envsnap.hostops.pip import pin_packages, remove_packages
from envsnap.hostops.shell import HostShell, OthersCheckouts
from envsnap.hostops.signals import sigint_deferred
from envsnap.hosts import capture
from envsnap.hosts.capture import CaptureOptions
from envsnap.hosts.connect import open_transport
from envsnap.hosts.inventory import Host, Inventory, inventory_of, resolve_hosts, with_vars
from envsnap.hosts.transport import Transport
from envsnap.playbook.load import load
from envsnap.playbook.run import Event, RunOptions, RunResult, TaskResult, run_playbook
from envsnap.restore import policy
from envsnap.restore.advice import Left, advice_for
from envsnap.restore.packages import PipPlan, changed_names, pip_plan
from envsnap.restore.rerun import Rerun, find_bad_side
from envsnap.restore.safety import Journal, JournalBook, Pending, check_pending, touched_by, way_out
from envsnap.restore.serve import (
    ServerEnv,
    about_server,
    serve_shown,
    server_env,
)
from envsnap.restore.standing import drop_stashes_since, stopped_before, stopped_halfway
from envsnap.restore.unwritable import Unwritable, unwritable_files
from envsnap.restore.verify import (
    packages_differ,
    remaining_drift,
    restorable_mismatches,
    verified,
)
from envsnap.snapshot import document as snap
from envsnap.snapshot import provenance
from envsnap.snapshot.store import Store
from envsnap.text import name_stamp

if TYPE_CHECKING:
    from envsnap.hosts.inventory_graph import Vars
    from envsnap.snapshot.records import Snapshot


def shipped_playbook(name: str) -> Path:
    """playbooks/<name>, the package envsnap.playbooks: the checkout's folder in an editable
    install, the copy inside the package when installed from a wheel, and the checkout's
    folder again where envsnap runs from a checkout without being installed."""
    try:
        folder = resources.files("envsnap.playbooks")
    except ModuleNotFoundError:  # a checkout run as `python -m envsnap`, not installed
        return Path(__file__).resolve().parents[2] / "playbooks" / name
    return Path(str(folder / name))


RESTORE_PLAYBOOK = shipped_playbook("restore.yml")

PIP_RAN = ("pip ran for it, yet it still differs (another copy on sys.path, or a version pip "
           "could not find): put it right by hand")


@dataclass(frozen=True)
class RestoreOptions:
    label: str
    host: str | None = None
    check: bool = False
    force_host: bool = False
    pip: bool = False
    rerun: bool = False
    python: str | None = None          # --python: wins over the inventory and the snapshot
    host_wide: bool = False            # --host-wide: may write a sitecustomize every python loads
    # --as-root-in-others-checkouts: may move checkouts of another user than the one envsnap
    # runs as on the host, with none of their configured commands (hostops/git.py)
    others_checkouts: bool = False
    wait: float = 0.0                  # --wait: seconds to wait for a checkout's lock
    trust_foreign: bool = False        # restore a snapshot not signed by this user
    repos: tuple[str, ...] = ()        # --repo: the checkouts the user names (policy.py)
    rerun_command: str | None = None   # --rerun-cmd; else the recorded one, once confirmed
    serve: bench.ServeSpec | None = None   # --serve: the rerun starts the server, with the
                                           # snapshot's server env (serve.py)
    resume: str | None = None          # the command that resumes it, if not `restore LABEL`
    capture: CaptureOptions = field(default_factory=CaptureOptions)
    # --wait: told who holds a lock, and for how long at most it is waited for (the CLI says it)
    on_wait: Callable[[LockWait], None] | None = None


@dataclass
class RestoreReport:
    host: str
    plan: RunResult
    pre_restore: str | None = None              # set once something is about to change
    pending: Pending | None = None              # of an interrupted run
    applied: RunResult | None = None
    pip_pins: list[str] = field(default_factory=list)       # --pip: NAME==VERSION to install
    pip_removals: list[str] = field(default_factory=list)   # --pip: NAMEs to uninstall
    pip_kept: dict[str, str] = field(default_factory=dict)  # --pip: NAME -> why it stays
    remaining: list[Left] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)   # restorable facts still off
    verified: list[str] = field(default_factory=list)     # what was checked equal, by name
    dropped: list[str] = field(default_factory=list)      # a rollback: the stashes of the
                                                          # work it put back, dropped
    refusals: list[str] = field(default_factory=list)     # --check: why the run would refuse
    unwritable: list[Unwritable] = field(default_factory=list)   # never written back
    rerun: Rerun | None = None
    server_env: ServerEnv | None = None    # --serve: the env the rerun's server started with
    notes: list[str] = field(default_factory=list)   # said first: what the target leaves
                                                     # out; --check: what may change the plan

    @property
    def planned(self) -> list[TaskResult]:
        return [r for r in self.plan.results if r.status == "changed"]

    @property
    def pip_changes(self) -> bool:
        return bool(self.pip_pins or self.pip_removals)

    @property
    def drift(self) -> bool:
        return bool(self.planned or self.pip_changes or self.remaining or self.mismatches
                    or self.unwritable)


def restore(store: Store, inventory: Inventory, options: RestoreOptions,
            confirm: Callable[[RestoreReport], bool],
            on_event: Callable[[Event], None] | None = None,
            review_foreign: Callable[[ForeignPlan], bool] | None = None,
            confirm_rerun: Callable[[policy.RecordedRerun], bool] | None = None
            ) -> RestoreReport:
    """Restore options.label onto its host. `confirm` sees the plan and says go or stop;
    `review_foreign` sees all a foreign snapshot would do, and is asked when neither --check
    nor trust_foreign settles it."""
    document = store.load(options.label)
    snap.refuse_partial(document, options.label, "restore")
    return restore_document(document, store, inventory, options, confirm, on_event,
                            review_foreign, confirm_rerun)


def restore_document(document: Snapshot, store: Store, inventory: Inventory,
                     options: RestoreOptions, confirm: Callable[[RestoreReport], bool],
                     on_event: Callable[[Event], None] | None = None,
                     review_foreign: Callable[[ForeignPlan], bool] | None = None,
                     confirm_rerun: Callable[[policy.RecordedRerun], bool] | None = None,
                     notes: tuple[str, ...] = ()) -> RestoreReport:
    """restore() of a document already in hand (loaded once, or a target made from the host's
    reflog: at_time.py), under options.label: the same gate, locks, journal, rollback point,
    plan, apply, verify and rerun. `notes` head the plan (what the target leaves out)."""
    host = target_host(document, inventory, options)
    check_provenance(document, host, options, review_foreign)
    # Refused before the host is touched; --check goes through the same checks and shows
    # every refusal after its plan.
    refused = policy.refusals(document, host, options.rerun, options.rerun_command)
    if refused and not options.check:
        raise refused[0]
    # The rerun's command is settled (given, or recorded and confirmed) before any change.
    options = replace(options, rerun_command=policy.rerun_command(
        document, options.rerun, options.rerun_command, options.check, confirm_rerun))
    book = JournalBook(store)
    touched = touched_by(document, policy.chosen_repos(host))
    with open_transport(host, options.capture.connect_timeout,
                        options.capture.accept_new_host_keys) as transport:
        run = RestoreRun(document, host, transport, store, book, options, on_event)
        locks = CheckoutLocks(transport, host, touched, options.wait, on_wait=options.on_wait)
        if options.check:
            # Read-only: no lock is taken, so a restore running now neither blocks the plan
            # nor is disturbed by it; it is named instead, since it may change the host.
            try:
                pending, checked = check_pending(book.read(host.name, touched),
                                                 options.label), []
            except UsageError as exc:   # --check only looks: a pending restore is news
                pending, checked = None, [str(exc)]
            holders = locks.holders()
            if any(not holder.is_dead() for _, holder in holders):
                pending, checked = None, []   # the journal is the running restore's own
            report = run.restore(pending, confirm, notes)
            report.notes = [*notes, *checked, *lock_notes(host.name, holders),
                            *policy.rerun_note(document, options.rerun, options.rerun_command)]
            report.refusals = [str(refusal) for refusal in refused]
            return report
        # The locks first: a journal read before them may be a running restore's own.
        with locks:
            return run.restore(check_pending(book.read(host.name, touched), options.label),
                               confirm, notes)


def check_provenance(document: Snapshot, host: Host, options: RestoreOptions,
                     review: Callable[[ForeignPlan], bool] | None) -> None:
    """A snapshot this user's envsnap did not sign is shown whole, then restored only when
    trusted; refused before the host is contacted (no lock, no journal, nothing written)."""
    found = provenance.verify_as_user(document)
    serving = options.serve if options.rerun else None
    plan = foreign_plan(document, options.label, host.name, found,
                        repos=host.list_var("repos"), pip=options.pip,
                        rerun=rerun_shown(document, options.rerun, options.rerun_command),
                        needs_consent=not (options.check or options.trust_foreign),
                        host_wide=options.host_wide,
                        serve=serve_shown(document, serving),
                        env=snap.recorded_server_env(document) if serving else None)
    gate(plan, review, "restore it")


def lock_notes(host_name: str, holders: list[tuple[str, LockHolder]]) -> list[str]:
    """What --check says about the locks of what it would restore, which it never takes."""
    notes = []
    for name, holder in holders:
        if holder.is_dead():
            notes.append(f"{host_name}: a stale lock on {name}, left by {holder.doing()} "
                         f"({holder.describe()}), is left on the host; the next restore "
                         "takes it over")
        else:
            notes.append(f"{host_name}: {holder.doing()} holds the lock on {name} "
                         f"({holder.describe()}): it may change under this plan until it ends")
    return notes


def target_host(document: Snapshot, inventory: Inventory,
                options: RestoreOptions) -> Host:
    """--host, else the snapshot's host (hostrule.host_problem checks it is that machine),
    capturing the checkouts this restore may touch (policy.choose_repos)."""
    config = snap.capture_config(document)
    pattern = options.host or snap.host(document, "local")
    hosts = resolve_hosts([pattern], inventory)
    if len(hosts) != 1:
        raise UsageError(f"--host {pattern!r} names {len(hosts)} hosts: restore one at a time")
    mine = provenance.verify_as_user(document).mine
    choice = policy.choose_repos(document, hosts[0], options.repos, mine)
    wanted: Vars = {"procs": config.get("procs"), "repos": choice.restore}
    # The interpreter: --python, else the inventory's, else the one the snapshot ran with,
    # if the snapshot is the user's own: a foreign one's would be a program it picked to run.
    inventory_python = any(hosts[0].vars.get(key)
                           for key in ("python", "ansible_python_interpreter"))
    recorded_python = config.get("python") if mine else None
    wanted["python"] = options.python or (None if inventory_python else recorded_python)
    return policy.with_repo_choice(with_vars(hosts[0], wanted), choice)


@dataclass
class RestoreRun:
    """One restore of one snapshot onto one host, inside the host's lock."""

    document: Snapshot
    host: Host
    transport: Transport
    store: Store
    book: JournalBook
    options: RestoreOptions
    on_event: Callable[[Event], None] | None = None
    backup_label: str | None = None   # the rollback point whose backup folder apply fills
    others: OthersCheckouts | None = None   # admitted checkouts of other users, when allowed

    def __post_init__(self) -> None:
        if self.options.others_checkouts:
            self.others = OthersCheckouts()

    def shell(self) -> HostShell:
        return HostShell(self.host, self.transport, others=self.others)

    def check_owners(self) -> None:
        """Each checkout it writes is the user's own, or admitted (hostops/git.py): refused
        before anything moves (OthersCheckout), not as a failed task half-way."""
        for path in self.touched():
            toplevel(self.shell(), path)

    def restore(self, pending: Pending | None, confirm: Callable[[RestoreReport], bool],
                notes: tuple[str, ...] = ()) -> RestoreReport:
        journal = self.book.read(self.host.name, self.touched())
        with self.unchanged_on_ctrl_c(journal):
            before = self.capture("live")
            hostrule.check_same_host(self.document, before, self.options.host is not None,
                                     self.options.force_host, "restore")
            self.check_owners()
            report = self.plan(before, pending)
            report.notes = list(notes)
            changes = bool(report.planned or report.pip_changes)
            if report.plan.outcome != "ok" or self.options.check:
                return report        # a preflight failed, or only the plan was asked for
            if changes and not confirm(report):
                return report        # the user said no: nothing moved
        if not (changes or pending):
            if self.options.rerun:  # nothing to restore, but the numbers may still be off
                self.rerun(report, before)
            return report
        if journal is None or pending == "rollback":
            # The rollback point is the host as it is now; a resumed run keeps the first one.
            replaced = journal
            journal = Journal(self.options.label, self.host.name,
                              save_rollback_point(self.store, before),
                              snap.captured_at(before) or "?",
                              touched=self.touched(), resume=self.options.resume)
            self.book.start(journal, replacing=replaced)
        report.pre_restore = journal.pre_restore
        self.apply(report, journal)
        return report

    def plan(self, before: Snapshot, pending: Pending | None) -> RestoreReport:
        plan = self.playbook(check=True)
        pip = pip_plan(self.document, before) if self.options.pip else PipPlan()
        chosen = policy.chosen_repos(self.host)
        return RestoreReport(host=self.host.name, plan=plan, pending=pending, pip_pins=pip.pins,
                             pip_removals=pip.removals, pip_kept=dict(pip.kept),
                             remaining=self.remaining(before, changed_names(pip),
                                                      pip.kept),
                             verified=verified(self.document, before, chosen, False),
                             unwritable=unwritable_files(self.document, before, chosen))

    def apply(self, report: RestoreReport, journal: Journal) -> None:
        journal.state = "applying"
        self.book.write(journal)
        self.backup_label = journal.pre_restore
        try:
            report.applied = self.playbook(check=False)
            if report.applied.outcome != "ok":
                return           # the journal stays: the next run resumes or rolls back
            if report.pip_removals:
                left = remove_packages(self.shell(),
                                       report.pip_removals)
                report.pip_kept.update({name: f"pip left it installed: {said}"
                                        for name, said in left.items()})
            if report.pip_pins:
                pin_packages(self.shell(), report.pip_pins)
            journal.state = "verifying"
            self.book.write(journal)
            after = self.capture("after")
        except EnvsnapError as exc:
            # The error line is all the user sees: it says how to get past the journal.
            raise type(exc)(f"{exc}; the restore stays pending: {way_out(journal)}") from None
        except KeyboardInterrupt:
            raise self.interrupted(journal) from None
        chosen = policy.chosen_repos(self.host)
        report.mismatches = restorable_mismatches(self.document, after, chosen)
        report.unwritable = unwritable_files(self.document, after, chosen)
        # a package pip changed without a word, and that still differs: said so
        unsaid = {name: PIP_RAN for name in changed_names(PipPlan(report.pip_pins,
                                                                  report.pip_removals))}
        report.remaining = self.remaining(after, set(), {**unsaid, **report.pip_kept})
        report.verified = verified(self.document, after, chosen, self.options.pip and not
                                   packages_differ([left.finding for left in report.remaining]))
        stamp = policy.rollback_stamp(self.options.label)
        if stamp is not None and not report.mismatches:
            report.dropped = self.drop_rolled_back_stashes(stamp)
        self.book.clear(journal)
        if self.options.rerun:
            self.rerun(report, after)

    @contextmanager
    def unchanged_on_ctrl_c(self, journal: Journal | None) -> Iterator[None]:
        try:
            yield
        except KeyboardInterrupt:
            raise stopped_before(self.host.name, self.options.label, journal) from None

    def interrupted(self, journal: Journal) -> Interrupted:
        """Ctrl-C half-way: where each checkout stands, and the one way back (--abort)."""
        with sigint_deferred():   # a second Ctrl-C must not cut the account short
            return stopped_halfway(self.shell(), journal)

    def touched(self) -> list[str]:
        """The checkouts this restore writes: its locks and journal."""
        return touched_by(self.document, policy.chosen_repos(self.host))

    def capture(self, label: str) -> Snapshot:
        return capture.snapshot_document(self.transport, self.host, label, self.options.capture)

    def remaining(self, live: Snapshot, handled: set[str],
                  kept: dict[str, str]) -> list[Left]:
        """Drift restore.yml does not undo (`handled`: the packages --pip changes), each with
        its advice; with --serve less the server's env, which the rerun's server is started
        with."""
        found = remaining_drift(self.document, live, handled)
        if self.options.serve is not None and self.options.rerun:
            server = server_env(self.document, live)
            found = [finding for finding in found if not about_server(finding, server)]
        return [Left(finding, advice_for(finding, self.document, live, kept))
                for finding in found]

    def drop_rolled_back_stashes(self, stamp: str) -> list[str]:
        """A rollback verified: the stash the restore it undoes made of the user's work holds
        what is back in the checkout, and is dropped (standing.py checks it all is first),
        as --abort does; a `git stash pop` later would apply the work a second time."""
        with sigint_deferred():
            try:
                return drop_stashes_since(self.shell(), self.touched(),
                                          stamp)
            except (GitFailure, HostError):
                return []     # git could not say all is back: the stash stays, as it must

    def rerun(self, report: RestoreReport, live: Snapshot) -> None:
        """The benchmark again: against the snapshot's runs, and against the runs of the
        state it was restored from when the store holds some (rerun.py). With --serve the
        server is started with the snapshot's server env (serve.py)."""
        serve = self.options.serve
        if serve is not None:
            report.server_env = server_env(self.document, live)
            serve = replace(serve, env=report.server_env.changes)
        record, vs_good = bench.rerun_and_compare(self.document, self.host,
                                                  self.options.capture,
                                                  command=self.options.rerun_command,
                                                  serve=serve)
        report.rerun = Rerun(record, vs_good, find_bad_side(
            self.store, self.document, report.pre_restore, self.host.name, record,
            self.same_restorable_state))

    def same_restorable_state(self, snapshot: Snapshot, live: Snapshot) -> bool:
        """Restoring `snapshot` onto `live` would change nothing (in the chosen checkouts)."""
        chosen = policy.chosen_repos(self.host)
        return bool(touched_by(snapshot, chosen)) and \
            not restorable_mismatches(snapshot, live, chosen)

    def playbook(self, check: bool) -> RunResult:
        return run_restore_playbook(self.document, self.host, self.transport, self.store,
                                    self.options, check, None if check else self.on_event,
                                    None if check else self.backup_label, self.others)


def save_rollback_point(store: Store, live: Snapshot) -> str:
    """The host as it is now, stored, so `envsnap restore pre-restore-<time>` undoes this."""
    stamp = name_stamp()
    label = f"pre-restore-{stamp}"
    number = 1
    while store.exists(label):
        number += 1
        label = f"pre-restore-{stamp}-{number}"
    snap.set_label(live, label)
    store.save(live, label)
    return label


def run_restore_playbook(document: Snapshot, host: Host, transport: Transport, store: Store,
                         options: RestoreOptions, check: bool,
                         on_event: Callable[[Event], None] | None,
                         backup_label: str | None = None,
                         others: OthersCheckouts | None = None) -> RunResult:
    # The hostname check above is the real one (names differ, machines may not), so the
    # playbook's own name check is told to stand aside.
    extra = {"snapshot": options.label, "force_host": True, "host_wide": options.host_wide,
             **policy.playbook_vars(host, options.label, backup_label)}
    # The document restore loaded once and check_provenance passed through the gate: the
    # playbook takes it as it is, and never reads the store's file again. The inventory is
    # the one host, so no --limit: a limit is a host pattern, and `root@gpu-box:2222` (a
    # target as capture takes it) is no pattern.
    run_options = RunOptions(extra_vars=extra, check=check, diff=True,
                             connection=transport, checked={options.label: document},
                             others=others)
    return run_playbook(load(str(RESTORE_PLAYBOOK)), inventory_of(host), store, run_options,
                        on_event)
