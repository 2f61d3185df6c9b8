"""Run a playbook on hosts: task by task across the hosts (Ansible's linear strategy), at
most `forks` hosts at once, results back as data. Nothing here prints.

Variables a task sees, lowest precedence first:
  host vars (inventory) < magic vars < play vars < registered results < extra vars (-e)
Magic vars: inventory_hostname, play_hosts, check_mode, diff_mode, playbook_dir, timestamp.
`snapshot`: wherever it is set (-e snapshot=good, play or host vars), a string names a
snapshot in the store (label or file); tasks see the loaded document, e.g.
`{{ snapshot.facts.git.repos }}`, and `snapshot_label` holds the name.

Before any host is contacted, every template's top-level names are checked against what
will be defined (a typo is one line: `x.yml:12: undefined variable 'foo'`, exit 4). A
deeper undefined (`snapshot.facts.nope`) fails the task on that host, also with file:line.
"""
from __future__ import annotations

import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any, Callable, Literal, TypedDict, Union

from envsnap.defaults import DEFAULT_CONNECT_TIMEOUT, DEFAULT_FORKS
from envsnap.errors import ArgError, EnvsnapError, ExitCode, HostError, PlaybookError, UsageError
from envsnap.hostops.gate import foreign_plan, gate, recorded_repos
from envsnap.hostops.shell import OthersCheckouts
from envsnap.hosts.connect import open_transport
from envsnap.hosts.inventory import LOCAL, Host, Inventory, limit_hosts, resolve_hosts
from envsnap.hosts.transport import Transport
from envsnap.playbook.load import LineDict, LineList, Play, Playbook, Task
from envsnap.playbook.location import Where
from envsnap.playbook.modules import MODULES
from envsnap.playbook.names import check_names
from envsnap.playbook.tasks.base import Context, ModuleResult, TaskData
from envsnap.playbook.templating import Variables, evaluate, render_string, render_text
from envsnap.snapshot import provenance
from envsnap.snapshot.store import Store
from envsnap.text import name_stamp

if TYPE_CHECKING:
    from envsnap.hostops.gate import ForeignPlan
    from envsnap.snapshot.records import Snapshot

# What became of one task on one host (Ansible's words; render.py says "skipping").
TaskStatus = Literal["ok", "changed", "skipped", "failed", "unreachable"]
FAILED: tuple[TaskStatus, ...] = ("failed", "unreachable")   # the host did not end as wanted
# What became of the whole run: see RunResult.outcome.
PlayOutcome = Literal["ok", "drift", "failed", "invalid"]

# RunResult.outcome -> exit code (errors.py's table): drift is a finding, not an error.
PLAY_EXIT_CODES: dict[PlayOutcome, int] = {"ok": ExitCode.OK, "drift": ExitCode.DRIFT,
                                           "failed": ExitCode.HOST, "invalid": ExitCode.INVALID}


class MagicVars(TypedDict):
    """What the engine defines for every task (the module docstring's magic vars)."""

    inventory_hostname: str
    play_hosts: list[str]
    check_mode: bool
    diff_mode: bool
    timestamp: str
    playbook_dir: str


@dataclass(frozen=True)
class RunOptions:
    extra_vars: Mapping[str, Any] = field(default_factory=dict)
    limit: tuple[str, ...] = ()            # host patterns; restricts every play
    check: bool = False
    diff: bool = False
    forks: int = DEFAULT_FORKS
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    accept_new_host_keys: bool = False
    trust_foreign: bool = False   # apply a snapshot this user's envsnap did not sign
    # A foreign snapshot's review (hostops/gate.py): shown, and asked when nothing settled it.
    review: Callable[[ForeignPlan], bool] | None = None
    # Documents the caller loaded and already passed through the gate (restore's), by label:
    # used as they are, never read from the store again (a file swapped after the check
    # must not be what is written).
    checked: Mapping[str, Snapshot] = field(default_factory=dict)
    # The caller's own open connection, for a run limited to its one host (restore's): used
    # for every task, and left open for the caller to close. Default: each host's own.
    connection: Transport | None = None
    # --as-root-in-others-checkouts (restore's): git tasks may move other users' checkouts,
    # with none of their configured commands (hostops/git.py); None refuses them
    others: OthersCheckouts | None = None


@dataclass
class TaskResult:
    host: str
    play: int                # index of the play in the playbook
    task: int                # index of the task in its play
    name: str
    module: str
    where: Where             # the task's file and line
    status: TaskStatus
    msg: str = ""
    diff: str = ""
    data: TaskData = field(default_factory=TaskData)   # the module's, as ModuleResult.data
    item: Any = None
    looped: bool = False
    ignored: bool = False    # failed, but the task says ignore_errors
    invalid: bool = False    # failed because of the playbook (undefined variable, bad argument)
    drift: bool = False      # failed because the host is not as expected (assert, verify)
    seconds: float = 0.0


