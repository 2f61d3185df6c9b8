"""Which differences between a good snapshot and the host now make the benchmark slower.

    snapshots, host, checkouts            (refused before anything changes: unknown labels,
                                           a foreign snapshot without --trust-foreign)
      -> the checkouts' restore locks; the host captured now; another host refused unless
         --force-host (hostops.hostrule, as for restore); GOOD's commits must be in the checkouts
      -> the differences envsnap can put back (differences.py), a patch that only applies
         on the new commits joined to them; nothing to put back: refused
      -> the plan and the worst-case number of benchmark invocations, approved by the user
      -> the search (search.py): each trial puts a set of differences in place (apply.py:
         GOOD's state plus those) and runs the benchmark there (bench.run.bench_on, with
         the env differences in BenchSpec.env or ServeSpec.env)
      -> causes, interactions, what had no effect, what the noise left open
      -> the checkouts, their branches, the user's work and stashes put back, whatever
         happened (tree.Tree), the locks released.

Library code: never prints; progress reaches the CLI through `on_event`.
"""
from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable, Union

from envsnap.bench import stats as benchstats
from envsnap.bench.run import BenchSpec, bench_on
from envsnap.bisect.inputs import commit_here, describe_head, find_toplevel, matches, pick_host
from envsnap.bisect.journal import Journal, Record
from envsnap.bisect.run import (
    Answered,
    BisectOptions,
    Bisector,
    BisectReport,
    RunEnded,
    Step,
    locked_bisect,
    put_back_journaled,
    put_back_line,
)
from envsnap.bisect.run import Said as BisectSaid
from envsnap.bisect.run import journal_record as bisect_journal_record
from envsnap.errors import BenchError, HostError, Interrupted, PutBackError, UsageError
from envsnap.explain.apply import PipPins, SiteFile, StartupFiles, State, StateTree, state_for
from envsnap.explain.differences import Difference, Differences, find_differences
from envsnap.explain.search import (
    MAX_REMEASURES,
    Explanation,
    explain,
    worst_case_invocations,
)
from envsnap.hostops import hostrule
from envsnap.hostops import site as sitecustomize
from envsnap.hostops.gate import ForeignPlan, endpoint_plan, gate
from envsnap.hostops.git import GitFailure, run
from envsnap.hostops.hostwide import HostWideRefused
from envsnap.hostops.locks import CheckoutLocks
from envsnap.hostops.patch import Patch, check_on_commit
from envsnap.hostops.shell import HostShell, OthersCheckouts, Shell
from envsnap.hosts import capture
from envsnap.hosts.capture import CaptureOptions
from envsnap.hosts.connect import open_transport
from envsnap.hosts.inventory import Host, Inventory, with_vars
from envsnap.snapshot import document as snap
from envsnap.snapshot import provenance
from envsnap.snapshot.store import Store
from envsnap.text import plural
from envsnap.verdicts import REGRESSION

if TYPE_CHECKING:
    from envsnap.snapshot.records import Snapshot


@dataclass(frozen=True)
class ExplainOptions:
    # --as-root-in-others-checkouts: may move another user's checkout (hostops/git.py)
    others_checkouts: bool = False
    repos: tuple[str, ...] = ()       # --repo: the checkouts (default: all GOOD and BAD share)
    force_host: bool = False
    trust_foreign: bool = False
    keep_untracked: bool = False      # leave untracked files in the checkouts (bench scripts)
    pip: bool = False                 # search changed package versions too (pip pins them)
    host_wide: bool = False           # --host-wide: may switch a sitecustomize every python loads
    max_invocations: int | None = None   # the ceiling (default: default_ceiling(n))
    capture: CaptureOptions = field(default_factory=CaptureOptions)


@dataclass(frozen=True)
class Plan:
    """What the user approves before anything changes."""

    host: str
    labels: tuple[str, str]
    differences: Differences
    worst_case: int                   # benchmark invocations for one cause
    worst_case_two: int               # ... and for two
    ceiling: int                      # never more, whatever the noise: the rest undecided
    repeat: int                       # runs per invocation


@dataclass(frozen=True)
class Measured:
    """One benchmark invocation ended at a state: the differences in place, its values."""

    applied: frozenset[int]
    values: list[float]


Event = Union[str, RunEnded, Measured, Step]   # Step: bisect narrowing a commit range


