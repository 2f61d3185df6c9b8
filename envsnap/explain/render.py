"""`envsnap explain` as text: the plan before it runs, each trial, and the answer. The CLI
folds the lines to its width; each verdict and flag with its value is kept whole
(envsnap/fold.py)."""
from __future__ import annotations

import statistics

from envsnap.bisect.render import answer_lines
from envsnap.bisect.render import event_line as bisect_line
from envsnap.bisect.run import RunEnded, Step
from envsnap.explain.differences import Difference
from envsnap.explain.run import Event, ExplainReport, Measured, Plan, state_name
from envsnap.explain.search import Explanation
from envsnap.fold import keep
from envsnap.text import plural
from envsnap.verdicts import CANT_TELL, NO_REGRESSION


def number(value: float) -> str:
    return f"{value:.4g}"


def median_of(values: list[float]) -> str:
    return number(statistics.median(values)) if values else "?"


def plan_lines(plan: Plan) -> list[str]:
    found = plan.differences
    lines = [f"explain on {plan.host}: {plural(len(found.items), 'difference')} between "
             f"{plan.labels[0]} and the host now that envsnap can put back "
             f"(env from the {found.env_source}):"]
    for index, item in enumerate(found.items, 1):
        lines.append(f"  {index}. {item.describe()}")
        if item.kind == "pth":   # code every python start runs: seen before it is written
            lines += [f"       GOOD's: {line}" for line in found.pth[item.name].good or ()]
    lines += [f"  not searched: {line}" for line in found.not_searched]
    lines.append(f"at most {plan.worst_case} benchmark invocations of {plural(plan.repeat, 'run')}"
                 f" for one cause ({plan.worst_case_two} for two), more when the noise asks "
                 f"for re-runs, never more than {plan.ceiling} (--max-invocations)")
    return lines


def event_line(event: Event, items: list[Difference]) -> str:
    if isinstance(event, (RunEnded, Step)):
        return bisect_line(event)
    if isinstance(event, Measured):
        return f"{state_name(items, event.applied)}: median {median_of(event.values)} " \
               f"({plural(len(event.values), 'run')})"
    return event


def described(items: list[Difference], indexes: frozenset[int]) -> str:
    return "; ".join(items[i].describe() for i in sorted(indexes))


def effect(explanation: Explanation, applied: frozenset[int], what: str) -> str:
    trial = explanation.alone(applied)
    good = median_of(explanation.good)
    if trial is None:
        return f"{what}: found within a group, not measured alone (good {good})"
    return f"{what}: {good} -> {median_of(trial.values)}"


def final_lines(report: ExplainReport) -> list[str]:
    explanation = report.explanation
    items = report.plan.differences.items
    if explanation is None:
        return ["nothing ran: not approved"]
    lines = [f"GOOD's state {median_of(explanation.good)}, the state now "
             f"{median_of(explanation.bad)} ({count_text(report)})"]
    if explanation.outcome == NO_REGRESSION:
        why = report.endpoints["why"] if report.endpoints else ""
        lines.append(f"{keep('no regression')} between GOOD's state and the state now: {why}")
        return lines + leftover_lines(report)
    if not report.regression and not explanation.causes:
        why = report.endpoints["why"] if report.endpoints else ""
        lines.append(f"{keep(CANT_TELL)} whether there is a regression between GOOD's state "
                     f"and the state now: {why}")
        return lines + leftover_lines(report)
    for cause in explanation.causes:
        if len(cause) == 1:
            lines.append("cause: " + effect(explanation, cause,
                                            f"{described(items, cause)}, alone"))
            lines += bisect_hint(items[next(iter(cause))], report)
        else:
            lines.append(f"{keep('only together')}: " + effect(explanation, cause,
                                                    described(items, cause)))
    causing = frozenset().union(*explanation.causes) if explanation.causes else frozenset()
    for index, item in enumerate(items):
        if index in causing or index in explanation.unexplained:
            continue
        trial = explanation.alone(frozenset({index}))
        measured = f", {median_of(explanation.good)} -> {median_of(trial.values)}" \
            if trial is not None else ""
        lines.append(f"{keep('no effect')}: {item.describe()}{measured}")
    out_of_budget = len(explanation.trials) >= report.plan.ceiling
    why = (f"{report.plan.ceiling} invocations reached, the ceiling" if out_of_budget
           else "the noise left it undecided")
    for index in sorted(explanation.unexplained):
        lines.append(f"{keep(CANT_TELL)}: {items[index].describe()} ({why})")
    if explanation.outcome == CANT_TELL and not explanation.causes:
        lines.append(f"{keep(CANT_TELL)} which differences cause it: " + (
            "the ceiling stopped the search (raise --max-invocations)" if out_of_budget
            else "the noise forbids an answer (more runs with --repeat may settle it)"))
    return lines + leftover_lines(report)


def count_text(report: ExplainReport) -> str:
    """Every benchmark invocation and run explain made, its bisect of a commit range's too."""
    assert report.explanation is not None
    searched = len(report.explanation.trials)
    invocations, runs = searched, searched * report.plan.repeat
    bisected = report.narrowed
    if bisected is None:
        return f"{plural(invocations, 'invocation')}, {plural(runs, 'run')}"
    by_bisect = bisected.endpoint_invocations + bisected.step_invocations
    return (f"{plural(invocations + by_bisect, 'invocation')}, "
            f"{plural(runs + bisected.runs, 'run')} in all: {plural(by_bisect, 'invocation')} "
            f"and {plural(bisected.runs, 'run')} of them by the bisect of the commits")


def bisect_hint(item: Difference, report: ExplainReport) -> list[str]:
    """A commit range of more than one commit: which one, as bisect found it, or how to."""
    if item.kind != "commits" or item.commits < 2:
        return []
    if report.narrowed is not None:
        return [f"  {line}" for line in answer_lines(report.narrowed)]
    good, bad = report.plan.labels
    return [f"  which of the {item.commits} commits: envsnap bisect {good} {bad} "
            f"{keep('--repo ' + item.name)} --cmd ... --metric ..."]


def leftover_lines(report: ExplainReport) -> list[str]:
    return [f"the benchmark changed tracked files: kept in stash {stash[:12]}"
            for stash in report.leftovers]
