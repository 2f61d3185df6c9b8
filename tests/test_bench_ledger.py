"""bench/'s results ledger stays a record: every row complete and dated in order per script,
the table in bench/README.md the one the ledger generates, every benchmark writing to it,
and the helper writing what it says (the commit read from .git, the machine, the figure)."""
from __future__ import annotations

import csv
import datetime
import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from helpers.paths import ROOT

BENCH = ROOT / "bench"


def load_ledger() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ledger", BENCH / "ledger.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


ledger = load_ledger()


def test_every_row_is_complete_and_each_scripts_dates_are_in_order() -> None:
    rows = ledger.read()
    assert rows, "the ledger is empty"
    last: dict[str, str] = {}
    for row in rows:
        assert (BENCH / row.script).is_file(), f"{row.script}: no such script in bench/"
        assert row.date >= last.get(row.script, ""), f"{row.script}: {row.date} after a later row"
        last[row.script] = row.date


def test_the_readme_table_is_the_one_the_ledger_generates() -> None:
    readme = (BENCH / "README.md").read_text(encoding="utf-8")
    assert readme == ledger.with_table(readme, ledger.read()), \
        "bench/README.md's table is stale: run `python bench/ledger.py update`"


def test_every_benchmark_records_its_figures() -> None:
    scripts = sorted(BENCH.glob("bench_*.py"))
    assert len(scripts) == 22
    silent = [path.name for path in scripts if "ledger.record(__file__" not in path.read_text()]
    assert silent == []


def test_an_incomplete_row_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "ledger.tsv"
    path.write_text("\t".join(ledger.COLUMNS) + "\n" +
                    "2026-12-04\tabc\tm\tbench_x.py\tmetric\t1.5\tx\t\t-\trun\n")
    with pytest.raises(ValueError, match="non-empty"):
        ledger.read(path)


def test_the_table_says_whether_each_target_is_met() -> None:
    def row(value: str, target: str) -> object:
        return ledger.Row("2026-12-04", "0" * 40, "m", "bench_x.py", "m", value, "x", "-",
                          target, "run")
    assert [ledger.met(row("1.2", "<= 1.3")), ledger.met(row("1.4", "<= 1.3")),
            ledger.met(row("16", ">= 15")), ledger.met(row("9", "<= 10%")),
            ledger.met(row("2", "-"))] == ["yes", "no", "yes", "yes", ""]


def git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "core.hooksPath=/dev/null", "-c", "user.name=t",
                           "-c", "user.email=t@example.invalid", *args], cwd=folder,
                          check=True, capture_output=True, text=True).stdout.strip()


def test_record_appends_a_row_with_the_commit_read_from_git_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "commit", "-q", "--allow-empty", "-m", "one")
    head = git(repo, "rev-parse", "HEAD")
    assert ledger.commit(repo) == head
    git(repo, "pack-refs", "--all")   # the branch now only in packed-refs
    assert ledger.commit(repo) == head
    git(repo, "worktree", "add", "-q", "-b", "other", str(tmp_path / "wt"))
    assert ledger.commit(tmp_path / "wt") == head

    out = tmp_path / "out.tsv"
    out.write_text("\t".join(ledger.COLUMNS) + "\n")
    monkeypatch.setenv("BENCH_LEDGER", str(out))
    ledger.record(str(BENCH / "bench_demo.py"), "demo / budget", 0.5123456, "x", "60 s", "< 1.0")
    (row,) = ledger.read(out)
    assert (row.script, row.metric, row.value, row.unit, row.baseline, row.target,
            row.source) == ("bench_demo.py", "demo / budget", "0.5123", "x", "60 s", "< 1.0",
                            "run")
    assert row.date == datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    assert row.commit == ledger.commit() and "cores" in row.machine

    monkeypatch.setenv("BENCH_LEDGER", "off")
    ledger.record(str(BENCH / "bench_demo.py"), "demo / budget", 0.6, "x")
    assert len(list(csv.reader(out.open(), delimiter="\t"))) == 2