@dataclass
class ExplainReport:
    plan: Plan
    explanation: Explanation | None = None   # None: the user said no, nothing ran
    endpoints: benchstats.Comparison | None = None
    leftovers: list[str] = field(default_factory=list)
    narrowed: BisectReport | None = None     # a commit range that is a cause, bisected

    @property
    def regression(self) -> bool:
        """GOOD's state is better than the host now for real (whether explained or not)."""
        return self.endpoints is not None and \
            self.endpoints["verdict"] == REGRESSION


@dataclass(frozen=True)
class Answer:
    """The answer, complete, given before the host is put back (and the journal's last
    record): printed by the CLI as it comes."""

    report: ExplainReport


Said = Union[Event, Answer]   # what explain tells its caller: its events, then its answer


def explain_run(store: Store, inventory: Inventory, labels: tuple[str, str], host: str | None,
                spec: BenchSpec, options: ExplainOptions, confirm: Callable[[Plan], bool],
                on_event: Callable[[Said], None] | None = None,
                review: Callable[[ForeignPlan], bool] | None = None) -> ExplainReport:
    """Find the smallest sets of differences that turn GOOD's state into the slow one.
    A foreign snapshot passes the gate first (hostops/gate.py: `review` sees it)."""
    spec.check()
    emit = on_event or (lambda _: None)
    good, bad = store.load(labels[0]), store.load(labels[1])
    for document, label in zip((good, bad), labels):
        snap.refuse_partial(document, label, "explain")
    paths = pick_repos(good, bad, options.repos, labels)
    target = pick_host(bad, inventory, host)
    gate(good_plan(good, labels[0], target.name, paths, spec, options), review,
         "explain with it")
    gate(endpoint_plan(bad, labels[1], target.name, provenance.verify_as_user(bad),
                       doing="explaining with it (as BAD)",
                       needs_consent=not options.trust_foreign, python=host is None),
         review, "explain with it")
    journal = Journal.at(store.root, "explain", labels)
    emit = journal.recording(emit, journal_record)
    try:
        with open_transport(target, options.capture.connect_timeout,
                            options.capture.accept_new_host_keys) as transport, \
                CheckoutLocks(transport, target, paths, wait_hint=""), \
                put_back_journaled(journal):
            shell = HostShell(target, transport, others=OthersCheckouts()
                              if options.others_checkouts else None)
            return Explainer(shell, spec, labels, emit).run(
                good, bad, paths, host is not None, options,
                journal_on_start(confirm, journal, emit))
    except GitFailure as exc:
        raise HostError(str(exc)) from None
    except KeyboardInterrupt:   # each checkout and file was put back on the way out (apply.py)
        raise Interrupted(put_back_line(target.name, ", ".join(paths) or "the python",
                                        "explain")) from None


def journal_on_start(confirm: Callable[[Plan], bool], journal: Journal,
                     emit: Callable[[Said], None]) -> Callable[[Plan], bool]:
    """`confirm`, and once the plan is approved the journal started, with the differences
    its trials' numbers refer to (1 is the first)."""
    def approved(plan: Plan) -> bool:
        if not confirm(plan):
            return False
        said = journal.start()
        journal.write("plan", host=plan.host, ceiling=plan.ceiling, repeat=plan.repeat,
                      differences=[item.masked().describe()
                                   for item in plan.differences.items])
        emit(said)
        return True
    return approved


def journal_record(event: Said) -> Record:
    """What the journal keeps: each trial as it is measured (the differences in place, by
    number; the runs), the bisect of a commit range's steps, then the answer."""
    if isinstance(event, Measured):
        return "trial", {"differences": sorted(index + 1 for index in event.applied),
                         "values": event.values}
    if isinstance(event, Answer):
        explanation = event.report.explanation
        if explanation is None:
            return None
        return "answer", {
            "outcome": str(explanation.outcome),
            "causes": [sorted(index + 1 for index in cause) for cause in explanation.causes],
            "undecided": sorted(index + 1 for index in explanation.unexplained),
            "good": explanation.good, "bad": explanation.bad,
            "first_bad": (event.report.narrowed.first_bad.sha if event.report.narrowed
                          and event.report.narrowed.first_bad else None)}
    if isinstance(event, (Step, RunEnded)):   # a run: held until its trial's record
        return bisect_journal_record(event)
    return None


def default_ceiling(n: int) -> int:
    """Two causes with every trial measured as often as the noise may ask, and as many again
    for GOOD measured to follow a drifting machine: a budget the user can plan for, even
    when endpoints that differ by chance send the search hunting."""
    return (2 + MAX_REMEASURES) * worst_case_invocations(n, min(2, n))


