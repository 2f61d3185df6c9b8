"""Renderings of a diff report: verdict, human (colour only when asked), JSON, markdown."""
from __future__ import annotations

import json
from typing import Any

import pytest
from helpers.diffdata import H200_BUS, edited, h200

from envsnap.diff import findings, patch_summary, render_formats
from envsnap.diff import render_text as render
from envsnap.diff.compare import DiffOptions, diff
from envsnap.diff.findings import MovedCommit

GOOD = h200()
BINARY = ("diff --git a/w.bin b/w.bin\nindex 1..2 100644\nGIT binary patch\nliteral 3\n"
          "KcmZQzWMT#Y01f~L\n\nliteral 0\nHcmV?d00001\n\n"
          "diff --git a/k.py b/k.py\n--- a/k.py\n+++ b/k.py\n@@ -1 +1 @@\n-x\n+```y\n")


def many_changes(document: dict[str, Any]) -> None:
    document["facts"]["env"]["shell"].update(NCCL_ALGO="Tree", NCCL_PROTO="Simple",
                                             CUDA_LAUNCH_BLOCKING="1", TORCH_X="1",
                                             NCCL_IB_DISABLE="1")
    document["facts"]["nvidia"]["gpus"][H200_BUS]["name"] = "NVIDIA H200 NVL"  # minor


def with_patch(text: str) -> Any:
    def change(document: dict[str, Any]) -> None:
        document["facts"]["git"] = {"repos": {"/r": {
            "head": "a" * 40, "history": [], "reflog": [], "stashes": {},
            "uncommitted": {"dirty": bool(text), "digest": text[:9], "patch": {
                "bytes": len(text), "sha256": str(len(text)) * 4, "truncated": False,
                "text": text}}}}}
    return change


CLEAN = edited(GOOD, with_patch(""))


def test_verdict_lists_a_few_and_counts_the_rest() -> None:
    report = diff(GOOD, edited(GOOD, many_changes))
    verdict = render.verdict(report)
    assert verdict.count(" in the shell ") == render.VERDICT_ITEMS
    assert verdict.endswith("; 1 more that may affect performance; 1 minor change listed.")


def test_human_is_plain_unless_colour_is_asked_for() -> None:
    report = diff(GOOD, edited(GOOD, many_changes))
    plain, coloured = render.human(report), render.human(report, color=True)
    assert "\033[" not in plain and render.RED in coloured
    lines = plain.splitlines()
    assert lines[0].startswith("envsnap diff good (vm, t) -> good (vm, t)")
    # the verdict's paragraph, broken between words to fit 80 columns (the default width)
    paragraph = plain.split("\n\n")[1].split("\n")
    assert " ".join(paragraph) == render.verdict(report)
    assert max(len(line) for line in lines) <= 80 < len(render.verdict(report))
    wide = render.human(report, width=200).splitlines()
    assert len(wide) < len(lines) and max(len(line) for line in wide) <= 200
    assert lines[-1] == "unchanged: driver, kernel module, CUDA, NCCL, torch, PCIe, sitecustomize"


def test_patches_summarised_by_default_and_binary_never_dumped() -> None:
    report = diff(CLEAN, edited(GOOD, with_patch(BINARY)))
    short = render.human(report)
    assert "2 files (binary)" in short and "KcmZQz" not in short
    full = render.human(report, full=True)
    assert "+```y" in full and "KcmZQz" not in full and "[GIT binary patch:" in full
    assert "HcmV?d" not in full  # the reverse hunk goes too


