"""Diff reports for machines (--json) and for issues (--markdown).

The JSON envelope is versioned ({"envsnap_diff": 1, ...}) and its keys are sorted, so a
consumer can rely on it: a version adds keys (`benchmark` and `regression` came in version 1)
but never drops one or changes what it means. Blobs are summarised there too unless --all,
and binary content is never emitted raw.
"""
from __future__ import annotations

import re

from envsnap.diff import patch_summary
from envsnap.diff.compare import DiffReport
from envsnap.diff.findings import Finding
from envsnap.diff.render_text import Block, blocks, change_text, header, verdict, verdict_lines
from envsnap.text import dump_json, markdown_cell, markdown_code

DIFF_FORMAT = 1
BACKTICKS = re.compile(r"`+")


# ---- --json ----------------------------------------------------------------------------------

def finding_json(f: Finding, full: bool) -> dict[str, object]:
    shown = f.as_json()
    fit = patch_summary.safe_tree if full else patch_summary.summarise_tree
    for key in ("before", "after", "detail"):
        shown[key] = fit(shown[key])
    return shown


def as_json(report: DiffReport, full: bool = False) -> str:
    return dump_json({
        "envsnap_diff": DIFF_FORMAT,
        "a": report.a.as_json(), "b": report.b.as_json(),
        "same_host": report.same_host, "drift": report.drift, "verdict": verdict(report),
        "sections": report.sections, "volatile_included": report.include_volatile,
        # left out by --section, and those of them that hold findings
        "left_out": report.left_out, "left_out_differ": report.left_out_differ,
        "findings": [finding_json(f, full) for f in report.findings],
        "unchanged": report.unchanged, "notes": report.notes,
        # null unless both sides hold runs; {"compared": false, "reason": ...} when they ran
        # different benchmarks
        "benchmark": report.benchmark.as_json() if report.benchmark else None,
        "regression": report.regression,
    })


# ---- --markdown --------------------------------------------------------------------------------

def fence(lines: list[str], language: str = "diff") -> list[str]:
    """A code fence longer than any run of backticks inside, so a patch cannot close it.
    Text that is not a patch is fenced too: an indented block ends at a carriage return in
    the data, and what follows it would be read as markdown (or HTML, inside <details>)."""
    runs = BACKTICKS.findall("\n".join(lines))
    ticks = "`" * max([3] + [len(run) + 1 for run in runs])
    return [ticks + language, *lines, ticks]


def details(block: Block) -> list[str]:
    """A block folded under its title; the title is HTML there (GitHub reads no markdown
    inside <summary>), escaped as such."""
    body = fence(block.lines, "diff" if block.code else "text")
    return ["<details>", f"<summary>{markdown_cell(block.title, html=True)}</summary>", "",
            *body, "", "</details>", ""]


def markdown(report: DiffReport, full: bool = False) -> str:
    names = (report.a.label, report.b.label)
    first, *rest = verdict_lines(report)   # the benchmark's line, when there is one
    out = [f"## {markdown_cell(header(report))}", "", f"**Verdict:** {markdown_cell(first)}", ""]
    out += [line for paragraph in rest for line in (markdown_cell(paragraph), "")]
    if report.findings:
        out += ["| rank | section | path | change | why |", "|---:|---|---|---|---|"]
        out += [f"| {f.rank} | {markdown_cell(f.section)} | "
                f"{markdown_code(f.where or '(section)')} | "
                f"{markdown_cell(change_text(f, None))} | {markdown_cell(f.why)} |"
                for f in report.findings]
        out.append("")
    for f in report.findings:
        for block in blocks(f, names, full):
            out += details(Block(f"{f.section} {f.where}: {block.title}", block.lines,
                                 block.code))
    if report.unchanged:
        out.append(f"**Unchanged:** {markdown_cell(', '.join(report.unchanged))}")
    return "\n".join(out).rstrip("\n") + "\n"
