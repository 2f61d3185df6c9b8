"""Bring a host back to a snapshot: plan, then apply, then verify; never lose work.

    fresh capture (the rollback point, pre-restore-<time>)
      -> plan: playbooks/restore.yml in check+diff mode (only what drifted shows up)
      -> apply: the same playbook for real (stash, checkout, patch, untracked, sitecustomize)
      -> verify: capture again; restorable facts must match the snapshot
      -> what no tool can restore (driver, kernel module, PCIe, clocks, packages without
         --pip) is reported as remaining drift with what to do about it
      -> optionally rerun the snapshot's benchmark and give a verdict.

A lock on the host and a journal in the store (safety.py) guard the whole run.
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Callable

from envsnap.bench import run as bench
from envsnap.bench import stats as benchstats
from envsnap.diff.compare import DiffOptions, diff
from envsnap.diff.findings import Finding, plural
from envsnap.errors import HostError, UsageError
from envsnap.hosts import capture
from envsnap.hosts.capture import CaptureOptions
from envsnap.hosts.inventory import Host, Inventory, inventory_of, resolve_hosts, with_vars
from envsnap.hosts.transport import Follow, Result, Transport, open_transport
from envsnap.playbook.load import load
from envsnap.playbook.run import Event, RunOptions, RunResult, run_playbook
from envsnap.restore.safety import (
    HostLock,
    Journal,
    JournalBook,
    Pending,
    check_pending,
    owner_is_dead,
)
from envsnap.snapshot import document as snap
from envsnap.snapshot.document import hostname
from envsnap.snapshot.store import Store


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

ADVICE = {  # what a person does about drift that no tool can undo
    "nvidia": "reinstall the recorded driver / kernel module, reboot; check PCIe seating and "
              "BIOS link settings; check cooling and power limits (nvidia-smi -q -d PERFORMANCE)",
    "cuda_nccl": "reinstall the recorded CUDA / NCCL / torch versions (or restore with --pip)",
    "system": "kernel, boot parameters, limits and governors are set outside envsnap",
    "env": "set these variables where the workers start (shell profile, service unit), or "
           "persist them with the env_file task (playbooks/examples/story-host.yml)",
    "python_env": "pin the packages back (envsnap restore --pip, or pip install NAME==VER)",
}


@dataclass(frozen=True)
class RestoreOptions:
    label: str
    host: str | None = None
    check: bool = False
    force_host: bool = False
    pip: bool = False
    rerun: bool = False
    python: str | None = None          # --python: wins over the inventory and the snapshot
    capture: CaptureOptions = field(default_factory=CaptureOptions)


@dataclass
class RestoreReport:
    host: str
    plan: RunResult
    pre_restore: str | None = None              # set once something is about to change
    pending: Pending | None = None              # of an interrupted run
    applied: RunResult | None = None
    pip_pins: list[str] = field(default_factory=list)
    remaining: list[Finding] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)   # restorable facts still off
    rerun: tuple[dict[str, Any], benchstats.Comparison] | None = None
    notes: list[str] = field(default_factory=list)        # --check: what may change the plan

    @property
    def planned(self) -> list[Any]:
        return [r for r in self.plan.results if r.status == "changed"]

    @property
    def drift(self) -> bool:
        return bool(self.planned or self.pip_pins or self.remaining or self.mismatches)


def restore(store: Store, inventory: Inventory, options: RestoreOptions,
            confirm: Callable[[RestoreReport], bool],
            on_event: Callable[[Event], None] | None = None) -> RestoreReport:
    """Restore options.label onto its host. `confirm` sees the plan and says go or stop."""
    document = store.load(options.label)
    host = target_host(document, inventory, options)
    book = JournalBook(store)
    notes: list[str] = []
    try:
        pending = check_pending(book.read(host.name), options.label)
    except UsageError as exc:
        if not options.check:
            raise
        pending, notes = None, [str(exc)]   # --check only looks: a pending restore is news
    transport = open_transport(host, options.capture.connect_timeout,
                               options.capture.accept_new_host_keys)
    try:
        run = RestoreRun(document, host, transport, store, book, options, on_event)
        if options.check:
            # Read-only: no lock is taken, so a restore running now neither blocks the plan
            # nor is disturbed by it; it is named instead, since it may change the host.
            owner = HostLock(transport, host).holder()
            if owner is not None and not owner_is_dead(owner):
                pending, notes = None, []   # the journal is the running restore's own
            report = run.restore(pending, confirm)
            report.notes = notes + lock_notes(host.name, owner)
            return report
        with HostLock(transport, host):
            return run.restore(pending, confirm)
    finally:
        transport.close()


def lock_notes(host_name: str, owner: str | None) -> list[str]:
    """What --check says about the host's restore lock, which it never takes."""
    if owner is None:
        return []
    if owner_is_dead(owner):
        return [f"{host_name}: a stale restore lock ({owner}) is left on the host; the next "
                "restore takes it over"]
    return [f"{host_name}: another restore holds the lock ({owner}): the host may change "
            "under this plan until it ends"]


