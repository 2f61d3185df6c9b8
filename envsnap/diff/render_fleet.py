"""Fleet reports: the facts where hosts differ from the majority, for a person, a machine
(--json, versioned like the pairwise envelope) or an issue (--markdown)."""
from __future__ import annotations

from typing import Any

from envsnap.diff.findings import Finding, git_move, short
from envsnap.diff.fleet import ABSENT, Disagreement, FleetReport
from envsnap.diff.render_text import git_blocks, paint, rank_colour
from envsnap.text import dump_json, markdown_cell, markdown_code, plural

FLEET_FORMAT = 1


def fleet_value(value: Any) -> str:
    return "(absent)" if value is ABSENT else short(value)


def hosts_text(hosts: list[str], limit: int = 6) -> str:
    return ", ".join(hosts[:limit]) + (f" +{len(hosts) - limit}" if len(hosts) > limit else "")


def others_text(d: Disagreement) -> str:
    return "; ".join(f"{hosts_text(hosts)}: {fleet_value(value)}" for value, hosts in d.others)


def fleet_summary(report: FleetReport) -> str:
    count = len(report.disagreements)
    head = f"fleet of {len(report.hosts)} snapshots: "
    if not report.drift:
        unread = f" ({plural(len(report.unreadable), 'snapshot')} unreadable)" \
            if report.unreadable else ""
        return head + "every compared fact agrees" + unread + "."
    against = (f"between {' and '.join(report.hosts)}" if len(report.hosts) == 2
               else "from the majority")   # two hosts have no majority: name them both
    found = f"{count} fact{'s differ' if count != 1 else ' differs'} {against}"
    missing = f"; {plural(len(report.not_captured), 'section')} not captured" \
        if report.not_captured else ""
    unread = f"; {plural(len(report.unreadable), 'snapshot')} unreadable" \
        if report.unreadable else ""
    return head + found + missing + unread + "."


def majority_text(d: Disagreement) -> str:
    """"majority 6.1 (30 of 32)"; in a tie, which hosts have the first value: no value
    stands for the fleet, so none is shown without its hosts."""
    if d.tie:
        return f"no majority: {hosts_text(d.majority_hosts)}: {fleet_value(d.majority)}"
    return f"majority {fleet_value(d.majority)} ({len(d.majority_hosts)} of {d.total})"


def benchmark_lines(report: FleetReport) -> list[str]:
    """The benchmark first: each host's runs against the others', when two hosts ran one."""
    return report.benchmark.lines() if report.benchmark else []


def fleet_human(report: FleetReport, color: bool = False) -> str:
    out = benchmark_lines(report) + [fleet_summary(report), ""]
    for d in report.disagreements:
        where = Finding(d.section, d.path, None, None).where or "(section)"
        rank = paint(f"{d.rank:>3}", rank_colour(d.rank), color)
        out.append(f"  {rank} {d.section} {where}: {majority_text(d)}; {others_text(d)}")
        out.append(f"      {d.why}")
        move = git_move(d.detail)
        if move is not None:  # a node on another commit: the commits, as the pairwise diff lists
            for block in git_blocks(move, ("the majority", d.others[0][1][0]), False):
                out.append(f"        {block.title}" + (":" if block.lines else ""))
                out += [f"          {line}" for line in block.lines]
    for name, host, error in report.not_captured:
        out.append(f"  not captured: {name} on {host} ({error})")
    out += [f"  unreadable: {source} ({why})" for source, why in report.unreadable]
    return "\n".join(out).rstrip("\n") + "\n"


def fleet_json(report: FleetReport) -> str:
    # `benchmark` and `regression` were added within version 1: keys are added, never changed
    return dump_json({"envsnap_fleet": FLEET_FORMAT, "hosts": report.hosts, "drift": report.drift,
                     "benchmark": report.benchmark.as_json() if report.benchmark else None,
                     "regression": report.regression,
                     "disagreements": [d.as_json() for d in report.disagreements],
                     "not_captured": [{"section": s, "host": h, "error": e}
                                      for s, h, e in report.not_captured],
                     "unreadable": [{"source": source, "error": why}
                                    for source, why in report.unreadable]})


def fleet_markdown(report: FleetReport) -> str:
    out = [f"## {markdown_cell(fleet_summary(report))}", ""]
    lines = benchmark_lines(report)
    if lines:   # under the title, before the facts: the numbers are what was asked
        out += [f"**{markdown_cell(lines[0])}**", ""]
        out += [f"- {markdown_cell(line.strip())}" for line in lines[1:]]
        out += [""] if lines[1:] else []
    if report.disagreements:
        out += ["| rank | section | path | majority | differing hosts | why |",
                "|---:|---|---|---|---|---|"]
        out += [f"| {d.rank} | {markdown_cell(d.section)} | "
                f"{markdown_code(Finding(d.section, d.path, None, None).where)} | "
                f"{markdown_cell(majority_text(d))} | {markdown_cell(others_text(d))} | "
                f"{markdown_cell(d.why)} |" for d in report.disagreements]
    out += [f"- not captured: {markdown_cell(f'{s} on {h} ({e})')}"
            for s, h, e in report.not_captured]
    out += [f"- unreadable: {markdown_cell(source)} ({markdown_cell(why)})"
            for source, why in report.unreadable]
    return "\n".join(out).rstrip("\n") + "\n"
