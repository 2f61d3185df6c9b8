"""The lines `envsnap bisect` prints: each step as it happens, then the table and the answer.
The table's subjects are cut to the width the CLI gives; the CLI folds the other lines to it
(a verdict kept whole: envsnap/fold.py)."""
from __future__ import annotations

import math
import statistics

from envsnap.bisect.run import BisectReport, Event, RunEnded, Step
from envsnap.fold import DEFAULT_WIDTH, keep
from envsnap.text import plural, values_at_a_glance
from envsnap.verdicts import ENDS_UNDECIDED, FOUND, NO_REGRESSION, ONLY_SKIPPED

SUBJECT_WIDTH = 40
SUBJECT_MIN = 12   # the table's subject at least this wide; a narrower terminal folds the row


def median_text(values: list[float]) -> str:
    return f"{statistics.median(values):.4g}" if values else "-"


def step_name(step: Step) -> str:
    return step.kind if step.kind != "step" else f"step {step.number}"


def event_line(event: Event) -> str:
    """One line per event: a note as it is, a run indented, a step with its runs, verdict
    and why."""
    if isinstance(event, str):
        return event
    if isinstance(event, RunEnded):
        return f"  {event.where}: {event.text}" if event.where else f"  {event.text}"
    runs = f"{plural(len(event.values), 'run')}, median {median_text(event.values)}" \
        if event.values else "no runs"
    line = (f"{step_name(event):<8} {event.commit.short}  {event.commit.subject[:SUBJECT_WIDTH]}"
            f"  [{runs}]  {keep(event.verdict)}: {event.why}")
    if event.kind != "good" and (event.left or event.steps_left):
        line += f"  ({event.left} left, ~{plural(event.steps_left, 'step')})"
    return line


TABLE_HEAD = f"{'step':<8} {'commit':<12}  {'runs':>4}  {'median':>10}  {'verdict':<10}  "


def table_lines(report: BisectReport, width: int = DEFAULT_WIDTH) -> list[str]:
    """The steps, one row each, the subject cut to what the row leaves of `width`."""
    subject = max(SUBJECT_MIN, min(SUBJECT_WIDTH, width - len(TABLE_HEAD)))
    lines = [TABLE_HEAD + "subject"]
    for step in report.steps:
        lines.append(f"{step_name(step):<8} {step.commit.short:<12}  {len(step.values):>4}  "
                     f"{median_text(step.values):>10}  {keep(step.verdict):<10}  "
                     f"{step.commit.subject[:subject]}")
    return lines


MERGED_SHOWN = 30   # commits of a first bad merge listed; the rest are counted


def answer_lines(report: BisectReport) -> list[str]:
    if report.outcome in (NO_REGRESSION, ENDS_UNDECIDED):
        return [f"{keep('nothing to bisect')}: {report.why}"]
    lines = culprit_lines(report)
    if report.outcome == FOUND and report.culprits:
        return lines + drop_lines(report)
    if report.outcome == FOUND and report.first_bad is not None:   # a report built by hand
        return [f"{keep('first bad commit')}: {report.first_bad.sha} "
                f"{report.first_bad.subject}",
                *([f"  {name}" for name in report.files] or ["  (no files changed)"])]
    lines.append(report.why + ":")
    lines += [f"  {commit.sha} {commit.subject}" for commit in report.suspects]
    if report.outcome == ONLY_SKIPPED:
        lines.append("(their benchmark failed or the patch did not apply: fix the build, "
                     "or bisect with a benchmark that runs on them)")
    return lines


def culprit_lines(report: BisectReport) -> list[str]:
    """Each slow commit found: its sha and subject, its files, what a merge brought in, and
    its size against the good state it was found from."""
    lines: list[str] = []
    for number, slow in enumerate(report.culprits):
        name = "first bad commit" if number == 0 else "next slow commit"
        lines.append(f"{keep(name)}: {slow.commit.sha} {slow.commit.subject}")
        lines += [f"  {name}" for name in slow.files] or ["  (no files changed)"]
        if slow.merged:   # the line bisected is first parents: the merge hides its commits
            lines.append(f"a merge: it brought in {plural(len(slow.merged), 'commit')}:")
            lines += [f"  {c.sha} {c.subject}" for c in slow.merged[:MERGED_SHOWN]]
            if len(slow.merged) > MERGED_SHOWN:
                lines.append(f"  ... {len(slow.merged) - MERGED_SHOWN} more "
                             f"(git log {slow.commit.parents[0][:12]}..{slow.commit.short})")
        against = "the good commit" if number == 0 else "the slow commit before it"
        lines.append(f"  size: {slow.before_median:.4g} -> {slow.median:.4g} "
                     f"({slow.change:+.0%}) against {against} {slow.before.short}")
    return lines


def drop_lines(report: BisectReport) -> list[str]:
    """Whether the slow commits found make the whole drop from GOOD to BAD."""
    good, bad = report.medians
    first, last = report.culprits[0], report.culprits[-1]
    together = last.median / first.before_median - 1 if first.before_median else 0.0
    whole = f"{good:.4g} -> {bad:.4g} ({bad / good - 1:+.0%})" if good else "-"
    if report.whole_drop:
        said = "together" if len(report.culprits) > 1 else "alone"
        return [f"{said}: {first.before_median:.4g} -> {last.median:.4g} ({together:+.0%}): "
                f"the whole drop (good -> bad: {whole})"]
    return [f"together: {first.before_median:.4g} -> {last.median:.4g} ({together:+.0%}) of "
            f"good -> bad {whole}: the rest was not placed on a commit"]


def count_lines(report: BisectReport) -> list[str]:
    commits = len(report.line)
    again = f" ({report.remeasures} of them again during the search)" \
        if report.remeasures else ""
    lines = [f"benchmark invocations: {report.endpoint_invocations} at the endpoints{again}, "
             f"{report.step_invocations} at "
             f"{plural(sum(s.kind == 'step' for s in report.steps), 'step')} "
             f"over {plural(commits, 'commit')} (log2 = {math.log2(commits):.1f}); "
             f"{plural(report.runs, 'run')} in all"]
    lines.append(drift_line(report))
    if report.leftovers:
        lines.append(f"the benchmark changed files in the checkout {len(report.leftovers)} "
                     f"times: kept in stashes {', '.join(s[:12] for s in report.leftovers)}")
    return lines


def drift_line(report: BisectReport) -> str:
    """How far the machine drifted per invocation, and how often the ends were measured
    again to see it."""
    again = (f"good and bad measured again {plural(report.remeasures, 'time')} during the "
             "search")
    if report.drift.rate == 0 and report.drift.error == 0:
        return "drift: not measured (a short search: good and bad were measured once)" \
            if not report.remeasures else f"drift: none ({again})"
    rate = f"{report.drift.rate:+.1%} per invocation"
    if report.drift.detected:
        return f"drift: {rate}, beyond the noise: taken out of every run ({again})"
    return f"drift: {rate}, within the noise ({again})"


def medians_line(report: BisectReport) -> str:
    """The median at each tested commit in commit order, at a glance: "▇▇▇▁▁ 60.2 .. 94.1"."""
    tested = sorted((step for step in report.steps if step.values), key=lambda s: s.position)
    medians = [statistics.median(step.values) for step in tested]
    return f"medians in commit order: {values_at_a_glance(medians, 'commit')}"


def final_lines(report: BisectReport, width: int = DEFAULT_WIDTH) -> list[str]:
    return ["", *table_lines(report, width), "", *answer_lines(report), *count_lines(report)]
