"""`envsnap prune` through the real CLI, on a store a real restore filled: restore's own
rollback points (pre-restore-*) and their backups past the rule go, with --yes only; what the
rule keeps, a person's snapshots, links, an open restore and a locked host stay."""
from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml
from conftest import Cli
from helpers.folded import unfolded, words
from helpers.gitrepos import Story
from helpers.restorestory import capture_good, moved_and_dirty

from envsnap.errors import ExitCode
from envsnap.restore.safety import Journal, JournalBook
from envsnap.snapshot.provenance import signed, user_key
from envsnap.snapshot.store import Store


def store(cli: Cli) -> Path:
    return Path(cli.env["ENVSNAP_STORE"])


def backups(cli: Cli) -> Path:
    return Path(cli.env["HOME"]) / ".cache" / "envsnap" / "restore-backup"


def everything(cli: Cli) -> dict[str, bytes | str]:
    """Every file and link under the store and the backups: what "nothing removed" means."""
    found: dict[str, bytes | str] = {}
    for root in (store(cli), backups(cli)):
        for path in sorted(root.rglob("*")):
            if path.is_symlink():
                found[str(path)] = f"-> {path.readlink()}"
            elif path.is_file():
                found[str(path)] = path.read_bytes()
    return found


@pytest.fixture
def restored(cli: Cli, tmp_path: Path) -> str:
    """A real restore of `good` onto local: its rollback point's label (its backup holds
    what the restore overwrote)."""
    story = Story(tmp_path / "story")
    story.env["GIT_OPTIONAL_LOCKS"] = "0"
    capture_good(cli, story, "local")
    moved_and_dirty(story)
    result = cli("restore", "good", "--yes")
    assert result.returncode == 0, result.stdout + result.stderr
    (label,) = [path.stem for path in store(cli).glob("pre-restore-*.yaml")]
    assert any((backups(cli) / label).rglob("*")), "the restore saved what it overwrote"
    return label


def older_point(cli: Cli, real: str, days: float, backup: bool = True) -> str:
    """The real rollback point as if taken `days` ago, with a backup of its own, as a restore
    then would have left them (signed with the user's key, as the store saves them)."""
    when = datetime.now(timezone.utc) - timedelta(days=days)
    label = f"pre-restore-{when:%Y%m%d-%H%M%S}"
    document = yaml.safe_load((store(cli) / f"{real}.yaml").read_text())
    document["meta"].update(label=label, captured_at=when.isoformat(timespec="seconds"))
    (store(cli) / f"{label}.yaml").write_text(yaml.safe_dump(signed(document,
                                                                     user_key(cli.env))))
    if backup:
        folder = backups(cli) / label / "0123456789abcdef"
        folder.mkdir(parents=True)
        (folder / "manifest.json").write_text('{"files": {}, "root": "/x"}')
        (folder / "saved").write_bytes(b"what the restore overwrote\n" * 100)
    return label


def test_the_rule_keeps_the_newest_and_the_young_and_only_yes_removes(
        cli: Cli, restored: str) -> None:
    ten, forty, fifty, sixty = (older_point(cli, restored, days) for days in (10, 40, 50, 60))
    mine = store(cli) / "pre-restore-before-upgrade.yaml"   # a person's label: never touched
    mine.write_bytes((store(cli) / "good.yaml").read_bytes())
    before = everything(cli)

    listed = cli("prune", "--keep", "2")
    assert listed.returncode == 0, listed.stderr
    assert everything(cli) == before, "a dry run removes nothing"
    lines = unfolded(listed.stdout)
    assert lines[0].startswith("would remove 3 rollback points: ")
    assert [line.split()[0] for line in lines[1:4]] == [sixty, fifty, forty]
    # sizes as du counts them (blocks): each backup holds a folder and two files
    assert all(" local " in line and re.search(r" \+ backup \d+\.\d KiB$", line)
               for line in lines[1:4]), lines
    assert "kept by the rule (the newest 2 of each host, and any younger than 30 days): 2" \
        in lines
    assert lines[-1] == "nothing removed: `envsnap prune --yes` removes them"

    pruned = cli("prune", "--keep", "2", "--yes")
    assert pruned.returncode == 0, pruned.stderr
    assert pruned.stdout.startswith("removed 3 rollback points: ")
    left = sorted(path.stem for path in store(cli).glob("*.yaml"))
    assert left == sorted(["good", "pre-restore-before-upgrade", restored, ten])
    assert sorted(path.name for path in backups(cli).iterdir()) == sorted([restored, ten])
    assert mine.read_bytes() == (store(cli) / "good.yaml").read_bytes()
    for label in (restored, ten):   # what the rule keeps is whole
        assert (store(cli) / f"{label}.yaml").read_bytes() == \
            before[str(store(cli) / f"{label}.yaml")]
    assert cli("prune", "--keep", "2").stdout.startswith("nothing to remove\n")


