"""Bisect between the HEADs of two snapshots with benchmark verdicts: which commit made it slow.

    snapshots -> repo, good and bad commits, host          (refused before anything moves)
      -> host lock; good must be an ancestor of bad; the line of commits (search.py)
      -> the user's work stashed, HEAD remembered           (tree.Tree)
      -> both endpoints benchmarked: no regression between them, nothing to look for
      -> halving (search.Hunt): check out, re-apply the good patch if asked, run the
         benchmark, place the runs between both ends with the machine's drift taken out
         (GOOD and BAD measured again between the steps); between or can't tell: more runs,
         up to max_repeat; a failing benchmark or a patch that won't apply skips the commit
      -> a first slow commit part of the way down: the search again from it to BAD
      -> each slow commit with its subject, files and size, or the suspects, every step
      -> HEAD, branch and the user's work put back, whatever happened.

Library code: never prints; progress reaches the CLI through `on_event`.
"""
from __future__ import annotations

import statistics
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable, Literal, Union

from envsnap.bench.between import NO_DRIFT, Drift
from envsnap.bench.run import BenchSpec, bench_on
from envsnap.bisect import search
from envsnap.bisect.inputs import (
    BenchAsked,
    bench_spec,
    check_options,
    commit_here,
    commit_line,
    describe_head,
    files_touched,
    find_toplevel,
    good_patch,
    matches,
    merged_by,
    pick_host,
    pick_repo,
    recorded_baseline,
    repos_of,
    subject_of,
)
from envsnap.bisect.journal import RUN, Journal, Record
from envsnap.bisect.search import Commit, Search
from envsnap.bisect.tree import Tree
from envsnap.defaults import DEFAULT_MAX_REPEAT
from envsnap.errors import BenchError, HostError, Interrupted, PutBackError, UsageError
from envsnap.hostops.gate import ForeignPlan, endpoint_plan, gate
from envsnap.hostops.git import GitFailure
from envsnap.hostops.locks import CheckoutLocks
from envsnap.hostops.patch import Patch
from envsnap.hostops.shell import HostShell, OthersCheckouts, Shell
from envsnap.hostops.signals import sigint_deferred
from envsnap.hosts.capture import CaptureOptions
from envsnap.hosts.connect import open_transport
from envsnap.hosts.inventory import Inventory
from envsnap.snapshot import provenance
from envsnap.snapshot.store import Store
from envsnap.text import plural
from envsnap.verdicts import (
    CANT_TELL,
    ENDS_UNDECIDED,
    FOUND,
    GOOD,
    NO_REGRESSION,
    ONLY_SKIPPED,
    REGRESSION,
    BenchVerdict,
    BisectOutcome,
    Classification,
)

if TYPE_CHECKING:
    from envsnap.snapshot.records import Bench

StepKind = Literal["good", "bad", "step"]    # the two endpoints, or a commit between them


@dataclass(frozen=True)
class BisectOptions:
    # --as-root-in-others-checkouts: may move another user's checkout (hostops/git.py)
    others_checkouts: bool = False
    max_repeat: int = DEFAULT_MAX_REPEAT     # runs per commit at most, can't tell included
    with_patch: bool = False                 # re-apply the good snapshot's uncommitted patch
    good_from_snapshot: bool = False         # the good snapshot's recorded runs as baseline
    keep_untracked: bool = False             # leave untracked files in place (bench scripts)
    trust_foreign: bool = False              # go on with a snapshot not signed by this user
    capture: CaptureOptions = field(default_factory=CaptureOptions)


@dataclass
class Step:
    kind: StepKind
    number: int               # 1, 2, ... for steps; 0 for the endpoints
    commit: Commit
    position: int             # on the line: 0 is the good commit, len(line) the bad one
    values: list[float]
    verdict: Classification | BenchVerdict   # the bad endpoint's: good against bad
    why: str
    left: int = 0             # commits still untested in range after this step
    steps_left: int = 0


@dataclass(frozen=True)
class RunEnded:
    """One benchmark run ended: where ("good (aec95928498c)", "step 2 (48b2f8be7d7a)": the
    endpoints are measured before any step line says which commit is under test) and what
    bench says of it ("run 2 of 5: 61.3 s, exit 0, ...")."""

    text: str
    where: str = ""


@dataclass(frozen=True)
class Answered:
    """The bisect's answer, complete, given before the checkout is put back: a put-back
    that fails after it loses nothing (the CLI prints it as it comes)."""

    report: BisectReport


Event = Union[Step, str, RunEnded]
Said = Union[Event, Answered]   # what a bisect tells its caller: its events, then its answer