@dataclass(frozen=True)
class PlayStarted:
    index: int
    play: Play
    hosts: list[str]


@dataclass(frozen=True)
class TaskStarted:
    play: int
    index: int
    task: Task
    hosts: list[str]


Event = Union[PlayStarted, TaskStarted, TaskResult]


@dataclass
class RunResult:
    results: list[TaskResult] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)

    def recap(self) -> dict[str, dict[str, int]]:
        counts = {host: dict.fromkeys(("ok", "changed", "unreachable", "failed", "skipped",
                                       "ignored"), 0) for host in self.hosts}
        for result in self.results:
            key = "ignored" if result.ignored else result.status
            counts[result.host][key] += 1
            counts[result.host]["ok"] += result.status == "changed"  # as Ansible counts
        return counts

    @property
    def outcome(self) -> PlayOutcome:
        """invalid (the playbook is wrong) > failed (a task or host failed) > drift > ok."""
        counted = [r for r in self.results if r.status in FAILED and not r.ignored]
        if any(r.invalid for r in counted):
            return "invalid"
        if any(not r.drift for r in counted):
            return "failed"
        return "drift" if counted else "ok"


class HostRun:
    """One host through the whole playbook: its transport, registered results, and state."""

    def __init__(self, host: Host, options: RunOptions) -> None:
        self.host = host
        self.options = options
        self.registered: dict[str, Variables] = {}
        self.play_vars: Variables = {}
        self.stopped = False
        self._opened: Transport | None = None   # by this run, on first use; closed on exit

    @property
    def transport(self) -> Transport:
        if self.options.connection is not None:
            return self.options.connection
        if self._opened is None:
            self._opened = open_transport(self.host, self.options.connect_timeout,
                                          self.options.accept_new_host_keys)
        return self._opened

    def __enter__(self) -> HostRun:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._opened is not None:
            self._opened.close()


