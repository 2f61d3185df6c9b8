"""The restore journal is JSON envsnap writes and reads back: what comes back is a Journal
whose fields have the types it declares, or one line saying the file is unreadable."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from envsnap.errors import UsageError
from envsnap.restore.safety import Journal, JournalBook
from envsnap.snapshot.store import Store


def book(tmp_path: Path) -> JournalBook:
    return JournalBook(Store(tmp_path))


def test_a_journal_reads_back_as_it_was_written(tmp_path: Path) -> None:
    journal = Journal("good", "gpu-box", "pre-restore-1", "earlier", "applying",
                      ["/srv/sglang"])
    book(tmp_path).write(journal)
    assert book(tmp_path).read("gpu-box", ["/srv/sglang"]) == journal
    assert book(tmp_path).pending() == [journal]


def test_a_journal_of_an_older_envsnap_stands_for_the_whole_host(tmp_path: Path) -> None:
    path = book(tmp_path).host_path("gpu-box")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"label": "good", "host": "gpu-box",
                                "pre_restore": "pre-restore-1", "started": "earlier"}))
    found = book(tmp_path).read("gpu-box", ["/srv/other"])
    assert found == Journal("good", "gpu-box", "pre-restore-1", "earlier")
    assert found.state == "planning" and found.touched == []


@pytest.mark.parametrize("fields", [
    ["not", "an", "object"],
    {"label": "good", "host": "gpu-box", "pre_restore": "p", "started": "s", "extra": 1},
    {"label": "good", "host": "gpu-box", "pre_restore": "p"},
    {"label": 1, "host": "gpu-box", "pre_restore": "p", "started": "s"},
    {"label": "good", "host": "gpu-box", "pre_restore": "p", "started": "s",
     "state": "dancing"},
    {"label": "good", "host": "gpu-box", "pre_restore": "p", "started": "s",
     "touched": "/srv/sglang"},
    {"label": "good", "host": "gpu-box", "pre_restore": "p", "started": "s",
     "touched": [1]},
])
def test_a_journal_that_is_not_one_is_unreadable(tmp_path: Path, fields: object) -> None:
    path = book(tmp_path).host_path("gpu-box")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(fields))
    with pytest.raises(UsageError, match=r"restore journal .* is unreadable \(.*\); "
                                         "look at it, then delete it"):
        book(tmp_path).read("gpu-box", [])
