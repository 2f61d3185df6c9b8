"""Fleet reports: the facts where hosts differ from the majority, for a person, a machine
(--json, versioned like the pairwise envelope) or an issue (--markdown)."""
from __future__ import annotations

from typing import Any

from envsnap.diff.findings import Finding, short
from envsnap.diff.fleet import ABSENT, Disagreement, FleetReport
from envsnap.diff.render_formats import cell, dumps
from envsnap.diff.render_text import paint, rank_colour

FLEET_FORMAT = 1


def fleet_value(value: Any) -> str:
    return "(absent)" if value is ABSENT else short(value)


def others_text(d: Disagreement, limit: int = 6) -> str:
    parts = []
    for value, hosts in d.others:
        named = ", ".join(hosts[:limit]) + (f" +{len(hosts) - limit}" if len(hosts) > limit
                                            else "")
        parts.append(f"{named}: {fleet_value(value)}")
    return "; ".join(parts)


def fleet_summary(report: FleetReport) -> str:
    count = len(report.disagreements)
    head = f"fleet of {len(report.hosts)} snapshots: "
    if not report.drift:
        return head + "every compared fact agrees."
    found = f"{count} fact{'s differ' if count != 1 else ' differs'} from the majority"
    missing = f"; {len(report.not_captured)} sections not captured" if report.not_captured \
        else ""
    return head + found + missing + "."


def majority_text(d: Disagreement) -> str:
    label = "no majority, first" if d.tie else "majority"
    return f"{label} {fleet_value(d.majority)} ({len(d.majority_hosts)} of {d.total})"


def fleet_human(report: FleetReport, color: bool = False) -> str:
    out = [fleet_summary(report), ""]
    for d in report.disagreements:
        where = Finding(d.section, d.path, None, None).where or "(section)"
        rank = paint(f"{d.rank:>3}", rank_colour(d.rank), color)
        out.append(f"  {rank} {d.section} {where}: {majority_text(d)}; {others_text(d)}")
        out.append(f"      {d.why}")
    for name, host, error in report.not_captured:
        out.append(f"  not captured: {name} on {host} ({error})")
    return "\n".join(out).rstrip("\n") + "\n"


def fleet_json(report: FleetReport) -> str:
    return dumps({"envsnap_fleet": FLEET_FORMAT, "hosts": report.hosts, "drift": report.drift,
                  "disagreements": [d.as_json() for d in report.disagreements],
                  "not_captured": [{"section": s, "host": h, "error": e}
                                   for s, h, e in report.not_captured]})


def fleet_markdown(report: FleetReport) -> str:
    out = [f"## {fleet_summary(report)}", ""]
    if report.disagreements:
        out += ["| rank | section | path | majority | differing hosts | why |",
                "|---:|---|---|---|---|---|"]
        out += [f"| {d.rank} | {d.section} | `{cell(Finding(d.section, d.path, None, None).where)}`"
                f" | {cell(majority_text(d))} | {cell(others_text(d))} | {cell(d.why)} |"
                for d in report.disagreements]
    out += [f"- not captured: {s} on {h} ({e})" for s, h, e in report.not_captured]
    return "\n".join(out).rstrip("\n") + "\n"
