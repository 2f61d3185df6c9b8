"""Hosts -> snapshots: run the agent on each host, build the documents, store them.

A fleet is captured by a bounded pool of workers (Ansible's `forks`); each host's outcome
comes back as data, so one unreachable host never loses the others' snapshots.

Every capture takes one path from the agent's output to a stored snapshot, whoever ran the
agent: `envsnap capture` and `envsnap bench` over a transport, the Ansible action plugin
(ansible/controller.py) through its module. agent_json reads what the agent printed (output
that is not JSON is a HostError, whichever path met it), document_of builds the snapshot with
what was asked recorded (recorded_config) and checks it against the schema (a host that
prints wrong field types is refused in one line, before anything is signed or saved: a
stranger's host is no more trusted than a stranger's file), save_snapshot stores it and says
its problems. What the host printed is read with a cap (hosts/transport.py).
"""
from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from envsnap.errors import (
    EnvsnapError,
    ExitCode,
    HostError,
    SnapshotError,
    StoreError,
    UsageError,
)
from envsnap.hosts import payload
from envsnap.hosts.agentconfig import CaptureOptions as CaptureOptions  # as ever, from here too
from envsnap.hosts.agentconfig import agent_config as agent_config
from envsnap.hosts.connect import open_transport
from envsnap.hosts.inventory import Host
from envsnap.hosts.labels import HOST, host_field, parse_template, shared_values
from envsnap.hosts.payload import AgentConfig, AgentOutput, CollectConfig
from envsnap.hosts.transport import Transport, collect_process, max_output_bytes
from envsnap.shape import is_object
from envsnap.snapshot import document as snapshot
from envsnap.snapshot.entries import write_entry
from envsnap.snapshot.mask import masking_key
from envsnap.snapshot.spec import got
from envsnap.snapshot.store import Store, label_from_name, validate_label
from envsnap.text import name_stamp, now_utc, timestamp

if TYPE_CHECKING:
    from envsnap.hosts.headstart import EarlyAgent
    from envsnap.snapshot.records import Snapshot


@dataclass(frozen=True)
class Saved:
    """A snapshot in the store, with what its reader is told (failed collectors, ...)."""

    label: str
    path: Path
    document: Snapshot
    problems: list[str]


@dataclass
class Outcome:
    """What happened to one host: a saved snapshot (maybe with problems) or an error."""

    host: Host
    label: str
    path: Path | None = None
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)   # checkouts an envsnap held: not problems
    error: str | None = None
    exit_code: int = ExitCode.HOST     # of the error: ExitCode.USAGE for a label saved meanwhile
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None and not self.problems


def plan_labels(hosts: list[Host], label: str | None, when: datetime) -> dict[str, str]:
    """host name -> label. One host takes the label as given; a fleet goes in a folder,
    unless the label is a template naming {host} (labels.py: fields rendered per host)."""
    stamp = name_stamp(when)
    if label is None:
        return distinct({host.name: f"{label_from_name(host.name)}-{stamp}" for host in hosts})
    template = parse_template(label)
    values = shared_values(template, when)
    if len(hosts) == 1 or template.uses(HOST):
        return distinct({host.name: validate_label(template.render(
            {**values, HOST: host_field(host)})) for host in hosts})
    label = validate_label(template.render(values))
    if "/" in label:
        raise UsageError(f"label {label!r}: a fleet capture makes {label}/<host>; "
                         "give a label without '/', or one with {host} in it")
    return distinct({host.name: f"{label}/{label_from_name(host.name)}" for host in hosts})


def distinct(labels: dict[str, str]) -> dict[str, str]:
    """Refuse, before anything runs on a host, hosts whose names clean up to one label
    (`gpu#1` and `gpu_1` are both gpu_1): each would overwrite the other's snapshot."""
    hosts_of: dict[str, list[str]] = {}
    for host_name, label in labels.items():
        hosts_of.setdefault(label, []).append(host_name)
    for label, names in hosts_of.items():
        if len(names) > 1:
            raise UsageError(f"hosts {', '.join(repr(name) for name in names)} would all be "
                             f"saved as {label!r}: capture them separately, each with its own "
                             "--label")
    return labels


