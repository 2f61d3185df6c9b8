"""verify finds every broken record; gc keeps what the retention rule says, deletes every part
no record names, and never one a writer is using meanwhile."""
from __future__ import annotations

import os
import random
import subprocess
import sys
import time
import zlib
from datetime import datetime, timezone
from pathlib import Path

import pytest

from envsnap.errors import UsageError
from envsnap.history.parts import canonical, split
from envsnap.history.retention import DAY, HOUR, Retention, kept, parse_keep
from envsnap.history.store import History, Manifest, body_text
from envsnap.history.upkeep import DamagedManifest, DamagedPart, MissingPart, gc, verify
from envsnap.snapshot.records import Snapshot
from envsnap.snapshot.store import Store

ROOT = Path(__file__).resolve().parents[3]
STORY = ROOT / "tests" / "data" / "h200x2-story" / "snapshots"
NOW = datetime(2026, 12, 5, 12, 0, tzinfo=timezone.utc).timestamp()


def at(epoch: float, number: int) -> Snapshot:
    """The story's snapshot as captured at `epoch`, one reading its own (a part of its own)."""
    document = Store(STORY).load("good")
    document["meta"]["captured_at"] = datetime.fromtimestamp(epoch, timezone.utc).isoformat()
    document["volatile"]["system"] = {"uptime_seconds": number}
    return document


