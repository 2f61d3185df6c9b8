"""The stash an aborted restore leaves is dropped only where all it holds is back, in a real
git checkout: one byte of the work missing, or an untracked file of it, and it stays."""
from __future__ import annotations

from pathlib import Path

from helpers.gitrepos import git_env, init

from envsnap.hostops.shell import HostShell
from envsnap.hosts.inventory import Host
from envsnap.hosts.transport import LocalTransport
from envsnap.restore.policy import rollback_stamp
from envsnap.restore.standing import drop_restored_stashes, drop_stashes_since, standing

MESSAGE = "envsnap: work saved before restoring good (2026-12-01T10:00:00Z)"


def test_a_stash_is_dropped_only_once_its_content_is_all_back(tmp_path: Path) -> None:
    repo = init(tmp_path / "repo", git_env(tmp_path))
    repo.commit("first", {"a.txt": "one\n"})
    repo.write("a.txt", "my work\n")
    repo.write("new.txt", "untracked of mine\n")
    repo.git("stash", "push", "-q", "--include-untracked", "-m", MESSAGE)
    host = Host(name="local")
    shell, top = HostShell(host, LocalTransport(host)), str(repo.path)
    assert standing(shell, [top], "good") == \
        [f"{top}: HEAD on main at {repo.head()[:12]}, your work in stash@{{0}} "
         f"({repo.git('rev-parse', 'stash@{0}')[:12]})"]
    repo.write("a.txt", "my work\n")              # the tracked file back, the untracked not
    assert drop_restored_stashes(shell, [top], "good") == []
    repo.write("new.txt", "untracked of mine!\n")  # there, but not its bytes
    assert drop_restored_stashes(shell, [top], "good") == []
    repo.write("new.txt", "untracked of mine\n")
    assert drop_restored_stashes(shell, [top], "other") == []   # another restore's: kept
    (dropped,) = drop_restored_stashes(shell, [top], "good")
    assert dropped.startswith(f"{top}: ") and MESSAGE in dropped
    assert repo.git("stash", "list") == ""


def test_a_rollback_drops_only_the_stashes_made_since_its_point(tmp_path: Path) -> None:
    """pre-restore-<time>: a stash of a restore made at that time or later, all back, goes;
    one made before it stays though its content is back too, and the user's own stays."""
    repo = init(tmp_path / "repo", git_env(tmp_path))
    repo.commit("first", {"a.txt": "one\n"})
    host = Host(name="local")
    shell, top = HostShell(host, LocalTransport(host)), str(repo.path)
    for message in ("my own stash", "envsnap: work saved before restoring good "
                    "(20261201-095959)", "envsnap: work saved before restoring good "
                    "(20261201-100000)"):
        repo.write("a.txt", "my work\n")
        repo.git("stash", "push", "-q", "-m", message)
    repo.write("a.txt", "my work\n")                 # the work is back in the checkout
    assert drop_stashes_since(shell, [top], "20261201-100001") == []
    (dropped,) = drop_stashes_since(shell, [top], "20261201-100000")
    assert "(20261201-100000)" in dropped
    left = repo.git("stash", "list", "--format=%gs")
    assert "(20261201-095959)" in left and "my own stash" in left


def test_a_rollback_points_time_is_read_from_its_label() -> None:
    assert rollback_stamp("pre-restore-20261201-100000") == "20261201-100000"
    assert rollback_stamp("pre-restore-20261201-100000-2") == "20261201-100000"
    assert rollback_stamp("good") is None and rollback_stamp("pre-restore-x") is None