def run_agent(transport: Transport, host: Host, config: AgentConfig, timeout: float,
              progress: Callable[[str], None] | None = None,
              early: EarlyAgent | None = None) -> AgentOutput:
    """One exec when the agent is cached on the host; otherwise upload it and exec again.
    With `progress` (long runs: bench) the agent is followed: its progress lines reach
    `progress` as they come, and it stops its work if this process goes away. `early`: the
    agent of this capture of this machine, already running with `config` (headstart.py),
    read in place of the first exec."""
    digest = payload.agent_digest()
    follow = None
    if progress is not None:
        # on use: the bench mode's module costs a capture ~70 ms of start-up to import
        from envsnap.agent.benchrun import PROGRESS_PREFIX

        config = config.copy()
        config["lifeline"] = True

        def follow(line: str) -> None:
            if line.startswith(PROGRESS_PREFIX):
                progress(line[len(PROGRESS_PREFIX):])
    warm_up()
    if early is not None:
        result = collect_process(host.name, early.take(), timeout, None, None)
    else:
        result = transport.run(payload.run_command(host.python, digest, config), timeout,
                               follow)
    if result.exit_code == payload.PAYLOAD_MISSING_EXIT:
        uploaded = payload.zip_path(digest)
        transport.put(payload.build_payload()[0], uploaded)
        result = transport.run(
            payload.install_and_run_command(host.python, digest, uploaded, config), timeout,
            follow)
    check_agent_exit(host, result.exit_code, result.stderr)
    return agent_json(host.name, result.stdout)


def warm_up() -> None:
    """Import what reading the agent's output needs while the host runs the agent: this
    process only waits then, and the secret detector's module costs a few ms (more where
    the detector grows) that need not come before the connection. The import lock makes
    agent_json wait for a half-done import, never redo it."""
    threading.Thread(target=import_readers, daemon=True).start()


def import_readers() -> None:
    import envsnap.agent.redact  # noqa: F401


def agent_json(host_name: str, output: str) -> AgentOutput:
    """What the agent printed, read. The agent marks each secret with a digest of it; here,
    before anything is written, each becomes a short hash under this user's masking key."""
    from envsnap.agent.redact import rekey  # on use, as below: see warm_up

    try:
        document = json.loads(rekey(output, masking_key()))
    except (TypeError, ValueError, RecursionError):
        raise HostError(f"{host_name}: the agent's output is not JSON: "
                        f"{str(output)[:120]!r}") from None
    return agent_shaped(host_name, document)


def agent_shaped(host_name: str, document: object) -> AgentOutput:
    """The agent's output, checked to have the outline its readers take for granted (an
    object; collectors: name -> object; agent, and bench with its server, objects where they
    are): build() and bench/run.py read it without asking again, and the schema checks the
    rest once the snapshot or the benchmark's record is built."""
    def refused(where: str, value: object) -> HostError:
        return HostError(f"{host_name}: the agent's output is refused: {where}: expected a "
                         f"mapping, got {got(value)}; nothing saved")

    if not is_object(document):
        raise refused("the document", document)
    collectors = document.get("collectors", {})
    if not is_object(collectors):
        raise refused("collectors", collectors)
    for name, result in collectors.items():
        if not is_object(result):
            raise refused(f"collectors.{name}", result)
    agent, bench = document.get("agent", {}), document.get("bench", {})
    if not is_object(agent):
        raise refused("agent", agent)
    if not is_object(bench):
        raise refused("bench", bench)
    server = bench.get("server")   # a benchmark's server, where it started one
    if server is not None and not is_object(server):
        raise refused("bench.server", server)
    return document