def test_json_envelope_summarises_unless_all() -> None:
    report = diff(CLEAN, edited(GOOD, with_patch(BINARY)))
    summary = json.loads(render_formats.as_json(report))
    patch = summary["findings"][0]["after"]["patch"]
    assert patch == {"binary": True, "bytes": len(BINARY), "files": ["w.bin", "k.py"],
                     "sha256": patch["sha256"]}
    full = json.loads(render_formats.as_json(report, full=True))
    text = full["findings"][0]["after"]["patch"]["text"]
    assert "+```y" in text and "KcmZQz" not in text
    # still version 1: keys are only ever added (benchmark, regression: issue 14; left_out,
    # left_out_differ: issue 24)
    assert summary["envsnap_diff"] == 1
    assert set(summary) == {"envsnap_diff", "a", "b", "same_host", "drift", "verdict",
                            "sections", "volatile_included", "findings", "unchanged", "notes",
                            "benchmark", "regression", "left_out", "left_out_differ"}
    assert summary["benchmark"] is None and summary["regression"] is False   # no runs here
    assert set(summary["findings"][0]) == {"section", "path", "where", "kind", "rank", "why",
                                           "before", "after", "volatile", "detail"}


def test_markdown_fence_outlasts_backticks_in_a_patch() -> None:
    report = diff(CLEAN, edited(GOOD, with_patch(BINARY)))
    markdown = render_formats.markdown(report, full=True)
    assert "````diff" in markdown and "<details>" in markdown
    assert "| 78 | git | `repos[/r].uncommitted` |" in markdown


def test_sitecustomize_text_change_is_shown() -> None:
    def tweak(document: dict[str, Any]) -> None:
        site = document["facts"]["python_env"]["customize"]["sitecustomize"]
        site.update(content=site["content"] + "import os\nos.environ['NCCL_PROTO'] = 'LL'\n",
                    sha256="0" * 64)
    out = render.human(diff(GOOD, edited(GOOD, tweak)))
    assert "+os.environ['NCCL_PROTO'] = 'LL'" in out and "sitecustomize changed" in out


def test_pcie_finding_line_is_aligned() -> None:
    def change(document: dict[str, Any]) -> None:
        document["facts"]["nvidia"]["gpus"][H200_BUS]["pcie_width_current"] = 8
        document["facts"]["env"]["shell"]["NCCL_ALGO"] = "Tree"
    lines = render.human(diff(GOOD, edited(GOOD, change))).splitlines()
    shell = next(line for line in lines if "shell.NCCL_ALGO" in line)
    gpu = next(line for line in lines if "].pcie_width_current" in line)
    assert shell.index("shell.") == gpu.index("gpus[")
    assert shell.index("(absent) -> Tree") == gpu.index("16 -> 8")
    why = lines[lines.index(shell) + 1]
    assert why.index("NCCL_ALGO") == shell.index("shell.")


def test_a_reading_is_one_row_and_a_ranked_finding_keeps_its_why() -> None:
    def busy(document: dict[str, Any]) -> None:
        document["volatile"]["nvidia"]["gpus"][H200_BUS]["utilization_gpu_pct"] = 92
        document["facts"]["env"]["shell"]["NCCL_ALGO"] = "Tree"
    lines = render.human(diff(GOOD, edited(GOOD, busy), DiffOptions(include_volatile=True)))
    rows = lines.splitlines()
    reading = next(i for i, line in enumerate(rows) if "utilization_gpu_pct" in line)
    assert rows[reading].endswith("-> 92 (reading)")
    assert "utilization_gpu_pct" not in rows[reading + 1], "no line restating the row"
    shell = next(i for i, line in enumerate(rows) if "shell.NCCL_ALGO" in line)
    assert "NCCL_ALGO" in rows[shell + 1] and "shell" in rows[shell + 1]


def test_a_not_captured_row_keeps_its_why_with_the_error() -> None:
    # Its why starts like the row ("env processes[...].env ..."), yet it adds the error.
    def worker_env(env: dict[str, Any]) -> Any:
        def change(document: dict[str, Any]) -> None:
            document["facts"]["env"]["processes"] = {"5": {"cmdline": ["python3", "x.py"],
                                                           "env": env}}
        return change
    rows = render.human(diff(edited(GOOD, worker_env({"NCCL_PROTO": "LL"})),
                             edited(GOOD, worker_env({"error": "permission denied"})))
                        ).splitlines()
    row = next(i for i, line in enumerate(rows) if line.endswith("  not captured"))
    why = " ".join(line.strip() for line in rows[row + 1:row + 3])   # folded at 80 columns
    assert "(permission denied): not compared" in why