@dataclass(frozen=True)
class SlowCommit:
    """A commit that made it slower, and by how much: its median against the good state it
    was found from (GOOD, or the slow commit before it), the drift taken out of both."""

    commit: Commit
    before: Commit
    before_median: float
    median: float
    change: float                     # -0.25: a quarter lower
    files: list[str]
    merged: list[Commit]              # what it brought in, when it is a merge


@dataclass
class BisectReport:
    host: str
    repo: str
    good: Commit
    bad: Commit
    line: list[Commit] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    outcome: BisectOutcome | None = None   # None while the bisect runs
    why: str = ""
    first_bad: Commit | None = None
    files: list[str] = field(default_factory=list)
    merged: list[Commit] = field(default_factory=list)   # what a first bad merge brought in
    suspects: list[Commit] = field(default_factory=list)
    endpoint_invocations: int = 0   # benchmark invocations at the two endpoints (and at a
                                    # slow commit the search went on from), again included
    step_invocations: int = 0       # ... and at every other commit
    runs: int = 0
    remeasures: int = 0             # of those, the ones again during the search
    drift: Drift = NO_DRIFT         # fitted on every state measured more than once
    medians: tuple[float, float] = (0.0, 0.0)   # GOOD's and BAD's, the drift taken out
    culprits: list[SlowCommit] = field(default_factory=list)   # in the order found
    whole_drop: bool = False        # the last slow commit found is like BAD
    leftovers: list[str] = field(default_factory=list)
    # the last benchmark it ran: its runs' output names the metric (a plot's title)
    last_record: Bench | None = None

    @property
    def regression(self) -> bool:
        """The endpoints differ for real: the culprit was found, or narrowed down."""
        return self.outcome in (FOUND, ONLY_SKIPPED, CANT_TELL)


def bisect(store: Store, inventory: Inventory, good_label: str, bad_label: str,
           host: str | None, repo: str | None, asked: BenchSpec | BenchAsked,
           options: BisectOptions, on_event: Callable[[Said], None] | None = None,
           review: Callable[[ForeignPlan], bool] | None = None) -> BisectReport:
    """Find the first commit between two snapshots' HEADs where the benchmark regressed.
    A foreign endpoint passes the gate first (hostops/gate.py): `review` sees what bisect
    would take from it (its commit, GOOD's patch with --with-patch, BAD's python, the
    benchmark command when it is the one the snapshots recorded)."""
    good_doc, bad_doc = store.load(good_label), store.load(bad_label)
    path, good_repo, bad_repo = pick_repo(good_doc, bad_doc, repo, (good_label, bad_label))
    spec, recorded = (asked, None) if isinstance(asked, BenchSpec) else \
        bench_spec(asked, good_doc, bad_doc, (good_label, bad_label), path)
    check_options(spec, options.max_repeat)
    target = pick_host(bad_doc, inventory, host)
    emit = on_event or (lambda _: None)
    if recorded is not None:
        emit(f"benchmark: as both snapshots recorded it: {spec.cmd} (metric {spec.metric}, "
             f"in {spec.cwd}{', with its server' if spec.serve else ''})")
    for document, label, is_bad in ((good_doc, good_label, False), (bad_doc, bad_label, True)):
        gate(endpoint_plan(document, label, target.name, provenance.verify_as_user(document),
                           doing=f"bisecting with it (as {'BAD' if is_bad else 'GOOD'})",
                           needs_consent=not options.trust_foreign,
                           repos=[key for key, value in repos_of(document).items()
                                  if matches(path, key, value)],
                           patches=options.with_patch and not is_bad,
                           python=is_bad and host is None,
                           commands=[spec.cmd] if recorded is not None else []),
             review, "bisect with it")
    patch = good_patch(good_repo, good_label) if options.with_patch else None
    baseline = recorded_baseline(good_doc, spec, good_label) if options.good_from_snapshot \
        else None
    journal = Journal.at(store.root, "bisect", (good_label, bad_label))
    emit = journal.recording(on_event or (lambda _: None), journal_record)
    emit(journal.start())
    bisector = Bisector(spec, options, baseline, emit)
    try:
        with open_transport(target, options.capture.connect_timeout,
                            options.capture.accept_new_host_keys) as transport, \
                CheckoutLocks(transport, target, [path], wait_hint=""):   # the checkout it walks
            shell = HostShell(target, transport, others=OthersCheckouts()
                              if options.others_checkouts else None)
            heads = (str(good_repo.get("head")), str(bad_repo.get("head")))  # pick_repo: set
            with put_back_journaled(journal):
                return locked_bisect(shell, path, heads,
                                     (good_label, bad_label), patch, bisector)
    except GitFailure as exc:
        raise HostError(str(exc)) from None
    except KeyboardInterrupt:   # the checkout was put back on the way out (tree.py), or said
        raise Interrupted(put_back_line(target.name, path, "bisect")) from None


