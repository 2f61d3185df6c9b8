"""Fleet reports: the facts where hosts differ from the majority, for a person, a machine
(--json, versioned like the pairwise envelope) or an issue (--markdown)."""
from __future__ import annotations

from typing import Any

from envsnap.diff.findings import ABSENT_TEXT, Finding, cut_pair, git_move, whole
from envsnap.diff.fleet import ABSENT, Disagreement, FleetReport
from envsnap.diff.render_text import SUBJECT_MIN, git_blocks, paint, rank_colour, value_width
from envsnap.fold import DEFAULT_WIDTH, folded
from envsnap.text import dump_json, markdown_cell, markdown_code, plural

FLEET_FORMAT = 1


VALUE_WIDTH = 40


def fleet_value(value: Any, against: Any, width: int | None = VALUE_WIDTH) -> str:
    """A host's value, cut where it differs from `against` (the majority's, or the first
    other host's for the majority), whole with width None (--all, --markdown)."""
    text, other = (ABSENT_TEXT if v is ABSENT else whole(v) for v in (value, against))
    return text if width is None else cut_pair(text, other, width)[0]


def hosts_text(hosts: list[str], limit: int = 6) -> str:
    return ", ".join(hosts[:limit]) + (f" +{len(hosts) - limit}" if len(hosts) > limit else "")


def others_text(d: Disagreement, width: int | None = VALUE_WIDTH) -> str:
    return "; ".join(f"{hosts_text(hosts)}: {fleet_value(value, d.majority, width)}"
                     for value, hosts in d.others)


def fleet_summary(report: FleetReport) -> str:
    count = len(report.disagreements)
    head = f"fleet of {len(report.hosts)} snapshots: "
    # --section: the claim is about the sections compared; those left out are named
    left_out = f" (left out by --section: {', '.join(report.left_out)})" \
        if report.left_out else ""
    if not report.drift:
        unread = f" ({plural(len(report.unreadable), 'snapshot')} unreadable)" \
            if report.unreadable else ""
        return head + f"every compared fact agrees{left_out}" + unread + "."
    against = (f"between {' and '.join(report.hosts)}" if len(report.hosts) == 2
               else "from the majority")   # two hosts have no majority: name them both
    found = f"{count} fact{'s differ' if count != 1 else ' differs'} {against}"
    missing = f"; {plural(len(report.not_captured), 'section')} not captured" \
        if report.not_captured else ""
    unread = f"; {plural(len(report.unreadable), 'snapshot')} unreadable" \
        if report.unreadable else ""
    return head + found + missing + left_out + unread + "."


def majority_text(d: Disagreement, width: int | None = VALUE_WIDTH) -> str:
    """"majority 6.1 (30 of 32)"; in a tie, which hosts have the first value: no value
    stands for the fleet, so none is shown without its hosts."""
    value = fleet_value(d.majority, d.others[0][0] if d.others else d.majority, width)
    if d.tie:
        return f"no majority: {hosts_text(d.majority_hosts)}: {value}"
    return f"majority {value} ({len(d.majority_hosts)} of {d.total})"


FIELDS_SHOWN = 4   # fields of one section named in a could-not-compare line unless --all


def names_text(names: tuple[str, ...], full: bool = False) -> str:
    """"env, git, system.{boot_id, cmdline, governors, hostname +4}": whole sections, then
    each section's fields under its name once (all of them with `full`)."""
    fields: dict[str, list[str]] = {}
    for name in names:
        head, _, rest = name.partition(".")
        fields.setdefault(head, []).append(rest)
    shown = []
    for head, keys in fields.items():
        keys = [key for key in keys if key]
        if not keys:
            shown.append(head)
            continue
        cut = keys if full or len(keys) <= FIELDS_SHOWN else keys[:FIELDS_SHOWN]
        more = f" +{len(keys) - len(cut)}" if len(cut) < len(keys) else ""
        shown.append(f"{head}.{{{', '.join(cut)}{more}}}" if len(keys) > 1
                     else f"{head}.{keys[0]}")
    return ", ".join(shown)


def uncompared_lines(report: FleetReport, full: bool = False) -> list[str]:
    """One line a kind of paste: "could not compare, not in a torch collect_env output (4:
    a.txt, b.txt, ...): env, git, ...; b.txt also: system.cpu"."""
    lines = []
    for kind in report.uncompared:
        more = "".join(f"; {member} also: {names_text(names, full)}"
                       for member, names in kind.more)
        lines.append(f"could not compare, {kind.why} ({len(kind.members)}: "
                     f"{hosts_text(list(kind.members))}): {names_text(kind.names, full)}{more}")
    return lines


def benchmark_lines(report: FleetReport) -> list[str]:
    """The benchmark first: each host's runs against the others', when two hosts ran one."""
    return report.benchmark.lines() if report.benchmark else []


def fleet_human(report: FleetReport, color: bool = False, full: bool = False,
                width: int = DEFAULT_WIDTH) -> str:
    """With `full` (--all), values whole; every line folded to `width` (envsnap/fold.py)."""
    values = None if full else value_width(width, 6)
    out = benchmark_lines(report) + [fleet_summary(report), ""]
    for d in report.disagreements:
        where = Finding(d.section, d.path, None, None).where or "(section)"
        rank = paint(f"{d.rank:>3}", rank_colour(d.rank), color)
        out.append(f"  {rank} {d.section} {where}: {majority_text(d, values)}; "
                   f"{others_text(d, values)}")
        out.append(f"      {d.why}")
        move = git_move(d.detail)
        if move is not None:  # a node on another commit: the commits, as the pairwise diff lists
            for block in git_blocks(move, ("the majority", d.others[0][1][0]), False,
                                    max(width - 10, SUBJECT_MIN + 20)):
                out.append(f"        {block.title}" + (":" if block.lines else ""))
                out += [f"          {line}" for line in block.lines]
    for name, host, error in report.not_captured:
        out.append(f"  not captured: {name} on {host} ({error})")
    out += [f"  unreadable: {source} ({why})" for source, why in report.unreadable]
    out += [f"  {line}" for line in uncompared_lines(report, full)]
    return folded("\n".join(out).rstrip("\n") + "\n", width)


def fleet_json(report: FleetReport) -> str:
    # `benchmark`, `regression`, `left_out` and `uncompared` were added within version 1:
    # keys are added, never changed
    return dump_json({"envsnap_fleet": FLEET_FORMAT, "hosts": report.hosts, "drift": report.drift,
                     "benchmark": report.benchmark.as_json() if report.benchmark else None,
                     "regression": report.regression,
                     "disagreements": [d.as_json() for d in report.disagreements],
                     "left_out": report.left_out,
                     "not_captured": [{"section": s, "host": h, "error": e}
                                      for s, h, e in report.not_captured],
                     "unreadable": [{"source": source, "error": why}
                                    for source, why in report.unreadable],
                     "uncompared": [kind.as_json() for kind in report.uncompared]})


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
                f"{markdown_cell(majority_text(d, None))} | "
                f"{markdown_cell(others_text(d, None))} | "
                f"{markdown_cell(d.why)} |" for d in report.disagreements]
    out += [f"- not captured: {markdown_cell(f'{s} on {h} ({e})')}"
            for s, h, e in report.not_captured]
    out += [f"- unreadable: {markdown_cell(source)} ({markdown_cell(why)})"
            for source, why in report.unreadable]
    out += [f"- {markdown_cell(line)}" for line in uncompared_lines(report, True)]
    return "\n".join(out).rstrip("\n") + "\n"