def test_blob_helpers() -> None:
    blob = {"bytes": 5, "sha256": "x", "base64": "aGVsbG8="}
    assert patch_summary.is_blob(blob) and patch_summary.is_binary(blob)
    assert patch_summary.readable(blob) == "hello"
    two = "diff --git a/a b/a\n+1\ndiff --git a/b c b/b c\n"
    assert patch_summary.patch_files(two) == ["a", "b c"]


def test_a_changed_patch_names_the_files_whose_hunks_moved() -> None:
    old = "diff --git a/a.py b/a.py\n+1\ndiff --git a/b.py b/b.py\n+2\n"
    new = "diff --git a/a.py b/a.py\n+1\ndiff --git a/b.py b/b.py\n+3\ndiff --git a/c b/c\n+4\n"
    report = diff(edited(GOOD, with_patch(old)), edited(GOOD, with_patch(new)))
    out = render.human(report)
    assert "~ b.py" in out and "+ c" in out and "a.py" not in out.split("patch: ")[1]
    assert patch_summary.file_changes({"text": new, "sha256": "", "bytes": 1},
                                {"text": old, "sha256": "", "bytes": 1}) == {
        "changed": ["b.py"], "added": [], "removed": ["c"]}


def test_a_hot_commit_line_shows_hot_files_with_their_patterns_then_counts_the_rest() -> None:
    hot = {f"python/sglang/srt/distributed/device_communicators/file_{n}.py": "communication"
           for n in range(6)}
    commit: MovedCommit = {
        "sha": "0be30d4" + "0" * 33, "subject": "Fix PCG MoE Error " * 8,
        "files": [*hot, "README.md", "docs/a.md"], "hot": ["communication"],
        "hot_files": hot, "hot_patterns": dict.fromkeys(hot, "device_communicators/")}
    (glued,) = render.commit_lines([commit], full=False)
    line = render.plain(glued)   # "+2 other files (5 hot)" glued for the human form's fold
    assert "+2 other files" not in glued
    shown = [path for path in hot if f"{path} [device_communicators/]" in line]
    assert line.startswith("* 0be30d4 Fix PCG") and len(line) <= render.BLOCK_WIDTH
    assert 1 <= len(shown) < len(hot)
    assert line.endswith(f" +{8 - len(shown)} other files ({len(hot) - len(shown)} hot)")
    full = render.commit_lines([commit], full=True)
    assert full[0] == f"* 0be30d4 {commit['subject']}" and len(full) == 1 + 8
    assert full[1] == f"    {next(iter(hot))}  [device_communicators/: communication]"
    assert full[-1] == "    docs/a.md"


@pytest.mark.parametrize(("before", "after", "shown"), [
    ("LL", "Simple", "LL -> Simple"),                      # short: whole
    (None, "LL", "(absent) -> LL"),
    ("/opt/a/" + "x" * 60 + "/one.xml", "/opt/a/" + "x" * 60 + "/two.xml",
     "...xxxxxxx/one.xml -> ...xxxxxxx/two.xml"),         # the differing end kept
    ("p" * 50 + "A" + "s" * 50, "p" * 50 + "B" + "s" * 50,
     "...ppppppppAssssssss... -> ...ppppppppBssssssss..."),  # both ends elided
    ("a" * 100, "b" * 100, "a" * 37 + "... -> " + "b" * 37 + "..."),   # all different
])
def test_a_cut_value_shows_where_the_two_differ(before: str | None, after: str,
                                                shown: str) -> None:
    assert findings.change(before, after) == shown
    assert findings.change(before, after, None) == f"{findings.whole(before)} -> {after}"