def target_host(document: dict[str, Any], inventory: Inventory,
                options: RestoreOptions) -> Host:
    """The snapshot's host (or --host), capturing what the snapshot captured."""
    config = snap.capture_config(document)
    pattern = options.host or snap.host(document, "local")
    hosts = resolve_hosts([pattern], inventory)
    if len(hosts) != 1:
        raise UsageError(f"--host {pattern!r} names {len(hosts)} hosts: restore one at a time")
    wanted = {key: config.get(key) for key in ("repos", "procs")}
    # The interpreter: --python, else the inventory's, else the one the snapshot ran with.
    inventory_python = any(hosts[0].vars.get(key)
                           for key in ("python", "ansible_python_interpreter"))
    wanted["python"] = options.python or (None if inventory_python else config.get("python"))
    return with_vars(hosts[0], wanted)


@dataclass
class RestoreRun:
    """One restore of one snapshot onto one host, inside the host's lock."""

    document: dict[str, Any]
    host: Host
    transport: Transport
    store: Store
    book: JournalBook
    options: RestoreOptions
    on_event: Callable[[Event], None] | None = None

    def restore(self, pending: Pending | None,
                confirm: Callable[[RestoreReport], bool]) -> RestoreReport:
        journal = self.book.read(self.host.name)
        before = self.capture("live")
        check_same_host(self.document, before, self.options.force_host)
        report = self.plan(before, pending)
        changes = bool(report.planned or report.pip_pins)
        if report.plan.outcome != "ok" or self.options.check:
            return report        # a preflight failed, or only the plan was asked for
        if changes and not confirm(report):
            return report        # the user said no: nothing moved
        if not (changes or pending):
            if self.options.rerun:  # nothing to restore, but the numbers may still be off
                report.rerun = self.rerun()
            return report
        if journal is None or pending == "rollback":
            # The rollback point is the host as it is now; a resumed run keeps the first one.
            journal = Journal(self.options.label, self.host.name,
                              save_rollback_point(self.store, before),
                              snap.captured_at(before) or "?")
        report.pre_restore = journal.pre_restore
        self.apply(report, journal)
        return report

    def plan(self, before: dict[str, Any], pending: Pending | None) -> RestoreReport:
        plan = self.playbook(check=True)
        pins = package_pins(self.document, before) if self.options.pip else []
        return RestoreReport(host=self.host.name, plan=plan, pending=pending, pip_pins=pins,
                             remaining=remaining_drift(self.document, before, self.options.pip))

    def apply(self, report: RestoreReport, journal: Journal) -> None:
        journal.state = "applying"
        self.book.write(journal)
        report.applied = self.playbook(check=False)
        if report.applied.outcome != "ok":
            return               # the journal stays: the next run resumes or rolls back
        if report.pip_pins:
            pin_packages(self.transport, self.host, report.pip_pins)
        journal.state = "verifying"
        self.book.write(journal)
        after = self.capture("after")
        report.mismatches = restorable_mismatches(self.document, after)
        report.remaining = remaining_drift(self.document, after, self.options.pip)
        self.book.clear(self.host.name)
        if self.options.rerun:
            report.rerun = self.rerun()

    def capture(self, label: str) -> dict[str, Any]:
        return capture.snapshot_document(self.transport, self.host, label, self.options.capture)

    def rerun(self) -> tuple[dict[str, Any], benchstats.Comparison]:
        return bench.rerun_and_compare(self.document, self.host, self.options.capture)

    def playbook(self, check: bool) -> RunResult:
        return run_restore_playbook(self.host, self.transport, self.store, self.options,
                                    check, None if check else self.on_event)


def check_same_host(snapshot: dict[str, Any], live: dict[str, Any], force: bool) -> None:
    recorded = hostname(snapshot)
    current = hostname(live)
    if recorded and current and recorded != current and not force:
        raise UsageError(f"snapshot {snap.label(snapshot)!r} was taken on "
                         f"{recorded}, this host is {current}: refusing (--force-host "
                         "restores it anyway)")