def check_agent_exit(host: Host, exit_code: int, stderr: str) -> None:
    if exit_code == 0:
        return
    if exit_code == ExitCode.COMMAND_NOT_FOUND:
        raise HostError(f"{host.name}: python not found on the host ({host.python!r}); "
                        "set --python or the host var python")
    from envsnap.agent.redact import redact_text  # on use, as agent_json's rekey

    # Said to the user as it came from the host: masked like all the host sends (a wrapper
    # or an activation script may print a token before the agent ever runs).
    last_line = redact_text((stderr.strip().splitlines() or [""])[-1])
    if exit_code == ExitCode.AGENT_PYTHON_TOO_OLD:
        raise HostError(f"{host.name}: {last_line} ({host.python}); set --python to a newer one")
    raise HostError(f"{host.name}: agent failed (exit {exit_code}): {last_line}")


def snapshot_document(transport: Transport, host: Host, label: str, options: CaptureOptions,
                      early: EarlyAgent | None = None) -> Snapshot:
    """Capture one host through an open transport into a document, not yet saved; with
    `early`, the host's agent already running (this machine's: headstart.py)."""
    config = early.config if early is not None else agent_config(host, options)
    captured_at = timestamp()
    output = run_agent(transport, host, config, options.collector_timeout + 30, early=early)
    return document_of(output, host.name, host.address, label, captured_at,
                       recorded_config(host, config))


def recorded_config(host: Host, config: CollectConfig) -> dict[str, Any]:
    """What was asked (--repo, --proc, --python...), as the snapshot records it: masked."""
    from envsnap.agent.redact import redact_document

    asked = {key: value for key, value in config.items() if key != "controller"}
    recorded: dict[str, Any] = redact_document({**asked, "python": host.python,
                                                "hot_paths": host.list_var("hot_paths")})
    return recorded


def document_of(output: AgentOutput, host_name: str, address: str, label: str,
                captured_at: str, recorded: dict[str, Any]) -> Snapshot:
    """The agent's read output (agent_json) as a snapshot document, not yet saved, checked
    against the schema as every load checks a file."""
    built = snapshot.build(output, label=label, host=host_name, address=address,
                           captured_at=captured_at, config=recorded)
    try:
        return snapshot.validate(built, "the agent's output")
    except SnapshotError as exc:
        raise HostError(f"{host_name}: {exc} (refused: nothing saved)") from None


def save_snapshot(store: Store, document: Snapshot, label: str, replace: bool) -> Saved:
    """Store a captured document (signed, store.py); without `replace`, a label saved by
    now is refused."""
    path = store.save(document, label, replace=replace)
    return Saved(label, path, document, snapshot.problems(document))


def capture_host(host: Host, label: str, store: Store, options: CaptureOptions,
                 early: EarlyAgent | None = None) -> Outcome:
    started = time.monotonic()
    outcome = Outcome(host=host, label=label)
    try:   # opening the transport may fail too (ansible_connection: ssh without an ssh)
        with open_transport(host, options.connect_timeout,
                            options.accept_new_host_keys) as transport:
            saved = save_snapshot(store, snapshot_document(transport, host, label, options,
                                                           early), label, replace=options.force)
        outcome.path, outcome.problems = saved.path, saved.problems
        outcome.notes = [snapshot.held_text(path, held) for path, held
                         in sorted(snapshot.held_checkouts(saved.document).items())]
    except EnvsnapError as exc:
        outcome.error = str(exc)
        outcome.exit_code = exc.exit_code
    except Exception as exc:  # a surprise on one host must not lose the fleet's snapshots
        outcome.error = f"{host.name}: {type(exc).__name__}: {exc}"
    outcome.seconds = time.monotonic() - started
    return outcome


