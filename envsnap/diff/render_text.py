"""Diff reports for a person: the verdict first, findings in rank order, what was checked.

Pure functions from report to text; envsnap/cli/ decides where the text goes, whether it is
coloured (only on a terminal) and how wide it may be (the human form is folded to that width by
envsnap/fold.py; its table's cells are cut to it). Long parts (commits, patches,
sitecustomize) are blocks that the human form indents and the markdown form folds into
<details>.
"""
from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, NamedTuple

from envsnap.diff import patch_summary
from envsnap.diff.compare import DiffReport
from envsnap.diff.findings import (
    ABSENT_TEXT,
    ADDED,
    MISSING,
    NOT_CAPTURED,
    REMOVED,
    Finding,
    GitMove,
    MovedCommit,
    change,
    cut,
    git_move,
    human_bytes,
    path_text,
    short,
    whole,
)
from envsnap.diff.rules import PERFORMANCE
from envsnap.fold import DEFAULT_WIDTH, fold, keep, plain, shown_width
from envsnap.text import plural

if TYPE_CHECKING:
    from envsnap.snapshot.records import Blob, CustomizeFile

VERDICT_ITEMS = 4       # the verdict is a paragraph, not a second list of findings
COMMITS_SHOWN = 30      # commits listed per move unless --all
HOT_SHOWN = 12          # hot commits listed per move unless --all: those of highest score
TEXT_LINES_SHOWN = 40   # lines of a small text diff shown unless --all
WHERE_WIDTH = 64
WHERE_COLUMN_MIN = 16   # the path column at least this wide; a longer path pushes its value
VALUE_WIDTH = 40        # each side of a change, cut where the two differ, at most
VALUE_MIN = 16          # ... and at least, however narrow the terminal
BLOCK_WIDTH = 136       # a commit's line in markdown and reports (the human form: its width)
SUBJECT_MIN = 12        # a commit's subject is cut no shorter than this (the files matter more)
KEY_WIDTH = 24          # a worker's command line as a path key: both ends kept
RED, YELLOW, DIM, BOLD, RESET = "\033[31m", "\033[33m", "\033[2m", "\033[1m", "\033[0m"


class Block(NamedTuple):
    """A long part of a finding: a title and lines, code (a patch) or prose."""

    title: str
    lines: list[str]
    code: bool = False


# ---- the verdict ----------------------------------------------------------------------------

# When the benchmark moved, "nothing else changed" would read as "nothing explains it": the
# findings listed are the candidates, or, without any, envsnap's record does not hold the cause.
# The verdict stands above the findings in text and markdown and beside them in JSON: its
# sentences point at them by name, never by place.
CANDIDATES = "the benchmark moved; the findings listed are the candidates"
UNEXPLAINED = ("the benchmark moved but no recorded fact explains it{same}: look at what "
               "envsnap does not record (other jobs on the GPUs or the network, the "
               "benchmark's input), at the readings (diff --all) and at the runs' GPU "
               "telemetry (envsnap report)")
# With --section, a section left out may hold the cause (left_out_text names it): "no recorded
# fact" would be false, so the claim stays within the sections compared.
UNEXPLAINED_HERE = "the benchmark moved but nothing in {compared} explains it{same}"


def verdict(report: DiffReport) -> str:
    """The benchmark line first when both sides hold runs, then the environment's paragraph."""
    return "\n".join(verdict_lines(report))


def verdict_lines(report: DiffReport) -> list[str]:
    lines = [report.benchmark.line()] if report.benchmark else []
    return lines + [environment_verdict(report)]


def environment_verdict(report: DiffReport) -> str:
    """The environment's paragraph as JSON and markdown hold it (see verdict_paragraph)."""
    return plain(verdict_paragraph(report))


def names_text(names: list[str]) -> str:
    return ", ".join(names[:-1]) + (" and " if len(names) > 1 else "") + names[-1]


def left_out_text(report: DiffReport) -> str:
    """Which sections --section left out, and which of them differ."""
    differ = report.left_out_differ
    same = [name for name in report.left_out if name not in differ]
    parts = []
    if differ:
        parts.append(f"{names_text(differ)}, which {'differs' if len(differ) == 1 else 'differ'}"
                     " (diff without --section shows how)")
    if same:
        parts.append(f"{names_text(same)}, the same in both")
    return "left out by --section: " + "; ".join(parts)