def good_plan(good: Snapshot, label: str, host: str, paths: list[str], spec: BenchSpec,
              options: ExplainOptions) -> ForeignPlan:
    """All explain may put in place from GOOD: its commits and patches, sitecustomize and
    .pth startup lines, its server's (with --serve) or shell's env, its packages (--pip)."""
    recorded = snap.recorded_server_env(good) if spec.serve is not None else {}
    env = recorded or {name: value for name, value in snap.env(good).get("shell", {}).items()
                       if isinstance(value, str)}
    pins = [f"pip install --no-deps {name}=={version}"
            for name, version in sorted(snap.packages(good).items())
            if options.pip and isinstance(version, str)]
    return endpoint_plan(good, label, host, provenance.verify_as_user(good),
                         doing="explaining with it (as GOOD)",
                         needs_consent=not options.trust_foreign, repos=paths, patches=True,
                         startup=True, env=env, commands=pins, host_wide=options.host_wide)


def pick_repos(good: Snapshot, bad: Snapshot, wanted: tuple[str, ...],
               labels: tuple[str, str]) -> list[str]:
    """The checkouts, as GOOD recorded them: --repo, else every one both snapshots hold
    (none: only the env and the python's differences are searched)."""
    recorded = snap.repos_with_head(good)
    if not wanted:
        return sorted(set(recorded) & set(snap.repos(bad)))
    paths = []
    for path in wanted:
        key = next((key for key, repo in recorded.items() if matches(path, key, repo)), None)
        if key is None:
            raise UsageError(f"--repo {path}: snapshot {labels[0]!r} recorded no HEAD there")
        paths.append(key)
    return sorted(set(paths))


