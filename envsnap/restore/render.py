"""A restore report as text: the plan, what no tool can restore, the verdict. Pure; envsnap/cli/
folds the lines to its width and writes them (a flag with its value and a verdict are kept
whole: envsnap/fold.py)."""
from __future__ import annotations

import re

from envsnap.bench.stats import Summary
from envsnap.diff.findings import Finding, cut_pair, whole
from envsnap.fold import keep
from envsnap.playbook.render import item_label
from envsnap.playbook.run import FAILED, TaskResult
from envsnap.restore.abort import Aborted
from envsnap.restore.rerun import outcome as rerun_outcome
from envsnap.restore.run import RestoreReport
from envsnap.restore.serve import changes_text

WOULD = re.compile(r"\bwould\b")


def plan_lines(report: RestoreReport, check: bool) -> list[str]:
    lines = list(report.notes)
    if report.pending is not None and check:   # --check resumes nothing: it says so
        doing = "finishing it" if report.pending == "resume" else "rolling it back"
        lines.append(f"an interrupted restore is pending on {report.host}: this plan is what "
                     f"{doing} would do (`envsnap restore --abort {keep('--host ' + report.host)}`"
                     " rolls it back)")
    elif report.pending == "resume":
        lines.append(f"resuming an interrupted restore on {report.host}")
    elif report.pending == "rollback":
        lines.append(f"rolling back an interrupted restore on {report.host}")
    failed = [r for r in report.plan.results if r.status in FAILED]
    if failed:
        lines.append("restore stopped before changing anything:")
        return lines + [f"  {failure_text(result)}" for result in failed]
    if not (report.planned or report.pip_changes):
        but = ", but for what envsnap cannot write back" if report.unwritable else ""
        if report.verified:
            lines.append(f"{report.host}: {listed(report.verified)} already match the "
                         f"snapshot{but}")
        else:
            lines.append(f"{report.host}: nothing for restore to change{but}")
    else:
        lines.append(f"plan for {report.host}" + (" (check mode: nothing changed)" if check
                                                  else "") + ":")
        lines += [line for result in report.planned for line in change_lines(result, check)]
        lines += [f"  ~ pip uninstall {name}" for name in report.pip_removals]
        lines += [f"  ~ pip install {pin}" for pin in report.pip_pins]
    return lines + unwritable_lines(report) + remaining_lines(report) + refusal_lines(report)


def refusal_lines(report: RestoreReport) -> list[str]:
    """--check: what the restore itself would refuse (its exit code is the refusal's)."""
    return [f"the restore itself would refuse: {why}" for why in report.refusals]


def unwritable_lines(report: RestoreReport) -> list[str]:
    """The same lines before a restore, after it and on every run after (unwritable.py)."""
    if not report.unwritable:
        return []
    return ["envsnap cannot write these back (the snapshot describes them but did not keep "
            "them; put them back by hand):"] + [f"  {item.text()}" for item in report.unwritable]


def failure_text(result: TaskResult) -> str:
    """The task's own words and next step; never where in restore.yml (envsnap's own file)."""
    item = f" [{item_label(result.item)}]" if result.looped else ""
    return f"{result.name}{item}: {result.msg}"


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
    for left in report.remaining:
        finding = left.finding
        lines.append(f"  {finding.section}: {finding.where}: {now_and_snapshot(finding)}")
    advice = dict.fromkeys(left.advice for left in report.remaining)
    return lines + [f"  what to do: {text}" for text in advice]


def now_and_snapshot(finding: Finding, width: int = 40) -> str:
    """"now X, snapshot Y": a restore speaks from the host as it is (its finding compares
    the snapshot, before, with the host, after); values cut where they differ."""
    snapshot, now = cut_pair(whole(finding.before), whole(finding.after), width)
    return f"now {now}, snapshot {snapshot}"


