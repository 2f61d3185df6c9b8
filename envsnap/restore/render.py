"""A restore report as text: the plan, what no tool can restore, the verdict. Pure; envsnap/cli/
writes the lines."""
from __future__ import annotations

import re

from envsnap.diff.findings import short
from envsnap.playbook.render import item_label
from envsnap.playbook.run import FAILED, TaskResult
from envsnap.restore.run import RestoreReport, advice_for

WOULD = re.compile(r"\bwould\b")


def plan_lines(report: RestoreReport, check: bool) -> list[str]:
    lines = list(report.notes)
    if report.pending == "resume":
        lines.append(f"resuming an interrupted restore on {report.host}")
    elif report.pending == "rollback":
        lines.append(f"rolling back an interrupted restore on {report.host}")
    failed = [r for r in report.plan.results if r.status in FAILED]
    if failed:
        lines.append("restore stopped before changing anything:")
        return lines + [f"  {failure_text(result)}" for result in failed]
    if not (report.planned or report.pip_pins):
        lines.append(f"{report.host}: checkouts and sitecustomize already match the snapshot")
    else:
        lines.append(f"plan for {report.host}" + (" (check mode: nothing changed)" if check
                                                  else "") + ":")
        lines += [line for result in report.planned for line in change_lines(result, check)]
        lines += [f"  ~ pip install {pin}" for pin in report.pip_pins]
    return lines + remaining_lines(report)


def failure_text(result: TaskResult) -> str:
    item = f" [{item_label(result.item)}]" if result.looped else ""
    return f"{result.name}{item}: {result.msg} ({result.where})"


def change_lines(result: TaskResult, check: bool = True) -> list[str]:
    """The plan is made in check mode, so tasks say what they "would" do; when it is about to
    be applied, it says what they "will" do."""
    item = f" [{item_label(result.item)}]" if result.looped else ""
    msg = result.msg if check else WOULD.sub("will", result.msg)
    lines = [f"  ~ {result.name}{item}" + (f": {msg}" if msg else "")]
    lines += [f"      {line}" for line in result.diff.splitlines()[:200]]
    return lines


def remaining_lines(report: RestoreReport, after: bool = False) -> list[str]:
    if not report.remaining:
        return []
    lines = ["still different after the restore (change these by hand):" if after else
             "not restorable by envsnap (change these by hand):"]
    for finding in report.remaining:
        change = f"{short(finding.before)} -> {short(finding.after)}"
        lines.append(f"  {finding.section}: {finding.where}: {change}")
    advice = dict.fromkeys(advice_for(finding) for finding in report.remaining)
    return lines + [f"  what to do: {text}" for text in advice]


def outcome_lines(report: RestoreReport) -> list[str]:
    if report.applied is None:
        return rerun_lines(report)
    lines = []
    failed = [r for r in report.applied.results if r.status in FAILED]
    if failed:
        lines += [f"restore failed: {failure_text(result)}" for result in failed]
        lines.append(f"run `envsnap restore` again to resume, or `envsnap restore "
                     f"{report.pre_restore}` to roll back")
        return lines
    if report.pre_restore:
        lines.append(f"rollback point: envsnap restore {report.pre_restore}")
    if report.mismatches:
        lines += [f"NOT restored: {text}" for text in report.mismatches]
    else:
        lines.append("verified: checkouts and sitecustomize match the snapshot")
    return lines + remaining_lines(report, after=True) + rerun_lines(report)


def rerun_lines(report: RestoreReport) -> list[str]:
    if report.rerun is None:
        return []
    record, verdict = report.rerun
    return [f"benchmark rerun: {verdict['verdict']}: {verdict['why']}",
            f"  values now: {', '.join(f'{v:g}' for v in record['values'])}"]