def journal_record(event: Said) -> Record:
    """What the journal keeps of an event: each step as it is measured, then the answer."""
    if isinstance(event, Step):
        return "step", {"kind": event.kind, "number": event.number, "commit": event.commit.sha,
                        "subject": event.commit.subject, "values": event.values,
                        "verdict": str(event.verdict), "why": event.why}
    if isinstance(event, Answered):
        report = event.report
        return "answer", {"outcome": str(report.outcome), "why": report.why,
                          "first_bad": report.first_bad.sha if report.first_bad else None,
                          "suspects": [commit.sha for commit in report.suspects]}
    if isinstance(event, RunEnded):   # held: a Ctrl-C before its step's record keeps it
        return RUN, {"where": event.where, "run": event.text}
    return None


@contextmanager
def put_back_journaled(journal: Journal) -> Iterator[None]:
    """How the put-back went, in the journal, after the answer; a failed one names the
    journal, where the answer and every trial are kept."""
    try:
        yield
    except PutBackError as exc:
        journal.write("put back", done=False, problem=str(exc))
        raise PutBackError(exc.what, exc.finish, str(journal.path or "")) from None
    except KeyboardInterrupt:   # everything was put back on the way out (tree.py, apply.py)
        journal.interrupted()
        raise
    except HostError as exc:
        if after_ctrl_c(exc):   # the way out of a Ctrl-C could not put everything back
            journal.interrupted(str(exc))
        raise
    journal.write("put back", done=True)


def after_ctrl_c(error: BaseException) -> bool:
    """Whether a Ctrl-C is among the errors this one was raised from or while handling."""
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


def put_back_line(host: str, where: str, command: str) -> str:
    """After Ctrl-C, once everything was put back: where the host stands, and the way on."""
    return (f"{host}: {where} is as {command} found it (HEAD, its branch and your work put "
            f"back, its lock released): nothing to roll back; run the same envsnap {command} "
            "again to start over")


def locked_bisect(shell: Shell, path: str, heads: tuple[str, str], labels: tuple[str, str],
                  patch: Patch | None, bisector: Bisector) -> BisectReport:
    top = find_toplevel(shell, path)
    good = commit_here(shell, top, heads[0], labels[0])
    bad = commit_here(shell, top, heads[1], labels[1])
    line = commit_line(shell, top, good, bad, labels)   # refuses a non-ancestor: nothing moved
    report = BisectReport(host=shell.host.name, repo=top, line=line, bad=line[-1],
                          good=Commit(good, subject_of(shell, top, good)))
    bisector.emit(f"bisect {top} on {shell.host.name}: {good[:12]} ({labels[0]}) .. "
                  f"{bad[:12]} ({labels[1]}): {plural(len(line), 'commit')}, about "
                  f"{plural(Search(len(line)).steps_left(), 'step')} after the endpoints")
    message = (f"envsnap: work saved before bisect {labels[0]}..{labels[1]} "
               f"(HEAD was {describe_head(shell, top)})")
    with Tree(shell, top, patch, message, bisector.emit, bisector.options.keep_untracked) as tree:
        bisector.run(shell, tree, report)
        report.leftovers = list(tree.leftovers)
        bisector.emit(Answered(report))   # the answer first; putting back comes after
    report.leftovers = tree.leftovers
    return report


# ---- the search -----------------------------------------------------------------------------