class Runner:
    def __init__(self, playbook: Playbook, store: Store, options: RunOptions,
                 on_event: Callable[[Event], None] | None = None) -> None:
        self.playbook = playbook
        self.store = store
        self.options = options
        self.emit = on_event or (lambda event: None)
        self.timestamp = name_stamp()
        self.snapshots: dict[str, Snapshot] = dict(options.checked)
        self.extra = self.with_snapshot(dict(options.extra_vars))
        self.result = RunResult()
        self.play_hosts: list[str] = []

    # ---- variables ---------------------------------------------------------------------

    def with_snapshot(self, variables: Variables) -> Variables:
        """`snapshot: LABEL` becomes the loaded document; snapshot_label keeps the name."""
        label = variables.get("snapshot")
        if isinstance(label, str):
            if label not in self.snapshots:
                self.snapshots[label] = self.checked_provenance(label, self.store.load(label))
            variables.update(snapshot=self.snapshots[label], snapshot_label=label)
        return variables

    def checked_provenance(self, label: str, document: Snapshot) -> Snapshot:
        """A snapshot drives writes and commands on hosts: one this user's envsnap did not
        sign (a bug report's, a colleague's, one edited by hand) passes the gate: its review
        is shown, it is read freely in check mode and applied only when the user says they
        trust it, as restore does. The document checked is the one used, loaded once."""
        plan = foreign_plan(document, label, "the play's hosts",
                            provenance.verify_as_user(document),
                            repos=recorded_repos(document), pip=False, rerun=None,
                            needs_consent=not (self.options.check or self.options.trust_foreign))
        gate(plan, self.options.review, "apply it")
        return document

    def magic(self, host: Host) -> MagicVars:
        return {"inventory_hostname": host.name, "play_hosts": self.play_hosts,
                "check_mode": self.options.check,
                "diff_mode": self.options.diff, "timestamp": self.timestamp,
                "playbook_dir": str(self.playbook.base_dir)}

    def variables(self, state: HostRun) -> Variables:
        return {**self.with_snapshot(dict(state.host.vars)), **self.magic(state.host),
                **state.play_vars, **state.registered, **self.extra}

    def start_play(self, play: Play, state: HostRun) -> None:
        """Play vars in order, each seeing the ones before it; -e wins, so those are skipped."""
        state.play_vars = {}
        for name, value in play.vars.items():
            if name in self.extra:
                continue
            where = play.where(play.vars.key_lines[name])
            rendered = render_value(value, self.variables(state), where)
            state.play_vars.update(self.with_snapshot({str(name): rendered}))

    # ---- running -----------------------------------------------------------------------

    def run(self, inventory: Inventory) -> RunResult:
        plan = [(play, self.targets(play, inventory)) for play in self.playbook.plays]
        states = {host.name: HostRun(host, self.options) for _, hosts in plan for host in hosts}
        if not states:
            raise UsageError(f"{self.playbook.source}: no hosts matched "
                             f"{', '.join(p.hosts[0] for p in self.playbook.plays)}"
                             + (f" limited to {','.join(self.options.limit)}"
                                if self.options.limit else " (give -l HOST or --inventory)"))
        for state in states.values():  # a host var naming a missing snapshot: fail now
            self.with_snapshot(dict(state.host.vars))
        check_names(self.playbook, plan, self.extra, self.magic)
        self.result.hosts = list(states)
        with ExitStack() as connections:
            for state in states.values():
                connections.enter_context(state)
            with ThreadPoolExecutor(max_workers=max(1, self.options.forks)) as pool:
                for index, (play, hosts) in enumerate(plan):
                    self.run_play(index, play, [states[h.name] for h in hosts], pool)
        return self.result

    def targets(self, play: Play, inventory: Inventory) -> list[Host]:
        """The play's hosts, narrowed by --limit, an Ansible host pattern (`gpu:!n3`) as
        `ansible-playbook -l` takes it. `all` is every inventory host, or, with no
        inventory, whatever the limit names (`-l local`, `-l user@gpu-box`)."""
        limit = ",".join(self.options.limit)
        named = [pattern for pattern in limit.split(",") if pattern]
        if play.hosts == ["all"] and not inventory.given:
            return resolve_hosts(named, inventory) if named else []
        if play.hosts == ["all"]:
            # `local` is envsnap's implicit host, as `localhost` is Ansible's
            implicit = [Host(name=LOCAL)] if LOCAL in named and LOCAL not in inventory.hosts \
                else []
            hosts = [inventory.host(name) for name in sorted(inventory.hosts)] + implicit
        else:
            hosts = resolve_hosts(play.hosts, inventory)
        return limit_hosts(hosts, inventory, limit)[0] if limit else hosts

    def start_play_or_stop(self, index: int, play: Play, state: HostRun) -> None:
        try:
            self.start_play(play, state)
        except PlaybookError as exc:
            state.stopped = True
            result = TaskResult(host=state.host.name, play=index, task=-1, name="play vars",
                                module="vars", where=play.where(),
                                status="failed", msg=str(exc), invalid=True)
            self.result.results.append(result)
            self.emit(result)

    def run_play(self, index: int, play: Play, states: list[HostRun],
                 pool: ThreadPoolExecutor) -> None:
        active = [state for state in states if not state.stopped]
        self.play_hosts = [state.host.name for state in active]
        self.emit(PlayStarted(index, play, self.play_hosts))
        for state in active:
            self.start_play_or_stop(index, play, state)
        for number, task in enumerate(play.tasks):
            active = [state for state in active if not state.stopped]
            if not active:
                return
            self.emit(TaskStarted(index, number, task, [state.host.name for state in active]))
            batches = pool.map(partial(self.run_task, index, number, task), active)
            for batch in list(batches):
                for result in batch:
                    self.result.results.append(result)
                    self.emit(result)

    def run_task(self, play: int, number: int, task: Task, state: HostRun) -> list[TaskResult]:
        base = TaskResult(host=state.host.name, play=play, task=number, name=task.name,
                          module=task.module, where=task.where(), status="ok")
        try:
            results = self.run_items(task, state, base)
        except PlaybookError as exc:
            results = [replace(base, status="failed", msg=str(exc), invalid=True)]
        except HostError as exc:
            results = [replace(base, status="unreachable", msg=str(exc))]
        if task.register:
            state.registered[task.register] = registered(task, results)
        if any(r.status == "unreachable" or (r.status == "failed" and not r.ignored)
               for r in results):
            state.stopped = True
        return results

    def run_items(self, task: Task, state: HostRun, base: TaskResult) -> list[TaskResult]:
        variables = self.variables(state)
        if task.loop is None:
            return [self.run_item(task, state, variables, base)]
        items = render_value(task.loop, variables, task.where("loop"))
        if not isinstance(items, list):
            raise PlaybookError(f"{task.where('loop')}: loop needs a list, got "
                                f"{type(items).__name__} (a mapping? use | dict2items)")
        if not items:
            return [replace(base, status="skipped", msg="no items to loop over")]
        return [self.run_item(task, state, {**variables, "item": item},
                              replace(base, item=item, looped=True)) for item in items]

    def run_item(self, task: Task, state: HostRun, variables: Variables,
                 base: TaskResult) -> TaskResult:
        started = time.monotonic()
        if task.when is not None and not evaluate(task.when, variables, task.where("when")):
            return replace(base, status="skipped", msg=f"condition false: {task.when}")
        module = MODULES[task.module]
        where = task.args_where
        try:
            args = module.normalize(render_value(task.args, variables, where))
            outcome = module.run(self.context(task, state, variables), args)
        except ArgError as exc:
            raise PlaybookError(f"{where}: {exc}") from None
        except (PlaybookError, HostError):
            raise
        except EnvsnapError as exc:  # e.g. the store refused a capture: this task failed
            outcome = ModuleResult(failed=True, msg=str(exc))
        except Exception as exc:  # a surprise on one host must not lose the others' results
            outcome = ModuleResult(failed=True, msg=f"{type(exc).__name__}: {exc}")
        outcome = self.judged(task, outcome, variables)
        return finished(base, outcome, task, time.monotonic() - started)

    def context(self, task: Task, state: HostRun, variables: Variables) -> Context:
        check = self.options.check and task.check_mode is not False
        where = task.args_where
        return Context(host=state.host, transport=state.transport, store=self.store,
                       check=check, diff=self.options.diff, base_dir=self.playbook.base_dir,
                       timestamp=self.timestamp, others=self.options.others,
                       template=lambda text: str(render_text(text, variables, where)))

    def judged(self, task: Task, outcome: ModuleResult,
               variables: Variables) -> ModuleResult:
        """changed_when / failed_when, seeing the result as `result` (and its register name)."""
        if task.changed_when is None and task.failed_when is None:
            return outcome
        seen = {**variables, "result": outcome.as_dict()}
        if task.register:
            seen[task.register] = outcome.as_dict()
        if task.changed_when is not None:
            outcome.changed = evaluate(task.changed_when, seen, task.where("changed_when"))
        if task.failed_when is not None:
            outcome.failed = evaluate(task.failed_when, seen, task.where("failed_when"))
        return outcome


