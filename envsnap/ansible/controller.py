"""The controller's half of the Ansible collection envsnap.gpu (envsnap/ansible/collection/).

The collection's action plugins run inside ansible-playbook on the controller and call this
module: it checks a task's options, plans labels as `envsnap capture` does, turns the agent's
output (returned by the module from the host) into the same snapshot document and saves it
in the store, and judges envsnap_assert's gates. It knows nothing of Ansible: the plugins
hand it plain values and report its one-line errors as the task's failure message. A task's
options (`TaskArgs`) are what the playbook's author wrote, any value until the reader of
each option checks it.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from envsnap.defaults import DEFAULT_COLLECTOR_TIMEOUT, DEFAULT_STORE
from envsnap.diff.compare import diff
from envsnap.diff.fleet import HOST_UNIQUE
from envsnap.diff.render_text import change_text, where_text
from envsnap.errors import UsageError
from envsnap.hosts.capture import (
    CaptureOptions,
    Saved,
    agent_config,
    agent_json,
    document_of,
    plan_labels,
    recorded_config,
    save_snapshot,
)
from envsnap.hosts.inventory import Host, check_proc_patterns, inventory_bool, name_list
from envsnap.hosts.inventory_graph import Vars
from envsnap.hosts.payload import CollectConfig
from envsnap.hosts.transport import max_output_bytes, output_refused
from envsnap.snapshot import document as snapshot
from envsnap.snapshot.provenance import verify_as_user
from envsnap.snapshot.store import Store
from envsnap.text import now_utc, plural, timestamp

if TYPE_CHECKING:
    from envsnap.snapshot.records import Snapshot

STORE_VARIABLE = "ENVSNAP_STORE"
# What the agent is asked, as `envsnap capture` asks it (its --repo, --proc, --python...).
AGENT_OPTIONS = ("repos", "procs", "hot_paths", "python", "collector_timeout",
                 "max_patch_bytes", "history")
CAPTURE_OPTIONS = ("label", "store", "force", *AGENT_OPTIONS)
GATES = ("driver", "nccl", "clocks_not_throttled", "baseline")
ASSERT_OPTIONS = (*GATES, "store", *AGENT_OPTIONS)
# Clock event reasons that say nothing against a benchmark: an idle GPU, clocks an admin set.
HARMLESS_CLOCK_EVENTS = frozenset({"gpu_idle", "applications_clocks_setting",
                                   "display_clocks_setting"})
DRIFT_SHOWN = 10   # facts named in a failed baseline gate, a line each; the rest counted
TaskArgs = Mapping[str, object]


@dataclass(frozen=True)
class HostSeen:
    """The host as Ansible knows it: its inventory name and where it connects."""

    name: str
    address: str
    interpreter: str | None    # ansible_python_interpreter, when the inventory sets one


@dataclass(frozen=True)
class AgentRun:
    """How the agent runs on one host: its config, and the python the module runs under
    (None: Ansible's own choice of interpreter)."""

    config: CollectConfig
    python: str | None
    recorded: dict[str, Any]   # what was asked, written into the snapshot's meta (masked)


@dataclass(frozen=True)
class CaptureRequest:
    label: str
    store: Store
    force: bool
    agent: AgentRun


@dataclass(frozen=True)
class GateFailure:
    """A failed gate: its line ("baseline: 2 facts drifted from 'good'"), and for the
    baseline gate one line per fact ("env shell.NCCL_PROTO: LL -> (absent)")."""

    line: str
    facts: tuple[str, ...] = ()


@dataclass(frozen=True)
class AssertRequest:
    driver: str | None
    nccl: str | None
    clocks_not_throttled: bool
    baseline: Snapshot | None
    baseline_name: str | None
    agent: AgentRun


def check_known(args: TaskArgs, known: tuple[str, ...], module: str) -> None:
    unknown = sorted(set(args) - set(known))
    if unknown:
        raise UsageError(f"{module}: unsupported option(s) {', '.join(unknown)} "
                         f"(known: {', '.join(sorted(known))})")


def optional_text(args: TaskArgs, name: str) -> str | None:
    value = args.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        raise UsageError(f"{name} must be a string, not {value!r}")
    return str(value)


def optional_number(args: TaskArgs, name: str, integer: bool) -> float | None:
    value = args.get(name)
    if value is None:
        return None
    number: float = -1
    if isinstance(value, (int, float, str)):   # anything else is no number (below)
        try:
            number = int(value) if integer else float(value)
        except ValueError:
            pass
    if isinstance(value, bool) or number <= 0:
        kind = "a whole number" if integer else "a number"
        raise UsageError(f"{name} must be {kind} above 0, not {value!r}")
    return number


def agent_run(args: TaskArgs, host: HostSeen) -> AgentRun:
    """The agent's config from a task's options, built by capture's own agent_config."""
    python = optional_text(args, "python")
    host_vars: Vars = {"repos": name_list(args.get("repos"), "repos"),
                 "procs": name_list(args.get("procs"), "procs"),
                 "hot_paths": name_list(args.get("hot_paths"), "hot_paths"),
                 "python": python or host.interpreter}
    check_proc_patterns(host_vars["procs"], "procs")
    timeout = optional_number(args, "collector_timeout", integer=False)
    patch = optional_number(args, "max_patch_bytes", integer=True)
    history = optional_number(args, "history", integer=True)
    options = CaptureOptions(
        collector_timeout=DEFAULT_COLLECTOR_TIMEOUT if timeout is None else timeout,
        max_patch_bytes=None if patch is None else int(patch),
        history=None if history is None else int(history))
    seen = Host(name=host.name, address=host.address or host.name, vars=host_vars)
    config = agent_config(seen, options)
    return AgentRun(config=config, python=python, recorded=recorded_config(seen, config))


def store_of(args: TaskArgs, environ: Mapping[str, str]) -> Store:
    """`store`, else $ENVSNAP_STORE, else ./snapshots: where `envsnap capture` would write."""
    return Store(optional_text(args, "store") or environ.get(STORE_VARIABLE) or DEFAULT_STORE)


def capture_request(args: TaskArgs, host: HostSeen, play_hosts: list[str],
                    environ: Mapping[str, str]) -> CaptureRequest:
    """A capture task's options checked, and this host's label planned as `envsnap capture`
    plans a fleet's: LABEL for a play of one host, LABEL/<host> for a play of several."""
    check_known(args, CAPTURE_OPTIONS, "envsnap_capture")
    label = optional_text(args, "label")
    hosts = [Host(name=name) for name in (play_hosts or [host.name])]
    if host.name not in {each.name for each in hosts}:
        hosts.append(Host(name=host.name))
    planned = plan_labels(hosts, label, now_utc())[host.name]
    force = inventory_bool(args.get("force", False), "force")
    store = store_of(args, environ)
    store.check_writable()
    if not force and store.exists(planned):
        raise UsageError(f"snapshot {planned!r} already exists in {store.root} "
                         "(force: true replaces it, or another label)")
    return CaptureRequest(label=planned, store=store, force=force,
                          agent=agent_run(args, host))


def document_from(agent_output: str, host: HostSeen, label: str, captured_at: str,
                  agent: AgentRun) -> Snapshot:
    """The module's result (the agent's JSON text) -> a snapshot document, read and built
    as the SSH path does it (hosts/capture.py), under the same cap on its size (Ansible has
    read it by now; envsnap parses no more of it than of a host's output over SSH)."""
    limit = max_output_bytes()
    if len(agent_output) > limit:
        raise output_refused(host.name, limit)
    return document_of(agent_json(host.name, agent_output), host.name, host.address, label,
                       captured_at, agent.recorded)


def save_capture(request: CaptureRequest, agent_output: str, host: HostSeen,
                 captured_at: str) -> Saved:
    document = document_from(agent_output, host, request.label, captured_at, request.agent)
    return save_snapshot(request.store, document, request.label, replace=request.force)


def capture_time() -> str:
    """The action plugins' clock: when the module's result reached the controller."""
    return timestamp()


# ---- envsnap_assert ------------------------------------------------------------------------

def assert_request(args: TaskArgs, host: HostSeen,
                   environ: Mapping[str, str]) -> AssertRequest:
    check_known(args, ASSERT_OPTIONS, "envsnap_assert")
    if not any(args.get(gate) not in (None, "", False) for gate in GATES):
        raise UsageError(f"envsnap_assert: no gate given (one or more of {', '.join(GATES)})")
    baseline_name = optional_text(args, "baseline")
    baseline = None
    agent_args = dict(args)
    if baseline_name is not None:
        baseline = store_of(args, environ).load(baseline_name)
        agent_args = {**baseline_options(baseline), **args}
    return AssertRequest(driver=optional_text(args, "driver"), nccl=optional_text(args, "nccl"),
                         clocks_not_throttled=inventory_bool(
                             args.get("clocks_not_throttled", False), "clocks_not_throttled"),
                         baseline=baseline, baseline_name=baseline_name,
                         agent=agent_run(agent_args, host))


def baseline_options(baseline: Snapshot) -> dict[str, list[str]]:
    """The repos and processes the known-good snapshot recorded, so the host is captured as
    it was. Only from a snapshot this user made (signed with their key): a stranger's names
    paths and patterns that are data, not something to run on the host unasked."""
    if not verify_as_user(baseline).mine:
        return {}
    recorded = snapshot.capture_config(baseline)
    return {name: paths for name, paths in (("repos", recorded.get("repos", [])),
                                            ("procs", recorded.get("procs", []))) if paths}


def version_matches(found: str, wanted: str) -> bool:
    """`580` or `580.159` asks for any 580.x or 580.159.x; `580.159.04` for exactly that."""
    return found == wanted or found.startswith(wanted + ".")


def driver_failure(document: Snapshot, wanted: str) -> str | None:
    found = snapshot.nvidia(document).get("driver")
    if not found:
        why = snapshot.collector_error(document, "nvidia") or "no NVIDIA driver found"
        return f"driver: {wanted} required, {why}"
    if not version_matches(str(found), wanted):
        return f"driver: {wanted} required, found {found}"
    return None


def nccl_versions(document: Snapshot) -> dict[str, str]:
    """Where an NCCL was found -> its version. PyTorch's own NCCL is the one a job loads,
    so when it is recorded it is the only one that counts."""
    nccl = snapshot.cuda_nccl(document).get("nccl", {})
    torch = nccl.get("torch")
    if torch and torch.get("version"):
        return {"torch": str(torch["version"])}
    found = {}
    for entries in (nccl.get("libraries", {}), nccl.get("wheels", {})):
        for where, entry in entries.items():
            if entry.get("version"):
                found[where] = str(entry["version"])
    return found


def nccl_failure(document: Snapshot, wanted: str) -> str | None:
    found = nccl_versions(document)
    if not found:
        return f"nccl: {wanted} required, no NCCL found"
    wrong = {where: version for where, version in found.items()
             if not version_matches(version, wanted)}
    if wrong:
        return f"nccl: {wanted} required, found " + ", ".join(
            f"{version} ({where})" for where, version in sorted(wrong.items()))
    return None


def clocks_failure(document: Snapshot) -> str | None:
    gpus = document.get("volatile", {}).get("nvidia", {}).get("gpus", {})
    if not gpus:
        why = snapshot.collector_error(document, "nvidia") or "no GPU clock readings"
        return f"clocks_not_throttled: {why}"
    throttled = []
    for bus_id in sorted(gpus):
        reasons = gpus[bus_id].get("clock_event_reasons")
        if not isinstance(reasons, list):   # not read: null, or {"error": why}
            throttled.append(f"GPU {bus_id} reports no clock event reasons")
            continue
        bad = [str(reason) for reason in reasons if reason not in HARMLESS_CLOCK_EVENTS]
        if bad:
            throttled.append(f"GPU {bus_id} {'+'.join(bad)}")
    return f"clocks_not_throttled: {'; '.join(throttled)}" if throttled else None


def drift_failure(document: Snapshot, baseline: Snapshot,
                  name: str) -> GateFailure | None:
    """Facts that differ from the known-good snapshot, as `envsnap diff` finds them, less
    those unique to each machine by nature (hostname, uuids, boot id: fleet.HOST_UNIQUE).
    Each fact is one short line in the diff's notation (render_text: where_text, long keys
    keeping both ends; change_text, values cut where they differ, a record summarised, a
    side without a value "(absent)"), never a repr."""
    findings = [finding for finding in diff(baseline, document, sources=(name, "")).findings
                if not finding.volatile and not HOST_UNIQUE.intersection(finding.path)]
    if not findings:
        return None
    facts = tuple(f"{f.section} {where_text(f)}: {change_text(f)}"
                  for f in findings[:DRIFT_SHOWN])
    more = f" (the first {DRIFT_SHOWN} below; envsnap diff names every one)" \
        if len(findings) > DRIFT_SHOWN else ""
    return GateFailure(f"baseline: {plural(len(findings), 'fact')} drifted from {name!r}{more}",
                       facts)


def gate_failures(request: AssertRequest, document: Snapshot) -> list[GateFailure]:
    """Each gate that failed, in the order the gates are documented."""
    checks = [gate_line(driver_failure(document, request.driver)) if request.driver else None,
              gate_line(nccl_failure(document, request.nccl)) if request.nccl else None,
              gate_line(clocks_failure(document)) if request.clocks_not_throttled else None,
              drift_failure(document, request.baseline, request.baseline_name or "baseline")
              if request.baseline is not None else None]
    return [failure for failure in checks if failure is not None]


def gate_line(line: str | None) -> GateFailure | None:
    return None if line is None else GateFailure(line)


def failed_message(host: str, failures: list[GateFailure]) -> str:
    """The task's message: one line saying how many gates failed, then one line per gate
    and one per drifted fact under it (Ansible prints each line of a failure as it is)."""
    lines = [f"envsnap_assert: {plural(len(failures), 'gate')} failed on {host}"]
    for failure in failures:
        lines += [failure.line, *(f"  {fact}" for fact in failure.facts)]
    return "\n".join(lines)
