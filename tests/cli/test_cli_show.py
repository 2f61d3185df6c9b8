"""`envsnap show` through the real CLI: one screen of the report's summary rows, the whole
document with --yaml or --json, and what failed during capture."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, Cli
from helpers.folded import overlong

EXAMPLE = ROOT / "snapshots" / "examples" / "story-good.yaml"
SCREEN_LINES = 40


def rows_of(shown: str) -> dict[str, str]:
    """Row name -> its value, wrapped lines joined again (the name column is 20 wide here)."""
    rows: dict[str, str] = {}
    name = ""
    for line in shown.splitlines()[:-2]:   # the rows, not the closing hint
        if line[:1].strip():
            name = line[:20].strip()
            rows[name] = line[20:]
        else:
            rows[name] += " " + line.strip()
    return rows


@pytest.fixture
def scli(cli: Cli) -> Cli:
    cli.env.pop("COLUMNS", None)   # not a terminal: the summary folds at 80 columns
    return cli


def test_show_is_one_screen_of_summary_rows(scli: Cli) -> None:
    # a path relative to the cwd, as a user types it: the width checked is the summary's own,
    # not that of the folder the suite runs in
    shutil.copy(EXAMPLE, scli.cwd / "story-good.yaml")
    result = scli("show", "story-good.yaml")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) <= SCREEN_LINES and overlong(result.stdout) == []
    assert lines[0] == "snapshot            story-good (story-good.yaml)"
    rows = rows_of(result.stdout)
    assert rows["host"] == "gpu-box (as root@gpu-box), captured 2025-12-09T16:20:05+00:00"
    assert rows["GPUs"] == "8 x NVIDIA RTX PRO 6000 Blackwell Server Edition, 97887 MiB each"
    assert rows["torch"] == "2.10.0+cu128 (built for CUDA 12.8)"
    assert rows["repo /root/sglang"].startswith('HEAD bba2fc4 "Add Kimi-K2.5 tool call parser"')
    assert rows["benchmark"].startswith("median 94.2 (min 92.8, max 95")
    assert rows["problems"] == "none: every collector ran"
    assert "digests" not in result.stdout and "sha256:" not in result.stdout
    assert lines[-1] == "the whole document: envsnap show story-good.yaml --yaml (or --json)"


def test_show_yaml_and_json_print_the_whole_document(scli: Cli) -> None:
    document = yaml.safe_load(EXAMPLE.read_text())
    as_yaml = scli("show", str(EXAMPLE), "--yaml")
    assert as_yaml.returncode == 0 and yaml.safe_load(as_yaml.stdout) == document
    as_json = scli("show", str(EXAMPLE), "--json")
    assert as_json.returncode == 0 and json.loads(as_json.stdout) == document
    both = scli("show", str(EXAMPLE), "--json", "--yaml")
    assert both.returncode == 2 and "not allowed with argument" in both.stderr


def test_show_lists_what_failed_during_capture(scli: Cli, tmp_path: Path) -> None:
    document = yaml.safe_load(EXAMPLE.read_text())
    document["meta"]["collectors"]["nvidia"]["error"] = "nvidia-smi: command not found"
    document["facts"]["nvidia"] = {}
    store = Path(scli.env["ENVSNAP_STORE"])
    store.mkdir()
    (store / "broken.yaml").write_text(yaml.safe_dump(document))
    result = scli("show", "broken")
    assert result.returncode == 0, result.stderr
    rows = rows_of(result.stdout)
    assert rows["snapshot"] == f"story-good ({store / 'broken.yaml'})"
    assert rows["GPUs"] == "not captured: nvidia-smi: command not found"
    assert rows["problems"] == "nvidia: nvidia-smi: command not found"


def test_a_snapshot_file_without_a_suffix_is_read_as_typed(scli: Cli) -> None:
    """A name that is no label in the store but a file here is that file: a good snapshot
    shows, anything else is an invalid snapshot (exit 4), not "no such label"."""
    shutil.copy(EXAMPLE, scli.cwd / "good-snapshot")
    (scli.cwd / "notes").write_text("x\n")
    shown = scli("show", "good-snapshot")
    assert shown.returncode == 0 and shown.stdout.startswith("snapshot "), shown.stderr
    bad = scli("diff", "notes", "good-snapshot")
    assert bad.returncode == 4, bad.stderr
    assert bad.stderr.startswith("envsnap: error: notes") and "Traceback" not in bad.stderr


def test_list_refuses_a_store_that_is_a_file(scli: Cli) -> None:
    Path(scli.env["ENVSNAP_STORE"]).write_text("not a folder\n")
    result = scli("list")
    assert result.returncode == 2
    assert result.stderr == (f"envsnap: error: store {scli.env['ENVSNAP_STORE']} "
                             "($ENVSNAP_STORE) is not a folder\n")