def finished(base: TaskResult, outcome: ModuleResult, task: Task, seconds: float) -> TaskResult:
    status: TaskStatus = ("failed" if outcome.failed else "skipped" if outcome.skipped
                          else "changed" if outcome.changed else "ok")
    return replace(base, status=status, msg=outcome.msg, diff=outcome.diff, data=outcome.data,
                   drift=outcome.drift, ignored=outcome.failed and task.ignore_errors,
                   seconds=seconds)


def registered(task: Task, results: list[TaskResult]) -> Variables:
    """What `register` keeps: the module's data with the outcome beside it, as a template
    reads it (`result.changed`); a looped task's has `results`, one such per item."""
    def one(result: TaskResult) -> Variables:
        return {**result.data, "changed": result.status == "changed",
                "failed": result.status in FAILED,
                "skipped": result.status == "skipped", "msg": result.msg, "diff": result.diff,
                **({"item": result.item} if result.looped else {})}
    if not results[0].looped:  # no loop, or the loop itself could not be rendered
        return one(results[0])
    each = [one(result) for result in results]
    return {"results": each, "changed": any(r["changed"] for r in each),
            "failed": any(r["failed"] for r in each),
            "skipped": bool(each) and all(r["skipped"] for r in each),
            "msg": "; ".join(r["msg"] for r in each if r["msg"])}


def render_value(value: object, variables: Mapping[str, Any], where: Where) -> Any:
    """Strings rendered, mappings and lists walked (as the loader built them: load.py),
    each string reporting its own line."""
    if isinstance(value, str):
        return render_string(value, variables, where)
    if isinstance(value, LineDict):
        lines = value.key_lines
        return {key: render_value(item, variables, where.at(lines[key]) if key in lines else where)
                for key, item in value.items()}
    if isinstance(value, list):
        at: list[int | None] = list(value.item_lines) if isinstance(value, LineList) else []
        return [render_value(item, variables, where.at(line) if line else where)
                for item, line in zip(value, at or [None] * len(value))]
    return value


def run_playbook(playbook: Playbook, inventory: Inventory, store: Store, options: RunOptions,
                 on_event: Callable[[Event], None] | None = None) -> RunResult:
    """The library's entry point: raises PlaybookError/UsageError before any host is touched
    if the playbook cannot run; otherwise every outcome is in the RunResult."""
    return Runner(playbook, store, options, on_event).run(inventory)