def outcome_lines(report: RestoreReport) -> list[str]:
    if report.applied is None:
        return rerun_lines(report)
    lines = []
    failed = [r for r in report.applied.results if r.status in FAILED]
    if failed:
        lines += [f"restore failed: {failure_text(result)}" for result in failed]
        lines.append(f"run `envsnap restore` again to resume, or `envsnap restore --abort "
                     f"{keep('--host ' + report.host)}` to roll back to {report.pre_restore}")
        return lines
    if report.pre_restore:
        lines.append(f"rollback point: envsnap restore {report.pre_restore}")
    if report.verified:
        # only what was checked equal, by name; what still differs is listed below it
        but = ", but for what envsnap cannot write back" if report.unwritable else ""
        lines.append(f"verified: {listed(report.verified)} match the snapshot{but}")
    lines += [f"{keep('NOT restored')}: {text}" for text in report.mismatches]
    lines += [f"dropped the stash the restore made of your work, all back in the checkout: "
              f"{stash}" for stash in report.dropped]
    return (lines + unwritable_lines(report) + remaining_lines(report, after=True)
            + rerun_lines(report))


def listed(items: list[str]) -> str:
    """"a", "a and b", "a, b and c"."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def abort_lines(done: Aborted, host: str | None) -> list[str]:
    """One line for `restore --abort`; a rollback that fails says what failed too."""
    journal = done.journal
    if journal is None:
        where = f" on {host}" if host else ""
        return [f"no interrupted restore is pending{where}: nothing to abort"]
    what = f"the interrupted restore of {journal.label!r} on {journal.host}"
    if done.cleared:
        return [f"cleared the journal of {what}: its rollback point {done.target} is not in "
                "the store, so the host is left as it is"]
    report = done.report
    if report is None or report.plan.outcome != "ok" or \
            (report.applied is not None and report.applied.outcome != "ok"):
        failed = plan_lines(report, check=False) if report and report.applied is None \
            else outcome_lines(report) if report else []
        return [f"could not roll back {what} to {done.target}:"] + failed
    verified = f"verified: {listed(report.verified)}" if report.verified else "nothing verified"
    if report.mismatches:
        verified += f"; but {'; '.join(report.mismatches)}"
    return [f"aborted {what}: rolled back to {done.target} ({verified})"] + \
        [f"dropped its stash of your work, all back in the checkout: {stash}"
         for stash in done.dropped]


def server_lines(report: RestoreReport) -> list[str]:
    """--serve: the server's env, put back by starting the rerun's server with it."""
    server = report.server_env
    if server is None:
        return []
    if server.worker is None:
        return ["server env: the snapshot records no --serve server; the rerun's server "
                "started with the host's environment as it is"]
    lines = [f"server env put back (the rerun's server started as the snapshot's was): "
             f"{changes_text(server)}"]
    if server.masked:
        lines.append(f"  not put back (masked as secrets in the snapshot): "
                     f"{', '.join(server.masked)}")
    return lines


def rerun_lines(report: RestoreReport) -> list[str]:
    if report.rerun is None:
        return []
    record, verdict = report.rerun.record, report.rerun.vs_good
    values_now = f"  values now: {', '.join(f'{v:g}' for v in record['values'])}"
    bad = report.rerun.vs_bad
    if bad is None:
        return server_lines(report) + [f"benchmark rerun: {keep(verdict['verdict'])}: "
                                       f"{verdict['why']}", values_now]
    # Both endpoints known: where the rerun landed between them, then each verdict.
    medians = (f"{median_text(verdict['new'])} vs good {median_text(verdict['baseline'])}, "
               f"bad {median_text(bad.verdict['baseline'])}")
    runs = f"{verdict['new']['n']} runs vs {verdict['baseline']['n']} and {len(bad.values)}"
    return server_lines(report) + [
            f"benchmark rerun: {keep(rerun_outcome(verdict, bad.verdict))}: {medians} ({runs})",
            f"  vs good: {keep(verdict['verdict'])}: {verdict['why']}",
            f"  vs bad ({bad.label}): {keep(bad.verdict['verdict'])}: {bad.verdict['why']}",
            values_now]


def median_text(summary: Summary) -> str:
    return f"{summary['median']:.4g}" if summary.get("n") else "-"
