"""Bisect between the HEADs of two snapshots with benchmark verdicts: which commit made it slow.

    snapshots -> repo, good and bad commits, host          (refused before anything moves)
      -> host lock; good must be an ancestor of bad; the line of commits (search.py)
      -> the user's work stashed, HEAD remembered           (tree.Tree)
      -> both endpoints benchmarked: no regression between them, nothing to look for
      -> halving: check out, re-apply the good patch if asked, run the benchmark, classify
         against both endpoints' runs (like good / like bad / can't tell: more runs up to
         max_repeat); a failing benchmark or a patch that won't apply skips the commit
      -> the first bad commit with its subject and files, or the suspects, and every step
      -> HEAD, branch and the user's work put back, whatever happened.

Library code: never prints; progress reaches the CLI through `on_event`.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable, Literal, Union

from envsnap.bench.run import BenchSpec, bench_on
from envsnap.bisect import search
from envsnap.bisect.inputs import (
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
from envsnap.bisect.journal import Journal, Record
from envsnap.bisect.search import Commit, Search
from envsnap.bisect.tree import Tree
from envsnap.defaults import DEFAULT_MAX_REPEAT
from envsnap.errors import BenchError, HostError, Interrupted, PutBackError, UsageError
from envsnap.hostops.gate import ForeignPlan, endpoint_plan, gate
from envsnap.hostops.git import GitFailure
from envsnap.hostops.locks import CheckoutLocks
from envsnap.hostops.patch import Patch
from envsnap.hostops.shell import HostShell, Shell
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
    SKIP,
    BenchVerdict,
    BisectOutcome,
    Classification,
)

if TYPE_CHECKING:
    from envsnap.snapshot.records import Bench

StepKind = Literal["good", "bad", "step"]    # the two endpoints, or a commit between them


@dataclass(frozen=True)
class BisectOptions:
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
    endpoint_invocations: int = 0   # benchmark invocations at the two endpoints
    step_invocations: int = 0       # ... and at every other commit
    runs: int = 0
    leftovers: list[str] = field(default_factory=list)
    # the last benchmark it ran: its runs' output names the metric (a plot's title)
    last_record: Bench | None = None

    @property
    def regression(self) -> bool:
        """The endpoints differ for real: the culprit was found, or narrowed down."""
        return self.outcome in (FOUND, ONLY_SKIPPED, CANT_TELL)


def bisect(store: Store, inventory: Inventory, good_label: str, bad_label: str,
           host: str | None, repo: str | None, spec: BenchSpec, options: BisectOptions,
           on_event: Callable[[Said], None] | None = None,
           review: Callable[[ForeignPlan], bool] | None = None) -> BisectReport:
    """Find the first commit between two snapshots' HEADs where the benchmark regressed.
    A foreign endpoint passes the gate first (hostops/gate.py): `review` sees what bisect
    would take from it (its commit, GOOD's patch with --with-patch, BAD's python)."""
    check_options(spec, options.max_repeat)
    good_doc, bad_doc = store.load(good_label), store.load(bad_label)
    path, good_repo, bad_repo = pick_repo(good_doc, bad_doc, repo, (good_label, bad_label))
    target = pick_host(bad_doc, inventory, host)
    for document, label, is_bad in ((good_doc, good_label, False), (bad_doc, bad_label, True)):
        gate(endpoint_plan(document, label, target.name, provenance.verify_as_user(document),
                           doing=f"bisecting with it (as {'BAD' if is_bad else 'GOOD'})",
                           needs_consent=not options.trust_foreign,
                           repos=[key for key, value in repos_of(document).items()
                                  if matches(path, key, value)],
                           patches=options.with_patch and not is_bad,
                           python=is_bad and host is None), review, "bisect with it")
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
            shell = HostShell(target, transport)
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
    journal.write("put back", done=True)


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
    """Runs the benchmark where the tree stands and moves the search; `run` sets the rest."""

    shell: Shell
    tree: Tree
    report: BisectReport

    def __init__(self, spec: BenchSpec, options: BisectOptions, baseline: list[float] | None,
                 emit: Callable[[Said], None],
                 baseline_said: str = "recorded in the good snapshot") -> None:
        self.spec, self.options, self.baseline, self.emit = spec, options, baseline, emit
        self.baseline_said = baseline_said   # where the good runs given as `baseline` are from
        self.steps = 0

    def run(self, shell: Shell, tree: Tree, report: BisectReport) -> None:
        self.shell, self.tree, self.report = shell, tree, report
        good, bad = self.endpoints()
        if not report.outcome:
            self.halve(good, bad)

    def bench(self, count: int, endpoint: bool, where: str) -> list[float]:
        if endpoint:
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

    # ---- endpoints ----

    def endpoints(self) -> tuple[list[float], list[float]]:
        """Runs at both ends; more on whichever side has fewer while the verdict is can't
        tell. Stops the bisect (report.outcome) unless the regression is real."""
        report = self.report
        good = list(self.baseline) if self.baseline else self.measure_end("good", [])
        bad = self.measure_end("bad", [])
        verdict = search.endpoints_verdict(good, bad, self.spec.lower_is_better)
        while verdict["verdict"] == CANT_TELL:
            side = self.side_to_extend(good, bad)
            if side is None:
                break
            side += self.measure_end("good" if side is good else "bad", side)
            verdict = search.endpoints_verdict(good, bad, self.spec.lower_is_better)
        self.record(Step("good", 0, report.good, 0, good, GOOD,
                         self.baseline_said if self.baseline else "measured"))
        self.record(Step("bad", 0, report.bad, len(report.line), bad, verdict["verdict"],
                         verdict["why"], len(report.line) - 1,
                         Search(len(report.line)).steps_left()))
        if verdict["verdict"] != REGRESSION:
            report.outcome = ENDS_UNDECIDED if verdict["verdict"] == CANT_TELL \
                else NO_REGRESSION
            report.why = f"good -> bad: {verdict['verdict']}: {verdict['why']}"
        return good, bad

    def side_to_extend(self, good: list[float], bad: list[float]) -> list[float] | None:
        room = [side for side in (bad, good) if len(side) < self.options.max_repeat
                and not (side is good and self.baseline)]
        return min(room, key=len) if room else None

    def measure_end(self, which: str, have: list[float]) -> list[float]:
        """Runs at an endpoint: a failure here is the user's to fix, not a commit to skip."""
        commit = self.report.good if which == "good" else self.report.bad
        skip = self.tree.visit(commit.sha)
        if skip:
            raise UsageError(f"{which} commit {commit.short}: {skip}")
        count = min(self.spec.repeat, self.options.max_repeat - len(have))
        try:
            return self.bench(count, endpoint=True, where=f"{which} ({commit.short})")
        except BenchError as exc:
            hint = (f" (your {plural(self.tree.untracked_stashed, 'untracked file')} are "
                    "stashed while bisect runs: --keep-untracked leaves them, if the benchmark "
                    "needs one)"
                    if self.tree.untracked_stashed else "")
            raise BenchError(f"the benchmark fails at the {which} commit {commit.short}: "
                             f"{exc}{hint}") from None

    # ---- halving ----

    def halve(self, good: list[float], bad: list[float]) -> None:
        report = self.report
        state = Search(len(report.line))
        index = state.next()
        while index is not None:
            step, verdict = self.try_commit(index, good, bad)
            if verdict == CANT_TELL:
                step.left, step.steps_left = len(state.untested()), state.steps_left()
                self.record(step)
                self.conclude(state, CANT_TELL, step)
                return
            state.record(index, verdict)
            step.left, step.steps_left = len(state.untested()), state.steps_left()
            self.record(step)
            index = state.next()
        self.conclude(state, FOUND if not state.suspects()[:-1] else ONLY_SKIPPED, None)

    def try_commit(self, index: int, good: list[float],
                   bad: list[float]) -> tuple[Step, Classification]:
        self.steps += 1
        step = Step("step", self.steps, self.report.line[index], index + 1, [], SKIP, "")
        skip = self.tree.visit(step.commit.sha)
        if skip:
            step.why = skip
            return step, SKIP
        verdict: Classification = CANT_TELL
        while verdict == CANT_TELL and len(step.values) < self.options.max_repeat:
            count = min(self.spec.repeat, self.options.max_repeat - len(step.values))
            try:
                step.values += self.bench(count, endpoint=False,
                                          where=f"step {self.steps} ({step.commit.short})")
            except BenchError as exc:   # like `git bisect run` exit 125: choose a neighbour
                verdict, step.why = SKIP, str(exc)
                break
            verdict, step.why = search.classify(good, bad, step.values,
                                                self.spec.lower_is_better)
        step.verdict = verdict
        return step, verdict

    def conclude(self, state: Search, outcome: BisectOutcome, undecided: Step | None) -> None:
        report = self.report
        report.outcome = outcome
        if outcome == FOUND:
            culprit = report.line[state.bad]
            before = report.line[state.bad - 1].sha if state.bad else report.good.sha
            with sigint_deferred():
                report.files = files_touched(self.shell, report.repo, before, culprit.sha)
                report.merged = merged_by(self.shell, report.repo, culprit)
            report.first_bad = culprit
            report.why = f"the first bad commit is {culprit.short} {culprit.subject}"
            return
        if outcome == ONLY_SKIPPED:
            report.suspects = [report.line[i] for i in state.suspects()]
            report.why = (f"only skipped commits are left: the first bad commit is one of "
                          f"these {len(report.suspects)}")
            return
        assert undecided is not None
        report.suspects = [report.line[i] for i in range(state.good + 1, state.bad + 1)]
        report.why = (f"{undecided.commit.short}: can't tell after {len(undecided.values)} "
                      f"runs (--max-repeat {self.options.max_repeat}): the noise never let a "
                      f"verdict form; the first bad commit is one of these "
                      f"{len(report.suspects)}")

