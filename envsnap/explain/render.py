"""`envsnap explain` as text: the plan before it runs, each trial, and the answer. The CLI
folds the lines to its width; each verdict and flag with its value is kept whole
(envsnap/fold.py)."""
from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Protocol

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
        if item.kind in ("pth", "sitecustomize") and item.name in found.host_wide:
            lines.append(f"       {found.host_wide[item.name]}: switched as --host-wide asked, "
                         "put back at the end")
    lines += [f"  not searched: {line}" for line in found.not_searched]
    lines.append(f"at most {plan.worst_case} benchmark invocations of {plural(plan.repeat, 'run')}"
                 f" for one cause ({plan.worst_case_two} for two), more when the noise asks "
                 f"for re-runs or GOOD is measured again for drift, never more than "
                 f"{plan.ceiling} (--max-invocations)")
    return lines


def event_line(event: Event, items: list[Difference]) -> str:
    if isinstance(event, (RunEnded, Step)):
        return bisect_line(event)
    if isinstance(event, Measured):
        return f"{state_name(items, event.applied)}: median {median_of(event.values)} " \
               f"({plural(len(event.values), 'run')})"
    return event


class Described(Protocol):
    def describe(self) -> str: ...


def percent(fraction: float) -> str:
    """A change as a percent: whole from 10% on, one decimal under it."""
    value = fraction * 100
    return f"{value:+.0f}%" if abs(value) >= 10 else f"{value:+.1f}%"


def change(before: float, after: float) -> str:
    """`94 -> 62.67 (-33%)`: the percent relative to `before`."""
    moved = f" ({percent(after / before - 1)})" if before else ""
    return f"{number(before)} -> {number(after)}{moved}"


def described(items: Sequence[Described], indexes: frozenset[int]) -> str:
    return " + ".join(items[i].describe() for i in sorted(indexes))


def cause_line(explanation: Explanation, items: Sequence[Described],
               cause: frozenset[int]) -> str:
    effect = explanation.effect(cause)
    if len(cause) == 1:
        what = f"cause: {described(items, cause)}, alone"
    else:
        what = f"cause, {keep('only together')}: {described(items, cause)}, together"
    if effect is None:
        return f"{what} not measured"
    return f"{what} {change(effect.before, effect.after)}"


def together_line(explanation: Explanation) -> list[str]:
    """GOOD + every cause: all of GOOD -> BAD, or what is left of it."""
    effect = explanation.effect(explanation.together)
    if effect is None or not explanation.bad:
        return []
    line = f"together {change(effect.before, effect.after)}"
    if explanation.whole_drop:
        return [f"{line}: the whole drop"]
    bad = statistics.median(explanation.bad)
    return [f"{line}: {change(effect.after, bad)} left unexplained"]


def item_lines(explanation: Explanation, items: Sequence[Described],
               hints: Callable[[int], list[str]] = lambda _: []) -> list[str]:
    """Every cause with its size, all of them together, then each other difference: "no
    effect" only where it was measured alone and its interval lies within the noise."""
    lines = []
    for cause in explanation.causes:
        lines.append(cause_line(explanation, items, cause))
        if len(cause) == 1:
            lines += hints(next(iter(cause)))
    if explanation.causes:
        lines += together_line(explanation)
    for index, item in enumerate(items):
        if index in explanation.together or index in explanation.unexplained:
            continue
        effect = explanation.effect(frozenset({index}))
        if effect is None:
            lines.append(f"not tested alone: {item.describe()} (within the noise of a set "
                         f"that held it)")
            continue
        moved = change(effect.before, effect.after)
        within = explanation.within_noise(frozenset({index}))
        interval = within["shift_interval"] if within is not None else None
        if interval is not None and effect.before:
            noise = max(abs(end) for end in interval) * 100
            width = f"{noise:.0f}" if noise >= 10 else f"{noise:.1f}"
            lines.append(f"{keep('no effect')}: {item.describe()}, alone "
                         f"{moved[:-1]}, within the noise: +/-{width}%)")
        elif explanation.faster(frozenset({index})):
            lines.append(f"not a cause: {item.describe()}, alone {moved}")
        else:   # its own runs could not settle it; a set that held it did
            lines.append(f"not settled alone: {item.describe()}, alone {moved} (within the "
                         "noise of a set that held it)")
    return lines


def drift_lines(explanation: Explanation) -> list[str]:
    drift = explanation.drift
    if not drift.detected:
        return []
    moved = (f"drift: the benchmark moved {percent(drift.over(1))} per invocation during "
             f"the run (GOOD measured {drift.measurements} times)")
    if explanation.corrected:
        return [f"{moved}; trials corrected for it"]
    return [f"drift: GOOD's runs moved beyond the noise during the run (GOOD measured "
            f"{drift.measurements} times); not corrected: its medians give no rate"]


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
        return lines + drift_lines(explanation) + leftover_lines(report)
    lines += item_lines(explanation, items, lambda index: bisect_hint(items[index], report))
    out_of_budget = len(explanation.trials) >= report.plan.ceiling
    why = (f"{report.plan.ceiling} invocations reached, the ceiling" if out_of_budget
           else "the noise left it undecided")
    for index in sorted(explanation.unexplained):
        lines.append(f"{keep(CANT_TELL)}: {items[index].describe()} ({why})")
    if explanation.outcome == CANT_TELL and not explanation.causes:
        lines.append(f"{keep(CANT_TELL)} which differences cause it: " + (
            "the ceiling stopped the search (raise --max-invocations)" if out_of_budget
            else "the noise forbids an answer (more runs with --repeat may settle it)"))
    return lines + drift_lines(explanation) + leftover_lines(report)


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