def test_the_young_stay_whatever_keep_says(cli: Cli, restored: str) -> None:
    older_point(cli, restored, 3)
    result = cli("prune", "--keep", "0")
    assert result.returncode == 0 and result.stdout.startswith("nothing to remove\n"), result.stdout
    past = cli("prune", "--keep", "0", "--days", "1")
    assert [line.split()[0] for line in unfolded(past.stdout)[1:2]] == \
        [path.stem for path in store(cli).glob("pre-restore-*.yaml")
         if path.stem != restored]


def test_links_are_left_alone_and_never_followed(cli: Cli, restored: str,
                                                 tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    target = elsewhere / "snapshot.yaml"
    target.write_bytes((store(cli) / f"{restored}.yaml").read_bytes())
    linked = store(cli) / "pre-restore-20200101-000000.yaml"
    linked.symlink_to(target)
    folder_linked = older_point(cli, restored, 90, backup=False)
    (elsewhere / "kept").mkdir()
    (elsewhere / "kept" / "file").write_text("not envsnap's\n")
    (backups(cli) / folder_linked).symlink_to(elsewhere / "kept")
    before = everything(cli)

    result = cli("prune", "--keep", "0", "--days", "0", "--yes")
    assert result.returncode == 0, result.stderr
    assert ("kept pre-restore-20200101-000000 (?): a symbolic link: left alone, not followed"
            in unfolded(result.stdout))
    assert (f"kept {folder_linked} (local): its backup folder on the host is a symbolic "
            "link: left alone, not followed") in unfolded(result.stdout)
    assert linked.is_symlink() and target.exists() and (elsewhere / "kept" / "file").exists()
    assert (backups(cli) / folder_linked).is_symlink()
    assert not (store(cli) / f"{restored}.yaml").exists()   # the rule let the real one go
    assert {path: data for path, data in before.items() if restored not in path} == \
        everything(cli)


def test_an_open_restore_and_a_locked_host_keep_theirs(cli: Cli, restored: str) -> None:
    old = older_point(cli, restored, 60)
    JournalBook(Store(store(cli))).write(Journal(label="good", host="local", pre_restore=old,
                                                 started="2020-01-01T00:00:00+00:00"))
    before = everything(cli)
    result = cli("prune", "--keep", "0", "--days", "0", "--yes")
    assert result.returncode == 0, result.stderr
    assert (f"kept {old} (local): its restore is still open (see `envsnap restore --abort`)"
            in unfolded(result.stdout))
    assert (store(cli) / f"{old}.yaml").exists() and (backups(cli) / old).is_dir()
    assert not (store(cli) / f"{restored}.yaml").exists()
    JournalBook(Store(store(cli))).clear(Journal("good", "local", old, ""))

    lock = Path(cli.env["HOME"]) / ".cache" / "envsnap" / "locks" / "sglang-0123.lock"
    lock.mkdir(parents=True)
    (lock / "owner").write_text('{"controller": "elsewhere", "pid": 1}\n')
    before = everything(cli)
    locked = cli("prune", "--keep", "0", "--days", "0", "--yes")
    assert locked.returncode == 0, locked.stderr
    assert (f"kept {old} (local): a lock is held on the host (sglang-0123.lock in "
            "~/.cache/envsnap/locks): a restore, bisect or explain is running"
            in unfolded(locked.stdout))
    assert everything(cli) == before


def test_an_unreachable_host_keeps_its_points_and_exits_3(cli: Cli, restored: str) -> None:
    path = store(cli) / f"{restored}.yaml"
    document = yaml.safe_load(path.read_text())
    document["meta"]["host"] = "root@127.0.0.1:1"
    path.write_text(yaml.safe_dump(signed(document, user_key(cli.env))))
    result = cli("prune", "--keep", "0", "--days", "0", "--yes", "--connect-timeout", "3")
    assert result.returncode == ExitCode.HOST, result.stdout + result.stderr
    assert f"kept {restored} (root@127.0.0.1:1): host not reached: " in words(result.stdout)
    assert path.exists()


def test_bad_numbers_are_usage_errors(cli: Cli) -> None:
    for args in (("--keep", "-1"), ("--days", "soon")):
        result = cli("prune", *args)
        assert result.returncode == ExitCode.USAGE
        assert result.stderr.splitlines()[-1].startswith(f"envsnap: error: argument {args[0]}")