class Bisector:
    """Runs the benchmark where the tree stands and lets search.Hunt decide; `run` sets the
    rest. Positions are the hunt's: 0 the good commit, len(line) the bad one."""

    shell: Shell
    tree: Tree
    report: BisectReport

    def __init__(self, spec: BenchSpec, options: BisectOptions, baseline: list[float] | None,
                 emit: Callable[[Said], None],
                 baseline_said: str = "recorded in the good snapshot") -> None:
        self.spec, self.options, self.baseline, self.emit = spec, options, baseline, emit
        self.baseline_said = baseline_said   # where the good runs given as `baseline` are from

    def run(self, shell: Shell, tree: Tree, report: BisectReport) -> None:
        self.shell, self.tree, self.report = shell, tree, report
        hunt = search.Hunt(len(report.line), self.measure, repeat=self.spec.repeat,
                           max_repeat=self.options.max_repeat,
                           lower_is_better=self.spec.lower_is_better, good_runs=self.baseline,
                           on_event=self.hunted)
        ends = hunt.start()
        self.record(Step("good", 0, report.good, 0, hunt.runs_at(0), GOOD,
                         self.baseline_said if self.baseline else "measured"))
        self.record(Step("bad", 0, report.bad, len(report.line), hunt.runs_at(len(report.line)),
                         ends["verdict"], ends["why"], len(report.line) - 1,
                         Search(len(report.line)).steps_left()))
        result = hunt.search() if ends["verdict"] == REGRESSION else hunt.finish()
        self.conclude(result)

    def commit_at(self, position: int) -> Commit:
        return self.report.good if position == 0 else self.report.line[position - 1]

    def measure(self, position: int, count: int, role: str) -> list[float] | str:
        """The benchmark at a position: its runs, or why not (a step is skipped). At an end
        a failure is the user's to fix, not a commit to skip."""
        commit = self.commit_at(position)
        end = "good" if position == 0 else "bad" if position == len(self.report.line) else None
        skip = self.tree.visit(commit.sha)
        if skip:
            if end is not None:
                raise UsageError(f"{end} commit {commit.short}: {skip}")
            return skip
        try:
            return self.bench(count, role, where=f"{role} ({commit.short})")
        except BenchError as exc:   # like `git bisect run` exit 125: choose a neighbour
            if end is None:
                return str(exc)
            hint = (f" (your {plural(self.tree.untracked_stashed, 'untracked file')} are "
                    "stashed while bisect runs: --keep-untracked leaves them, if the benchmark "
                    "needs one)"
                    if self.tree.untracked_stashed else "")
            raise BenchError(f"the benchmark fails at the {end} commit {commit.short}: "
                             f"{exc}{hint}") from None

    def bench(self, count: int, role: str, where: str) -> list[float]:
        if role.endswith(" again"):    # an end measured again counts as the end's
            self.report.remeasures += 1
            self.report.endpoint_invocations += 1
        elif role in ("good", "bad"):
            self.report.endpoint_invocations += 1
        else:
            self.report.step_invocations += 1
        spec = replace(self.spec, repeat=count)
        record = bench_on(self.shell.transport, self.shell.host, spec,
                          lambda text: self.emit(RunEnded(text, where)))
        self.report.last_record = record
        values: list[float] = record["values"]
        self.report.runs += len(values)
        return values

    def record(self, step: Step) -> None:
        self.report.steps.append(step)
        self.emit(step)

    def hunted(self, event: search.HuntEvent) -> None:
        """A step decided, or an end measured again: a table row, or a note."""
        if isinstance(event, search.Remeasure):
            commit = self.commit_at(event.position)
            self.emit(f"  measured again: {event.role} ({commit.short}), "
                      f"{plural(len(event.runs), 'run')}, median {median(event.runs):.4g}; "
                      f"drift so far {event.drift.rate:+.2%} per invocation")
            return
        self.record(Step("step", event.number, self.commit_at(event.position), event.position,
                         list(event.runs), event.verdict, event.why, event.left,
                         event.steps_left))

    def conclude(self, result: search.HuntResult) -> None:
        report = self.report
        report.drift = result.drift
        report.medians = (result.good_median, result.bad_median)
        if result.outcome in (NO_REGRESSION, ENDS_UNDECIDED):
            report.outcome = result.outcome
            report.why = f"good -> bad: {result.ends['verdict']}: {result.ends['why']}"
            return
        with sigint_deferred():
            report.culprits = [self.slow_commit(culprit) for culprit in result.culprits]
        report.whole_drop = result.whole_drop
        report.outcome = result.outcome
        if report.culprits:
            first = report.culprits[0]
            report.first_bad, report.files, report.merged = first.commit, first.files, \
                first.merged
        if result.outcome == FOUND:
            culprit = report.culprits[0].commit
            report.why = f"the first bad commit is {culprit.short} {culprit.subject}"
            return
        report.suspects = [self.commit_at(position) for position in result.suspects]
        if result.outcome == ONLY_SKIPPED:
            report.why = (f"only skipped commits are left: the "
                          f"{'next slow' if report.culprits else 'first bad'} commit is one of "
                          f"these {len(report.suspects)}")
            return
        undecided = result.undecided
        assert undecided is not None
        report.why = (f"{self.commit_at(undecided.position).short}: can't tell after "
                      f"{len(undecided.runs)} runs (--max-repeat {self.options.max_repeat}): "
                      f"the noise never let a verdict form; the "
                      f"{'next slow' if report.culprits else 'first bad'} commit is one of "
                      f"these {len(report.suspects)}")

    def slow_commit(self, culprit: search.Culprit) -> SlowCommit:
        commit = self.commit_at(culprit.position)
        before = self.commit_at(culprit.position - 1).sha
        return SlowCommit(commit, self.commit_at(culprit.before), culprit.before_median,
                          culprit.median, culprit.change,
                          files_touched(self.shell, self.report.repo, before, commit.sha),
                          merged_by(self.shell, self.report.repo, commit))


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else 0.0