def save_rollback_point(store: Store, live: dict[str, Any]) -> str:
    """The host as it is now, stored, so `envsnap restore pre-restore-<time>` undoes this."""
    stamp = capture.now_utc().strftime("%Y%m%d-%H%M%S")
    label = f"pre-restore-{stamp}"
    number = 1
    while store.exists(label):
        number += 1
        label = f"pre-restore-{stamp}-{number}"
    snap.set_label(live, label)
    store.save(live, label)
    return label


class Lent:
    """The restore's own connection, lent to the playbook engine (which closes what it is
    given): one SSH connection serves the whole restore."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport

    def run(self, command: str, timeout: float, follow: Follow | None = None) -> Result:
        return self.transport.run(command, timeout, follow)

    def put(self, data: bytes, path: str) -> None:
        self.transport.put(data, path)

    def close(self) -> None:
        pass


def run_restore_playbook(host: Host, transport: Transport, store: Store,
                         options: RestoreOptions, check: bool,
                         on_event: Callable[[Event], None] | None) -> RunResult:
    # The hostname check above is the real one (names differ, machines may not), so the
    # playbook's own name check is told to stand aside.
    extra = {"snapshot": options.label, "force_host": True}
    run_options = RunOptions(extra_vars=extra, limit=(host.name,), check=check, diff=True,
                             transport=lambda _host: Lent(transport))
    return run_playbook(load(str(RESTORE_PLAYBOOK)), inventory_of(host), store, run_options,
                        on_event)


def restorable_mismatches(snapshot: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What restore puts back, compared exactly: HEAD, uncommitted patch, untracked files,
    sitecustomize. History, reflog and stashes differ after any restore, by design."""
    problems = []
    repos_after = snap.repos(after)
    for path, repo in snap.repos(snapshot).items():
        if not isinstance(repo, dict) or "head" not in repo:
            continue
        now = repos_after.get(path) or {}
        for name, value in repo_fingerprint(repo).items():
            if repo_fingerprint(now).get(name) != value:
                problems.append(f"{path}: {name} differs from the snapshot")
    if customize_digest(snapshot) != customize_digest(after):
        problems.append("sitecustomize differs from the snapshot")
    return problems


def repo_fingerprint(repo: dict[str, Any]) -> dict[str, Any]:
    work = repo.get("uncommitted") or {}
    patch = work.get("patch") or {}
    return {"HEAD": repo.get("head"), "uncommitted patch": patch.get("sha256"),
            "untracked files": sorted(work.get("untracked") or {})}


def customize_digest(document: dict[str, Any]) -> Any:
    customize = snap.section(document, "python_env").get("customize") or {}
    site = customize.get("sitecustomize")
    return site.get("sha256") if isinstance(site, dict) else site


# Which machine and which boot: checked before the restore (hostname, --force-host), never
# something to change by hand afterwards.
IDENTITY = (("system", ("hostname",)), ("system", ("boot_id",)))


def remaining_drift(snapshot: dict[str, Any], live: dict[str, Any],
                    pip: bool) -> list[Finding]:
    """Drift that restore.yml does not undo, ranked, each with what to do about it."""
    sections = ("system", "nvidia", "cuda_nccl", "env", "python_env")
    report = diff(snapshot, live, DiffOptions(sections=sections))
    return [finding for finding in report.findings
            if (finding.section, finding.path) not in IDENTITY
            and not (finding.section == "python_env" and finding.path[:1] == ("customize",))
            and not (pip and finding.path[:1] == ("packages",))]


def advice_for(finding: Finding) -> str:
    return ADVICE.get(finding.section, "change it by hand")


def package_pins(snapshot: dict[str, Any], live: dict[str, Any]) -> list[str]:
    """NAME==VERSION for each package whose version drifted or that went missing; packages
    added since the snapshot are left alone (uninstalling is not restore's call)."""
    recorded = snap.packages(snapshot)
    current = snap.packages(live)
    return [f"{name}=={version}" for name, version in sorted(recorded.items())
            if isinstance(version, str) and current.get(name) != version]


def pin_packages(transport: Transport, host: Host, pins: list[str]) -> None:
    command = (f"{shlex.quote(host.python)} -m pip install --no-deps --quiet "
               + " ".join(shlex.quote(pin) for pin in pins))
    result = transport.run(command, timeout=1800)
    if result.exit_code != 0:
        last = (result.stderr.strip().splitlines() or ["?"])[-1]
        raise HostError(f"{host.name}: pip could not pin {plural(len(pins), 'package')}: {last}")
