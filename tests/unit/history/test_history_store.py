"""The history store: a snapshot in content-addressed parts, put back whole, checked on load,
and written safely by many processes at once."""
from __future__ import annotations

import copy
import json
import random
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from envsnap.errors import StoreError
from envsnap.history.parts import canonical, digest_of, join, split
from envsnap.history.store import History, Manifest, Span
from envsnap.snapshot import provenance
from envsnap.snapshot.document import facts
from envsnap.snapshot.records import Snapshot
from envsnap.snapshot.store import Store

ROOT = Path(__file__).resolve().parents[3]
STORY = ROOT / "tests" / "data" / "h200x2-story" / "snapshots"


def story(label: str) -> Snapshot:
    return Store(STORY).load(label)


def test_a_recorded_snapshot_loads_back_equal_and_signed_as_it_was(tmp_path: Path) -> None:
    history = History(tmp_path / "history")
    for label in ("good", "bad"):
        document = story(label)
        before = copy.deepcopy(document)
        recorded = history.record(document, reason="test")
        assert document == before   # already signed: kept as it is
        assert history.load(recorded.manifest) == before
    assert [manifest.reason for manifest in history.manifests("local")] == ["test", "test"]
    assert history.manifests("elsewhere") == []


def test_an_unsigned_snapshot_is_signed_as_a_save_signs(tmp_path: Path) -> None:
    document = story("good")
    del document["meta"]["signature"]
    recorded = History(tmp_path).record(document, reason="test")
    loaded = History(tmp_path).load(recorded.manifest)
    assert loaded == document
    assert provenance.verify_as_user(loaded).mine
    foreign = story("bad")
    del foreign["meta"]["signature"]
    kept = History(tmp_path).record(foreign, reason="migrated", sign=False)
    assert provenance.verify_as_user(History(tmp_path).load(kept.manifest)).foreign == "unsigned"


def test_large_sections_are_cut_finer_and_put_back(tmp_path: Path) -> None:
    document = story("good")
    rest, parts = split(document)
    places = {part.at for part in parts}
    for pid in facts(document)["env"].get("processes", {}):
        assert ("facts", "env", "processes", pid) in places
    for repo in facts(document)["git"].get("repos", {}):
        assert ("facts", "git", "repos", repo) in places
    assert ("facts", "python_env", "packages") in places
    assert join(rest, [(part.at, json.loads(part.data)) for part in parts]) == document


def test_an_unchanged_record_adds_only_its_manifest(tmp_path: Path) -> None:
    history = History(tmp_path)
    first = history.record(story("good"), reason="a")
    again = history.record(story("good"), reason="b")
    assert again.bytes_added < first.bytes_added / 5
    assert again.manifest.id == f"{first.manifest.id}-2"   # the same second: a name of its own
    parts = [path for path in (tmp_path / "parts").rglob("*") if path.is_file()]
    assert len(parts) == len({part.digest for part in split(story("good"))[1]})


def test_a_part_that_does_not_match_its_name_is_refused_in_one_line(tmp_path: Path) -> None:
    history = History(tmp_path)
    recorded = history.record(story("good"), reason="a")
    _, parts = split(story("good"))
    packages = next(part for part in parts if part.at == ("facts", "python_env", "packages"))
    path = history.part_path(packages.digest)
    path.write_bytes(zlib.compress(canonical({"torch": "0.0"})))
    with pytest.raises(StoreError, match=r"^history part .* is damaged \(its content does not "
                                         r"match its name\)[^\n]*$"):
        history.load(recorded.manifest)
    path.write_bytes(b"garbage")
    with pytest.raises(StoreError, match=r"damaged \(not compressed data\)"):
        history.load(recorded.manifest)
    # recording again mends it: a damaged part is never used again
    history.record(story("good"), reason="b")
    assert history.load(recorded.manifest) == story("good")


def test_an_id_never_climbs_out_of_the_history(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="an id is HOST/TIME"):
        History(tmp_path).manifest_path("../../etc/20260101T000000.000000Z")


WRITER = """
import sys
from pathlib import Path
from envsnap.history.store import History, Manifest, Span
from envsnap.snapshot.store import Store
history = History(Path(sys.argv[1]))
good, bad = (Store(sys.argv[2]).load(label) for label in ("good", "bad"))
for round in range(int(sys.argv[3])):
    history.record(good if round % 2 else bad, reason=sys.argv[4])
"""


def test_two_processes_recording_at_once_corrupt_nothing(tmp_path: Path) -> None:
    history = History(tmp_path / "history")
    rounds = 12
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(history.root), str(STORY),
                                 str(rounds), f"writer {number}"], cwd=ROOT)
               for number in (1, 2)]
    assert [writer.wait(timeout=120) for writer in writers] == [0, 0]
    manifests = history.manifests()
    assert len(manifests) == 2 * rounds   # no record lost, none written over another
    assert len({manifest.id for manifest in manifests}) == 2 * rounds
    expected = {story("good")["meta"]["captured_at"]: story("good"),
                story("bad")["meta"]["captured_at"]: story("bad")}
    for manifest in manifests:
        loaded = history.load(manifest)
        assert loaded == expected[loaded["meta"]["captured_at"]]
    for path in (history.root / "parts").rglob("*"):
        if path.is_file():
            assert not path.name.startswith("."), "a writer's temporary file was left"
            assert digest_of(zlib.decompress(path.read_bytes())) == path.name


def span_by_reading_all(history: History, host: str, since: float, until: float) -> Span:
    """What History.span must give, from every header of the host read."""
    every = history.manifests(host)
    inside = [manifest for manifest in every if since <= manifest.captured_at <= until]
    before = [manifest for manifest in every if manifest.captured_at < since]
    after = [manifest for manifest in every if manifest.captured_at > until]
    return Span(before[-1] if before else None, inside, after[0] if after else None)


@pytest.mark.parametrize("seed", range(12))
def test_a_windows_records_are_found_from_their_names_as_reading_all_finds_them(
        tmp_path: Path, seed: int) -> None:
    """Seeded scenarios: records of two hosts whose names share one folder (gpu-1's and
    gpu_1's are apart, `gpu 1` and gpu_1 share one), several in one second, damaged
    headers, and windows anywhere (before all, after all, between, on a record's time)."""
    chance = random.Random(seed)
    history = History(tmp_path / "history")
    times = sorted(chance.choice([1000.0, 1000.5, 1001.0]) + chance.randrange(0, 400) * 2.5
                   for _ in range(chance.randrange(0, 40)))
    for when in times:
        host = chance.choice(["gpu_1", "gpu_1", "gpu 1", "gpu-1"])
        manifest, _ = history.claim(Manifest("", host, when, "every 10m"), "{}")
        if chance.random() < 0.1:
            history.manifest_path(manifest.id).write_text("not a header\n")
    edges = times + [0.0, 5000.0]
    for _ in range(30):
        since, until = sorted(chance.choice([chance.choice(edges),
                                             chance.uniform(900.0, 2100.0)]) for _ in range(2))
        for host in ("gpu_1", "gpu 1", "gpu-1", "elsewhere"):
            assert history.span(host, since, until) == \
                span_by_reading_all(history, host, since, until), (host, since, until)