class Explainer:
    """One explain on one host, inside its checkouts' locks."""

    def __init__(self, shell: Shell, spec: BenchSpec, labels: tuple[str, str],
                 emit: Callable[[Said], None]) -> None:
        self.shell, self.spec, self.labels, self.emit = shell, spec, labels, emit
        self.host_wide = False
        self.answered = False   # the answer went out (Answer): never twice

    def run(self, good: Snapshot, bad: Snapshot, paths: list[str],
            host_given: bool, options: ExplainOptions,
            confirm: Callable[[Plan], bool]) -> ExplainReport:
        live = self.capture_now(paths, options.capture)
        hostrule.check_same_host(good, live, host_given, options.force_host, "explain")
        tops = {path: find_toplevel(self.shell, path) for path in paths}
        counts = {path: self.commits_between(tops[path], good, path) for path in paths}
        found = find_differences(good, bad, live, paths, counts, self.spec.serve is not None,
                                 self.labels, options.pip)
        self.join_inseparable(found, tops)
        if not found.items:
            left = f" ({'; '.join(found.not_searched)})" if found.not_searched else ""
            raise UsageError(f"nothing that explain can put back differs between "
                             f"{self.labels[0]!r} and {self.shell.host.name} now{left}")
        self.check_startup(found, options.host_wide)
        n = len(found.items)
        plan = Plan(self.shell.host.name, self.labels, found, worst_case_invocations(n, 1),
                    worst_case_invocations(n, min(2, n)),
                    options.max_invocations or default_ceiling(n), self.spec.repeat)
        report = ExplainReport(plan)
        if not confirm(plan):
            return report
        trees: list[StateTree] = []
        try:
            with ExitStack() as stack:
                trees += [StateTree(self.shell, tops[ends.path],
                                    self.stash_message(tops[ends.path]), self.emit,
                                    options.keep_untracked) for ends in found.repos]
                for tree in trees:
                    stack.enter_context(tree)
                site = stack.enter_context(SiteFile(self.shell, self.emit, options.host_wide))
                pth = stack.enter_context(StartupFiles(self.shell, self.emit,
                                                        options.host_wide))
                pins = stack.enter_context(PipPins(self.shell, installed(found), self.emit))
                report.explanation = explain(
                    n, lambda applied: self.measure(found, trees, (site, pth, pins), applied),
                    self.spec.lower_is_better, plan.ceiling)
                self.answer_first(report, trees)
        except (HostError, GitFailure) as exc:
            raise self.failed_after_search(report, exc, report.explanation is not None) \
                from None
        report.leftovers = [stash for tree in trees for stash in tree.leftovers]
        explanation = report.explanation
        assert explanation is not None
        try:
            report.narrowed = self.narrow(found, explanation, tops, options.keep_untracked,
                                          report)
        except (HostError, GitFailure) as exc:
            raise self.failed_after_search(report, exc, report.narrowed is not None) from None
        if report.narrowed is not None:
            report.leftovers += report.narrowed.leftovers
        if not self.answered:
            self.answer(report)
        return report

    # ---- the answer first, the put-back after ----

    def answer_first(self, report: ExplainReport, trees: list[StateTree]) -> None:
        """The search's answer, given before anything is put back (nothing it found is lost
        to a put-back that fails); when a commit range is to be bisected, its bisect gives
        the answer, with its first bad commit, before its own put-back."""
        explanation = report.explanation
        assert explanation is not None
        report.leftovers = [stash for tree in trees for stash in tree.leftovers]
        report.endpoints = benchstats.compare(explanation.good, explanation.bad,
                                              self.spec.lower_is_better)
        if self.range_to_bisect(report.plan.differences, explanation) is None:
            self.answer(report)

    def answer(self, report: ExplainReport) -> None:
        self.answered = True
        self.emit(Answer(report))

    def failed_after_search(self, report: ExplainReport, exc: HostError | GitFailure,
                            put_back: bool) -> HostError:
        """An error once the search has its answer: the answer is given first, whatever
        failed. One raised while putting the host back after a complete run (`put_back`) is
        a PutBackError, with its own exit code; any other is what it was."""
        error = exc if isinstance(exc, HostError) else HostError(str(exc))
        if report.explanation is None:
            return error
        if not self.answered:
            self.answer(report)
        if put_back and not isinstance(error, PutBackError):
            return PutBackError(str(error))
        return error

    def range_to_bisect(self, found: Differences,
                        explanation: Explanation) -> Difference | None:
        """A commit range that alone is a cause, of more than one commit, that bisect can
        narrow: with one checkout (bisect moves one) and a patch that does not need it."""
        ranges = [found.items[index] for cause in explanation.causes if len(cause) == 1
                  for index in cause if found.items[index].kind == "commits"]
        if not ranges or len(found.repos) != 1 or ranges[0].with_patch \
                or ranges[0].commits < 2:
            return None
        return ranges[0]

    def narrow(self, found: Differences, explanation: Explanation, tops: dict[str, str],
               keep_untracked: bool, report: ExplainReport) -> BisectReport | None:
        """A commit range that alone is a cause, of more than one commit (range_to_bisect),
        bisected at GOOD's state otherwise (its patch, its env), GOOD's runs the baseline:
        which commit. Its answer completes explain's, given before its own put-back."""
        host_wide = self.host_wide
        commits = self.range_to_bisect(found, explanation)
        if commits is None:
            return None
        ends = found.repos[0]
        good = state_for(found, frozenset())
        spec = self.spec_at(good)

        def relay(event: BisectSaid) -> None:
            if isinstance(event, Answered):   # explain's answer, with the first bad commit
                report.narrowed = event.report
                self.answer(report)
            else:
                self.emit(event)

        # its own ends, measured again during its steps: explain's runs at GOOD's state
        # are as old as the search, and a drifting machine has moved since
        bisector = Bisector(spec, BisectOptions(keep_untracked=keep_untracked), None, relay)
        self.emit(f"{ends.path}: bisect the {commits.commits} commits at GOOD's state")
        try:
            with SiteFile(self.shell, self.emit, host_wide) as site, \
                    StartupFiles(self.shell, self.emit, host_wide) as pth, \
                    PipPins(self.shell, installed(found), self.emit) as pins:
                put_python(good, site, pth, pins)
                return locked_bisect(self.shell, tops[ends.path],
                                     (ends.good_head, ends.current_head), self.labels,
                                     ends.good_patch, bisector)
        except UsageError as exc:   # not a line of commits: nothing moved
            self.emit(f"{ends.path}: not bisected: {exc}")
            return None

    def check_startup(self, found: Differences, host_wide: bool) -> None:
        """Before anything is asked or moved, the host-wide gate (hostops/hostwide.py):
        sitecustomize and each .pth, where they are differences, can be switched here (only
        inside the python's venv, unless --host-wide: then the plan says host-wide); else
        one line that says why and what works."""
        self.host_wide = host_wide
        pth = StartupFiles(self.shell, self.emit, host_wide)
        try:
            for path in found.pth:
                words = pth.gate(path)
                if words:
                    found.host_wide[path] = words
        except HostWideRefused as exc:
            raise UsageError(f"{self.shell.host.name}: {exc}") from None
        if found.site is None:
            return
        try:
            site = sitecustomize.write(self.shell, (found.site.good or "").encode(
                "utf-8", "surrogateescape"), found.site.path, None, dry=True,
                host_wide=host_wide)
        except sitecustomize.SiteRefused as exc:
            raise UsageError(f"{self.shell.host.name}: {exc}") from None
        words = pth.gate(site.path) if host_wide else ""
        if words:
            found.host_wide[found.site.path] = words

    def capture_now(self, paths: list[str], options: CaptureOptions) -> Snapshot:
        host: Host = with_vars(self.shell.host, {"repos": paths})
        return capture.snapshot_document(self.shell.transport, host, "explain-now", options)

    def commits_between(self, top: str, good: Snapshot, path: str) -> int:
        """Commits on either side between GOOD's HEAD and the checkout's now; GOOD's must be
        in the checkout (it is checked out at every trial)."""
        sha = commit_here(self.shell, top, str(snap.repos(good)[path].get("head")), self.labels[0])
        counted = run(self.shell, top, "rev-list", "--count", f"{sha}...HEAD")
        return int(counted.stdout.strip()) if counted.exit_code == 0 else 0

    def stash_message(self, top: str) -> str:
        return (f"envsnap: work saved before explain {self.labels[0]} {self.labels[1]} "
                f"(HEAD was {describe_head(self.shell, top)})")

    def join_inseparable(self, found: Differences, tops: dict[str, str]) -> None:
        """A patch that applies only on the new commits (or GOOD's only on the old ones)
        cannot be tried apart from them: the two become one factor. Asked of a private
        index, nothing in the checkout moves."""
        for ends in found.repos:
            kinds = {item.kind: item for item in found.items if item.name == ends.path
                     and item.kind in ("commits", "patch")}
            if set(kinds) != {"commits", "patch"}:
                continue
            crossed = [(ends.good_head, ends.current_patch), (ends.current_head, ends.good_patch)]
            if all(self.applies(tops[ends.path], head, patch) for head, patch in crossed):
                continue
            joined = replace(kinds["commits"], with_patch=True)
            found.items = [joined if item is kinds["commits"] else item
                           for item in found.items if item is not kinds["patch"]]

    def applies(self, top: str, head: str, patch: Patch | None) -> bool:
        if patch is None:
            return True
        try:
            check_on_commit(self.shell, top, head, patch)
            return True
        except GitFailure:
            return False

    def measure(self, found: Differences, trees: list[StateTree],
                python: tuple[SiteFile, StartupFiles, PipPins],
                applied: frozenset[int]) -> list[float]:
        """The benchmark at GOOD's state plus the differences at `applied`."""
        state = state_for(found, applied)
        for tree, repo in zip(trees, state.repos):
            tree.put(repo.head, repo.patch)
        put_python(state, *python)
        spec = self.spec_at(state)
        where = state_name(found.items, applied)
        try:
            values: list[float] = bench_on(self.shell.transport, self.shell.host, spec,
                                           lambda text: self.emit(RunEnded(text, where)))["values"]
        except BenchError as exc:
            raise BenchError(f"the benchmark fails at {where}: {exc}") from None
        self.emit(Measured(applied, values))
        return values

    def spec_at(self, state: State) -> BenchSpec:
        """The benchmark with a state's env: the server's start, the command's own."""
        serve = self.spec.serve
        return replace(self.spec, env=state.benchmark_env,
                       serve=replace(serve, env=state.server_env) if serve else None)


def installed(found: Differences) -> dict[str, str]:
    """The versions of the searched packages when explain started."""
    return {item.name: str(item.current) for item in found.items if item.kind == "package"}


def put_python(state: State, site: SiteFile, pth: StartupFiles, pins: PipPins) -> None:
    """A state's sitecustomize, .pth files and package versions, where they are differences."""
    if state.site is not None:
        site.put(state.site)
    pth.put(state.pth)
    pins.put(state.packages)


def state_name(items: list[Difference], applied: frozenset[int]) -> str:
    if not applied:
        return "GOOD's state"
    if len(applied) == len(items):
        return "the state now"
    return f"GOOD's state + {plural(len(applied), 'difference')} " \
           f"({', '.join(str(i + 1) for i in sorted(applied))})"