def records(rng: random.Random, count: int, hosts: tuple[str, ...]) -> list[Manifest]:
    return [Manifest(f"{host}/{number}", host, NOW - rng.uniform(0, 40 * DAY), "test")
            for number in range(count) for host in (rng.choice(hosts),)]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_rule_keeps_recent_then_hourly_then_daily_per_host(seed: int) -> None:
    rng = random.Random(seed)
    manifests = records(rng, 600, ("a", "b"))
    rule = Retention(every=2 * DAY, hourly=14 * DAY, daily=30 * DAY)
    keep = kept(manifests, rule, NOW)
    for host in ("a", "b"):
        mine = sorted((m for m in manifests if m.host == host), key=lambda m: m.captured_at)
        first_of_hour: dict[int, str] = {}
        first_of_day: dict[int, str] = {}
        for manifest in mine:
            first_of_hour.setdefault(int(manifest.captured_at // HOUR), manifest.id)
            first_of_day.setdefault(int(manifest.captured_at // DAY), manifest.id)
        for manifest in mine:
            age = NOW - manifest.captured_at
            expected = age <= 2 * DAY \
                or (age <= 14 * DAY and first_of_hour[int(manifest.captured_at // HOUR)]
                    == manifest.id) \
                or (age <= 30 * DAY and first_of_day[int(manifest.captured_at // DAY)]
                    == manifest.id)
            assert (manifest.id in keep) == expected, (manifest, age / DAY)
    # thinning again keeps the same: a second gc deletes nothing more
    assert kept([m for m in manifests if m.id in keep], rule, NOW) == keep


def test_keep_is_read_or_refused_in_one_line() -> None:
    assert parse_keep(["every=1d,hourly=3d", "daily=8w"]) == \
        Retention(every=DAY, hourly=3 * DAY, daily=56 * DAY)
    assert parse_keep([]) == Retention()
    assert parse_keep(["daily=forever"]).daily is None
    for bad in ("weekly=3d", "every=3", "every"):
        with pytest.raises(UsageError, match=r"^--keep [^\n]*$"):
            parse_keep([bad])


def age_everything(root: Path, seconds: float) -> None:
    for path in root.rglob("*"):
        if path.is_file():
            os.utime(path, (time.time() - seconds,) * 2)


def test_gc_drops_records_outside_the_rule_then_the_parts_only_they_named(
        tmp_path: Path) -> None:
    rng = random.Random(7)
    history = History(tmp_path)
    times = sorted(NOW - rng.uniform(0, 20 * DAY) for _ in set(map(float, range(40))))
    for number, when in enumerate(times):
        history.record(at(when, number), reason="test")
    age_everything(tmp_path, 3600)
    rule = Retention(every=DAY, hourly=5 * DAY, daily=None)
    expected = kept(history.manifests(), rule, NOW)
    dry = gc(history, rule, dry_run=True, now=NOW)
    assert len(history.manifests()) == 40   # a dry run deletes nothing
    done = gc(history, rule, now=NOW)
    assert {m.id for m in history.manifests()} == expected
    assert {m.id for m in done.dropped} == {m.id for m in dry.dropped} and done.dropped
    assert set(done.parts) == set(dry.parts)
    # its meta and its reading: the two parts of each dropped record no other names
    assert len(done.parts) == 2 * len(done.dropped)
    assert verify(history) == []
    for manifest in history.manifests():
        reading = history.load(manifest)["volatile"]["system"]["uptime_seconds"]
        assert reading in set(map(float, range(40)))
    again = gc(history, rule, now=NOW)
    assert again.dropped == () and again.parts == ()


def test_verify_names_each_missing_and_damaged_part_and_manifest(tmp_path: Path) -> None:
    history = History(tmp_path)
    first = history.record(at(NOW, 1), reason="a").manifest
    second = history.record(at(NOW + 5, 2), reason="b").manifest
    assert verify(history) == []
    _, parts = split(at(NOW, 1))
    packages = next(p for p in parts if p.at == ("facts", "python_env", "packages")).digest
    uptime = next(p for p in parts if p.at == ("volatile", "system")).digest
    history.part_path(packages).write_bytes(zlib.compress(canonical(["other"])))
    history.part_path(uptime).unlink()
    broken = history.manifest_path(second.id)
    broken.write_text(broken.read_text().split("\n")[0] + "\n{not json\n")
    problems = verify(history)
    assert MissingPart(first.id, uptime) in problems
    assert DamagedPart(first.id, packages, "its content does not match its name") in problems
    assert any(isinstance(p, DamagedManifest) and p.path == broken for p in problems)
    assert len(problems) == 3


REUSER = """
import sys
from pathlib import Path
from envsnap.history.store import History
from envsnap.snapshot.store import Store
history = History(Path(sys.argv[1]))
good = Store(sys.argv[2]).load("good")
for round in range(int(sys.argv[3])):
    document = {**good, "volatile": {**good["volatile"], "system": {"uptime_seconds": round % 5}}}
    history.record(document, reason="again")
"""


def test_gc_never_deletes_a_part_a_writer_uses_meanwhile(tmp_path: Path) -> None:
    history = History(tmp_path / "history")
    good = Store(STORY).load("good")
    for number in range(5):   # the parts the writer will use again, left unnamed and old
        history.record({**good, "volatile": {**good["volatile"],
                                             "system": {"uptime_seconds": number}}}, reason="old")
    for manifest in history.manifests():
        history.manifest_path(manifest.id).unlink()
    age_everything(history.root, 2 * DAY)
    writer = subprocess.Popen([sys.executable, "-c", REUSER, str(history.root), str(STORY),
                               "60"], cwd=ROOT)
    while writer.poll() is None:   # a record takes milliseconds: a minute's grace is ample
        gc(history, Retention(every=float("inf")), grace_s=60)
    assert writer.wait() == 0
    assert len(history.manifests()) == 60
    assert verify(history) == []


def test_a_part_used_before_gc_began_and_named_only_after_it_ends_is_kept(
        tmp_path: Path) -> None:
    """A record's steps with a gc between them: the writer finds its parts already stored
    (old, unnamed), gc runs, then the writer names them in its manifest."""
    history = History(tmp_path)
    good = Store(STORY).load("good")
    history.manifest_path(history.record(good, reason="old").manifest.id).unlink()
    age_everything(tmp_path, 2 * DAY)
    rest, parts = split(good)
    assert sum(history.put_part(part) for part in parts) == 0   # all there already
    assert gc(history, Retention()).parts == ()   # used within the grace before it began
    history.claim(Manifest("", "local", NOW, "late"), body_text(rest, parts))
    assert verify(history) == []
    age_everything(tmp_path, 2 * DAY)
    for manifest in history.manifests():
        history.manifest_path(manifest.id).unlink()
    assert len(gc(history, Retention(), grace_s=0).parts) == len({p.digest for p in parts})