def verdict_paragraph(report: DiffReport) -> str:
    """The environment's paragraph, its key phrases kept whole when the human form folds it
    (fold.keep): "no drift" split after "no" reads as a claim of drift."""
    moved = report.benchmark is not None and report.benchmark.moved
    # Every claim is about the sections compared: "in git and env" when --section chose them.
    scope = f" in {names_text(report.sections)}" if report.left_out and report.sections else ""
    parts = []
    if not report.same_host and report.a.host == report.b.host and \
            not (report.a.hostname and report.b.hostname):
        parts.append(f"one host or two, not known: {report.a.label} and {report.b.label} name "
                     "no hostname (host-specific facts may differ by nature)")
    elif not report.same_host:
        parts.append(f"different hosts: {report.a.label} is {report.a.name}, {report.b.label} "
                     f"is {report.b.name} (host-specific facts differ by nature)")
    important = [f for f in report.findings if f.rank >= PERFORMANCE]
    minor = len(report.findings) - len(important)
    parts += [f.why for f in important[:VERDICT_ITEMS]]
    if len(important) > VERDICT_ITEMS:
        parts.append(f"{len(important) - VERDICT_ITEMS} more that may affect performance")
        if moved:
            parts.append(CANDIDATES)
    elif important:
        parts.append(CANDIDATES if moved else
                     f"{keep('nothing else')}{scope} that affects performance changed")
    elif moved and report.left_out_differ:
        same = "" if report.findings else " (every compared fact is the same)"
        parts.append(UNEXPLAINED_HERE.format(compared=names_text(report.sections), same=same))
    elif moved:
        same = "" if report.findings else " (every compared fact is the same)"
        parts.append(UNEXPLAINED.format(same=same))
    elif report.findings:
        parts.append(f"nothing{scope} that affects performance changed")
    else:
        leftout = "" if report.include_volatile else " (volatile readings left out: --all)"
        parts.append(f"{keep('no drift')}{scope}: every compared fact is the same{leftout}")
    if minor:
        parts.append(f"{plural(minor, 'minor change')} listed")
    if report.left_out:
        parts.append(left_out_text(report))
    parts += report.notes
    return "; ".join(parts) + "."


# ---- one finding ----------------------------------------------------------------------------

def change_text(f: Finding, width: int | None = 40) -> str:
    """"before -> after" for every kind, a side without a value as "(absent)"; values cut
    where they differ to `width`, whole with None (--all, --markdown)."""
    if f.kind == NOT_CAPTURED:
        return "not captured"
    if f.kind == MISSING:   # nothing to compare the worker with: the shell's value beside it
        shell = whole(f.before) if width is None else cut(whole(f.before), width)
        return f"{ABSENT_TEXT} (shell: {shell})"
    return change(None if f.kind == ADDED else f.before, None if f.kind == REMOVED else f.after,
                  width)


