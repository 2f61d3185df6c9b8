"""`envsnap history` through the real CLI, on real captures of a real checkout: records
share their unchanged parts, migrate copies a YAML store with nothing lost, gc keeps what
the rule says, verify finds a damaged part."""
from __future__ import annotations

import json
import os
import random
import shutil
import time
import zlib
from datetime import datetime, timezone
from pathlib import Path

import pytest
from conftest import Cli
from helpers.gitrepos import Story

from envsnap.errors import ExitCode
from envsnap.history.retention import DAY, Retention, kept
from envsnap.history.store import History
from envsnap.snapshot.store import Store, dump_yaml

ROOT = Path(__file__).resolve().parents[2]
STORY = ROOT / "tests" / "data" / "h200x2-story" / "snapshots"


def store(cli: Cli) -> Store:
    return Store(cli.env["ENVSNAP_STORE"])


def disk_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def ok(cli: Cli, *args: str) -> str:
    result = cli(*args)
    assert result.returncode == 0, result.stdout + result.stderr
    return str(result.stdout)


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    return Path(Story(tmp_path / "story").checkout.path)


def record_ids(cli: Cli) -> list[str]:
    return [line.split()[0] for line in ok(cli, "history", "list").splitlines()[:-1]]


def test_an_unchanged_capture_adds_a_few_kilobytes(cli: Cli, checkout: Path) -> None:
    ok(cli, "capture", "local", "--repo", str(checkout), "--label", "first")
    ok(cli, "history", "migrate")
    history = History.of_store(store(cli))
    after_first = disk_bytes(history.root)
    ok(cli, "capture", "local", "--repo", str(checkout), "--label", "second")
    out = ok(cli, "history", "migrate")
    assert "migrated 1 snapshot" in out and "1 recorded before" in out
    growth = disk_bytes(history.root) - after_first
    yaml_size = store(cli).path_for("second").stat().st_size
    assert growth < 20_000 and growth < yaml_size / 3, (growth, yaml_size, after_first)
    first, second = record_ids(cli)
    for label, record in (("first", first), ("second", second)):
        assert json.loads(ok(cli, "history", "show", record, "--json")) == \
            json.loads(ok(cli, "show", label, "--json"))
    shown = ok(cli, "history", "show", second)
    assert "mine (signed with your key)" in shown
    assert "local" in ok(cli, "history", "list", "local")
    assert ok(cli, "history", "list", "elsewhere").startswith("no records")


def test_migrate_copies_a_yaml_store_with_nothing_lost(cli: Cli, checkout: Path) -> None:
    ok(cli, "capture", "local", "--repo", str(checkout), "--label", "mine")
    root = store(cli).root
    for name in ("good", "bad", "pre-restore-20261130-180827"):
        shutil.copy(STORY / f"{name}.yaml", root / f"{name}.yaml")
    (root / "run1").mkdir()
    foreign = Store(STORY).load("bad")
    del foreign["meta"]["signature"]   # unsigned: foreign
    (root / "run1" / "node1.yaml").write_text(dump_yaml(foreign))
    (root / "broken.yaml").write_text("schema: [\n")
    listed = ok(cli, "list")
    before = {path: path.read_bytes() for path in root.rglob("*.yaml")}
    result = cli("history", "migrate")
    assert result.returncode == 0, result.stderr
    assert "migrated 5 snapshots" in result.stdout
    assert "not migrated: broken (unreadable" in result.stdout
    assert {path: path.read_bytes() for path in root.rglob("*.yaml")} == before   # they stay
    assert ok(cli, "list") == listed   # the history is no snapshot of `list`
    records = dict(line.split(" -> ") for line in result.stdout.splitlines() if " -> " in line)
    assert sorted(records) == ["bad", "good", "mine", "pre-restore-20261130-180827",
                               "run1/node1"]
    for label, record in records.items():
        assert json.loads(ok(cli, "history", "show", record, "--json")) == \
            json.loads(ok(cli, "show", label, "--json")), label
    # a foreign snapshot stays foreign; migrating again adds nothing
    assert "foreign" in ok(cli, "history", "show", records["run1/node1"])
    again = ok(cli, "history", "migrate")
    assert "migrated 0 snapshots" in again and "5 recorded before" in again
    assert ok(cli, "history", "verify").startswith("5 records")


def test_gc_keeps_what_the_rule_says_of_records_at_random_times(cli: Cli,
                                                                checkout: Path) -> None:
    ok(cli, "capture", "local", "--repo", str(checkout), "--label", "now")
    document = store(cli).load("now")
    history = History.of_store(store(cli))
    rng = random.Random(42)
    now = time.time()
    for number in range(30):
        when = now - rng.uniform(0, 30 * DAY)
        document["meta"]["captured_at"] = datetime.fromtimestamp(when, timezone.utc).isoformat()
        document["volatile"]["system"] = {"uptime_seconds": float(number)}
        del document["meta"]["signature"]
        history.record(document, reason="every 10m")
    for path in history.root.rglob("*"):   # written a day ago: past gc's grace
        os.utime(path, (now - DAY,) * 2)
    expected = kept(history.manifests(), Retention(every=DAY, hourly=5 * DAY, daily=None),
                    now)
    dry = ok(cli, "history", "gc", "--dry-run", "--keep", "every=1d,hourly=5d")
    assert len(record_ids(cli)) == 30
    assert dry.count("would delete local/") == 30 - len(expected)
    out = ok(cli, "history", "gc", "--keep", "every=1d,hourly=5d")
    assert f"deleted {30 - len(expected)} records and" in out
    assert set(record_ids(cli)) == expected
    assert ok(cli, "history", "verify").startswith(f"{len(expected)} records")
    assert "deleted 0 records and 0 parts" in ok(cli, "history", "gc", "--keep",
                                                  "every=1d,hourly=5d")
    bad = cli("history", "gc", "--keep", "yearly=3d")
    assert bad.returncode == ExitCode.USAGE and len(bad.stderr.splitlines()) == 1


def test_verify_finds_a_damaged_part_and_show_refuses_it(cli: Cli, checkout: Path) -> None:
    ok(cli, "capture", "local", "--repo", str(checkout), "--label", "now")
    ok(cli, "history", "migrate")
    (record,) = record_ids(cli)
    history = History.of_store(store(cli))
    manifest = history.manifest_path(record).read_text().split("\n")[1]
    places = dict((tuple(at), digest) for at, digest in json.loads(manifest)["parts"])
    repo = places[("facts", "git", "repos", str(checkout))]
    part = history.part_path(repo)
    part.write_bytes(zlib.compress(zlib.decompress(part.read_bytes()).replace(b"main",
                                                                               b"mine")))
    result = cli("history", "verify")
    assert result.returncode == ExitCode.INVALID
    assert f"{record}: part {repo} is damaged (its content does not match its name)" in \
        " ".join(result.stdout.split())
    shown = cli("history", "show", record)
    assert shown.returncode == ExitCode.INVALID
    assert len(shown.stderr.splitlines()) == 1 and "is damaged" in shown.stderr
    missing = cli("history", "show", "local/20200101T000000.000000Z")
    assert missing.returncode == ExitCode.USAGE and "no history record" in missing.stderr