def check_before_capture(labels: dict[str, str], store: Store, force: bool) -> None:
    """Refuse early, before anything runs on a host (the first host's handshake may have
    begun: cli/capture.py): nothing is overwritten by accident."""
    store.check_writable()
    max_output_bytes()   # a cap mistyped is said once, not once per host
    if force:
        return
    for label in labels.values():
        if store.exists(label):
            raise UsageError(f"snapshot {label!r} already exists in {store.root} "
                             "(use --force to replace it, or another --label)")


@dataclass(frozen=True)
class Retry:
    """A fleet captured again under its label: the hosts still to capture, and those whose
    snapshots the label holds already (left as they are)."""

    hosts: list[Host]
    skipped: list[str]
    labels: dict[str, str]      # the whole fleet's, as planned for it (LABEL/<host>)


def retry_of(hosts: list[Host], store: Store, options: CaptureOptions) -> Retry:
    """Like Ansible's retry: a fleet whose label holds some hosts' snapshots already captures
    only the others. One host, a fleet all of whose snapshots exist, or --force: as asked
    (check_before_capture then refuses an existing label, or --force replaces it)."""
    labels = plan_labels(hosts, options.label, now_utc())
    if options.force or options.label is None or len(hosts) < 2:
        return Retry(hosts, [], labels)
    done = [host.name for host in hosts if store.exists(labels[host.name])]
    if not done or len(done) == len(hosts):
        return Retry(hosts, [], labels)
    return Retry([host for host in hosts if host.name not in set(done)], done, labels)


def write_retry_file(store: Store, outcomes: list[Outcome]) -> Path | None:
    """The failed hosts of a fleet, one name a line, beside its folder (STORE/LABEL.retry),
    for `--limit @STORE/LABEL.retry` as Ansible's retry files are; None when nothing failed
    or the labels share no folder. StoreError when it cannot be written (what stands there
    is no regular file): the snapshots are saved all the same."""
    failed = [outcome.host.name for outcome in outcomes if not outcome.ok]
    folders = {outcome.label.split("/")[0] for outcome in outcomes if "/" in outcome.label}
    if not failed or len(folders) != 1 or any("/" not in o.label for o in outcomes):
        return None
    path = store.root / f"{folders.pop()}.retry"
    try:   # never through a link to the user's files, never waiting on a FIFO
        write_entry(path, "".join(f"{name}\n" for name in failed), mode=0o644)
    except OSError as exc:
        raise StoreError(f"cannot write {path}: {exc.strerror or exc}") from None
    return path


def capture(hosts: list[Host], store: Store, options: CaptureOptions,
            on_outcome: Callable[[Outcome], None] | None = None,
            labels: dict[str, str] | None = None,
            early: EarlyAgent | None = None) -> list[Outcome]:
    """Capture every host through at most `options.forks` workers; outcomes in host order.
    `labels`: host name -> label when planned for a larger fleet (a retry's), else planned
    here. `early`: the agent of a capture of this one machine, already running
    (headstart.agent_started_early), read by that capture; a fleet's hosts run their own."""
    planned = labels or plan_labels(hosts, options.label, now_utc())
    labels = {host.name: planned[host.name] for host in hosts}
    check_before_capture(labels, store, options.force)
    if len(hosts) == 1:   # no pool: concurrent.futures loads logging, a few ms of every capture
        outcome = capture_host(hosts[0], labels[hosts[0].name], store, options, early)
        if on_outcome:
            on_outcome(outcome)
        return [outcome]
    from concurrent.futures import ThreadPoolExecutor, as_completed

    outcomes: dict[str, Outcome] = {}
    with ThreadPoolExecutor(max_workers=max(1, options.forks)) as pool:
        futures = [pool.submit(capture_host, host, labels[host.name], store, options)
                   for host in hosts]
        for future in as_completed(futures):
            outcome = future.result()
            outcomes[outcome.host.name] = outcome
            if on_outcome:
                on_outcome(outcome)
    return [outcomes[host.name] for host in hosts]