def value_width(width: int, indent: int) -> int:
    """Each side of "before -> after" on a line of `width` under `indent` columns."""
    return max(VALUE_MIN, min(VALUE_WIDTH, (width - indent - len(" -> ")) // 2))


def where_text(f: Finding) -> str:
    """Where the fact is, as the text form's column shows it: a long key (a worker's
    command line, a repo's path) keeps both ends, the whole at most WHERE_WIDTH."""
    return short(path_text(f.path, KEY_WIDTH), WHERE_WIDTH) or "(section)"


def blocks(f: Finding, names: tuple[str, str], full: bool,
           width: int | None = None) -> list[Block]:
    """A finding's long parts as markdown and reports show them: unfolded (`width` None:
    BLOCK_WIDTH), so no glue."""
    return [block if block.code else Block(plain(block.title), [plain(line) for line in
                                                                 block.lines])
            for block in glued_blocks(f, names, full, width)]


def glued_blocks(f: Finding, names: tuple[str, str], full: bool,
                 width: int | None = None) -> list[Block]:
    """A finding's long parts; a commit's line fits `width`, the human form's (see
    commit_line), its key phrases glued for that form's fold (fold.keep)."""
    move = git_move(f.detail)
    if move is not None:
        return git_blocks(move, names, full, width)
    found = [b for b in patch_blocks(f, names, full)]
    if f.section == "python_env" and f.path[:1] in (("customize",), ("customize_shadowed",)):
        found += text_diff_blocks(f, names, full)
    return found


def git_blocks(detail: GitMove, names: tuple[str, str], full: bool,
               width: int | None = None) -> list[Block]:
    found = []
    if detail["moves"]:
        found.append(Block(f"reflog of {names[1]} since {names[0]}",
                           [f"{m['selector']}  {m['message']}" for m in detail["moves"]]))
    elif not detail.get("reflog_reaches"):
        found.append(Block("reflog", [f"the reflog of {names[1]} does not reach back to "
                                      f"{short(detail['old'])}"]))
    if detail.get("rebased"):
        return found + rebase_blocks(detail, full, width)
    for commits, title in ((detail["added"], "commits now in HEAD"),
                           (detail["dropped"], "commits no longer in HEAD")):
        if commits:
            hot = sum(1 for c in commits if c["hot"])
            found.append(Block(f"{title}: {len(commits)}, {hot} on a hot path",
                               commit_lines(commits, full, width)))
    if detail.get("note"):
        found.append(Block("history", [detail["note"]]))
    return found


def rebase_blocks(detail: GitMove, full: bool, width: int | None = None) -> list[Block]:
    """A rebase as the user did it: the commits pulled, and their own commits replayed on top."""
    pairs = detail["rebased"]
    copies = {pair["new"] for pair in pairs}
    pulled = [c for c in detail["added"] if c["sha"] not in copies]
    subjects = {c["sha"]: c for c in detail["added"]}
    hot = sum(1 for c in pulled if c["hot"])
    found = [Block(f"commits pulled: {len(pulled)}, {hot} on a hot path",
                   commit_lines(pulled, full, width))] if pulled else []
    found.append(Block(f"local commits rebased onto them: {len(pairs)}",
                       [f"{'*' if subjects[p['new']]['hot'] else ' '} {short(p['old'])} -> "
                        f"{short(p['new'])} {subjects[p['new']]['subject']}" for p in pairs]))
    return found


def commits_shown(commits: list[MovedCommit]) -> list[MovedCommit]:
    """The HOT_SHOWN hot commits of highest score (ties: the newer), whatever their place in
    history (a big pull's hot commits may be its oldest: they must not fold away);
    the newest others fill what is left of the window, unless a hot commit was left out: no
    commit off the hot paths is shown in its place. In history order."""
    hot = [c for c in commits if c["hot"]]
    kept = {id(c) for c in sorted(hot, key=lambda c: -c.get("score", 0))[:HOT_SHOWN]}
    others = max(0, COMMITS_SHOWN - len(kept)) if len(kept) == len(hot) else 0
    shown = []
    for commit in commits:
        if id(commit) in kept:
            shown.append(commit)
        elif not commit["hot"] and others:
            shown.append(commit)
            others -= 1
    return shown


def commit_lines(commits: list[MovedCommit], full: bool, width: int | None = None) -> list[str]:
    """One line a commit, in history order: a hot one with its hot files (each with the
    pattern that named it), then "+N other files"; --all adds every file on a line of its own.
    What the window leaves out is counted on one line."""
    shown = commits if full else commits_shown(commits)
    lines = []
    for commit in shown:
        if commit.get("shallow_boundary"):  # fetched without its parents: changes unknown
            lines.append(commit_line(commit, ["shallow boundary: its parents and files were "
                                              "not fetched"], "", width=width))
        elif full:
            lines.append(commit_line(commit, [], "", whole=True))
            patterns = commit.get("hot_patterns", {})
            lines += [f"    {path}" + (f"  [{patterns[path]}: {commit['hot_files'][path]}]"
                                       if path in patterns else "")
                      for path in commit["files"]]
        elif commit["hot"]:
            lines.append(hot_commit_line(commit, width))
        else:
            lines.append(commit_line(commit, [plural(len(commit["files"]), "file")], "",
                                     width=width))
    if len(commits) > len(shown):
        lines.append(commits_left_out(commits, shown))
    return lines


def commits_left_out(commits: list[MovedCommit], shown: list[MovedCommit]) -> str:
    """"  ... N more, K of them on a hot path (--all lists them)"."""
    hot_left = sum(1 for c in commits if c["hot"]) - sum(1 for c in shown if c["hot"])
    which = (f", {hot_left} of them on a hot path" if hot_left
             else ", none on a hot path")
    return f"  ... {len(commits) - len(shown)} more{which} (--all lists them)"


def commit_line(commit: MovedCommit, parts: list[str], tail: str, whole: bool = False,
                width: int | None = None) -> str:
    """"* 0be30d4 Fix PCG MoE Error  <parts>, ...<tail>": the subject cut so that the line
    stays within `width` (--all keeps it whole). `width` is that of the human form, which
    folds the line: when the parts leave the subject too little room (a narrow terminal, a
    long path), the subject takes the line and the parts fold under it. None: a line nothing
    folds (markdown, a report), within BLOCK_WIDTH."""
    mark = "*" if commit["hot"] else " "
    listed = ", ".join(parts) + tail
    head = f"{mark} {short(commit['sha'])} "
    room = (width or BLOCK_WIDTH) - len(head) - (len(listed) + 2 if listed else 0)
    if width is not None and room < 2 * SUBJECT_MIN:
        room = width - len(head)
    subject = str(commit["subject"] or "")
    subject = subject if whole else short(subject, max(SUBJECT_MIN, room))
    return f"{head}{subject}  {listed}" if listed else f"{head}{subject}"


def hot_commit_line(commit: MovedCommit, width: int | None = None) -> str:
    """As many hot files as the line holds (at least one), then what is left, counted."""
    patterns = commit.get("hot_patterns", {})
    hot = [f"{path} [{patterns.get(path, area)}]" for path, area in commit["hot_files"].items()]
    parts: list[str] = []
    for item in hot:
        line = commit_line(commit, parts + [item], others_text(commit, len(parts) + 1),
                           width=width)
        if parts and len(line) > (width or BLOCK_WIDTH):
            break
        parts.append(item)
    return commit_line(commit, parts, others_text(commit, len(parts)), width=width)


def others_text(commit: MovedCommit, shown: int) -> str:
    """" +12 other files (2 hot)": the files a commit line leaves out."""
    others = len(commit["files"]) - shown
    hot_left = len(commit["hot_files"]) - shown
    if others <= 0:
        return ""
    return " " + keep(f"+{others} other {'file' if others == 1 else 'files'}" +
                      (f" ({hot_left} hot)" if hot_left else ""))


def patch_blocks(f: Finding, names: tuple[str, str], full: bool) -> list[Block]:
    """Patches inside a finding: in full with --all, else which files' hunks changed."""
    sides = [dict(patch_summary.blobs_in(value)) for value in (f.before, f.after)]
    found = []
    for where in list(sides[0]) + [w for w in sides[1] if w not in sides[0]]:
        before, after = (side.get(where) for side in sides)
        if full:
            found += [Block(f"{where} in {name}: {blob_summary(blob)}",
                            patch_summary.shown_text(blob).splitlines(), code=True)
                      for name, blob in zip(names, (before, after)) if blob and blob.get("bytes")]
        elif before and after and before.get("bytes") and after.get("bytes"):
            found.append(Block(f"{where}: {blob_summary(before)} -> {blob_summary(after)}",
                               file_change_lines(patch_summary.file_changes(before, after))))
        else:
            found += [Block(f"{where} in {name}: {blob_summary(blob)}",
                            capped([f"  {p}" for p in patch_summary.summary(blob)["files"]],
                                   "files"))
                      for name, blob in zip(names, (before, after)) if blob and blob.get("bytes")]
    return found


def file_change_lines(changes: dict[str, list[str]]) -> list[str]:
    lines = [f"{how} {path}" for how, key in (("~", "changed"), ("+", "added"), ("-", "removed"))
             for path in changes[key]]
    return capped(lines, "files") or ["(same files, same hunks: only the header or hash moved)"]


def capped(lines: list[str], what: str) -> list[str]:
    if len(lines) <= COMMITS_SHOWN:
        return lines
    return lines[:COMMITS_SHOWN] + [f"  ... {len(lines) - COMMITS_SHOWN} more {what} "
                                    "(--all shows the patches)"]


def blob_summary(blob: Blob) -> str:
    info = patch_summary.summary(blob)
    flags = [flag for flag in ("binary", "truncated", "redacted") if info.get(flag)]
    return (f"{human_bytes(info['bytes'])}, sha256 {str(info['sha256'])[:12]}, "
            f"{plural(len(info['files']), 'file')}" + (f" ({', '.join(flags)})" if flags else ""))


def text_diff_blocks(f: Finding, names: tuple[str, str], full: bool) -> list[Block]:
    """sitecustomize and friends are short and decisive: show how their text changed."""
    if len(f.path) != 2:   # a field of the hook's record, or all hooks: no one text to diff
        return []
    files: tuple[CustomizeFile | None, CustomizeFile | None] = (f.before, f.after)
    before, after = (file.get("content") if file is not None else None for file in files)
    if before is None and after is None:
        return []
    lines = list(difflib.unified_diff(str(before or "").splitlines(),
                                      str(after or "").splitlines(), names[0], names[1],
                                      lineterm=""))
    if not full and len(lines) > TEXT_LINES_SHOWN:
        lines = lines[:TEXT_LINES_SHOWN] + [f"... {len(lines) - TEXT_LINES_SHOWN} more lines "
                                            "(--all shows them)"]
    return [Block(f"{f.where} text", lines, code=True)]


# ---- the human form ---------------------------------------------------------------------------

def paint(text: str, code: str, color: bool) -> str:
    return f"{code}{text}{RESET}" if color else text


def rank_colour(rank: int) -> str:
    return RED if rank >= 80 else YELLOW if rank >= PERFORMANCE else DIM


def header(report: DiffReport) -> str:
    a, b = report.a, report.b
    return (f"envsnap diff {a.label} ({a.name}, {a.captured_at}) -> "
            f"{b.label} ({b.name}, {b.captured_at})")


def restates_the_row(f: Finding) -> bool:
    """The catch-all rules (a reading, an unranked fact) explain nothing the row does not
    already show: "system loadavg.1m (reading) 0.08 -> 0.22". The rule says so; the why's
    text is not read back (a not-captured why starts the same way and holds the error)."""
    return f.why_restates_row


def row_lines(head: str, change: str, width: int, under: int) -> list[str]:
    """A finding's row: on one line when it fits, else its change on the next line under the
    path column (the row's two halves read apart), folded only when even that is too long."""
    line = f"{head}  {change}"
    if shown_width(line) <= width:
        return [line]
    if under + shown_width(change) <= width:
        return fold(head, width, under) + [" " * under + change]
    return fold(line, width, under)


def human(report: DiffReport, color: bool = False, full: bool = False,
          width: int = DEFAULT_WIDTH) -> str:
    """Every line within `width` but for an unbreakable token (fold.py). A patch's or a hook's
    line of code folds too, at its spaces, its continuation four deeper than the code."""
    names = (report.a.label, report.b.label)
    out = [*fold(paint(header(report), BOLD, color), width), ""]
    if report.benchmark:
        line = report.benchmark.line()
        out += fold(paint(line, RED, color) if report.benchmark.regression else line, width)
    # the paragraph stays flush: it is prose, its lines read on as one
    out += [*fold(verdict_paragraph(report), width, under=0), ""]
    if report.findings:
        section_w = max(len(f.section) for f in report.findings)
        wheres = [where_text(f) for f in report.findings]
        # a long path pushes its own row's value, not every row's
        where_w = min(max(len(where) for where in wheres), max(WHERE_COLUMN_MIN, width // 3))
        under = 7 + section_w   # the path column
        indent = " " * under
        values = None if full else value_width(width, under)
        block_width = max(width - under - 4, SUBJECT_MIN + 20)
        for f, where in zip(report.findings, wheres):
            rank = paint(f"{f.rank:>3}", rank_colour(f.rank), color)
            volatile = " (reading)" if f.volatile else ""
            out += row_lines(f"  {rank} {f.section:<{section_w}} {where:<{where_w}}",
                             f"{change_text(f, values)}{volatile}", width, under)
            if not restates_the_row(f):
                out += fold(f"{indent}{f.why}", width)
            for block in glued_blocks(f, names, full, block_width):
                out += fold(f"{indent}  {block.title}" + (":" if block.lines else ""), width)
                # a line folded continues past a commit's mark and sha: the shas stay a
                # column; a line of code past the code's own indent
                out += [part for line in block.lines
                        for part in fold(f"{indent}    {line}", width,
                                         under + 8 if not block.code else None)]
        out.append("")
    if report.unchanged:
        out += fold(f"unchanged: {', '.join(report.unchanged)}", width)
    return "\n".join(out).rstrip("\n") + "\n"
