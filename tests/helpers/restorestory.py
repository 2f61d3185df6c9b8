"""The STORY (docs/STORY.md) in miniature, shared by the restore tests: a good state (a
commit plus a local patch) is captured, then a pull moves HEAD and new work begins."""
from __future__ import annotations

from pathlib import Path

import yaml
from conftest import Cli

from envsnap.snapshot.provenance import signed, user_key
from helpers.gitrepos import Story

ENGINE = "python/sglang/srt/entrypoints/engine.py"
GOOD_PATCH = "ENGINE = 2  # tuned\n"


def capture_good(cli: Cli, story: Story, host: str) -> str:
    """The good state: the clone's commit, a local patch, an untracked bench script."""
    story.checkout.write(ENGINE, GOOD_PATCH)
    story.checkout.write("bench_one.py", "print('gen throughput (token/s): 94')\n")
    result = cli("capture", host, "--label", "good", "--repo", str(story.checkout.path))
    assert result.returncode == 0, result.stderr
    return story.checkout.head()


def moved_and_dirty(story: Story) -> None:
    """The engineer put the patches away, someone pulled, new work began."""
    story.checkout.git("stash", "push", "--include-untracked", "-m", "engineer's own stash")
    story.upstream_moves()
    story.pull()
    story.checkout.write("README.md", "sglang\nmy work in progress\n")
    story.checkout.write("mine.txt", "new file of mine\n")


def edit_snapshot(cli: Cli, **repo_changes: object) -> None:
    """The user's own snapshot in another state (its HEAD elsewhere): signed again with the
    CLI user's key, as if envsnap had captured it so (a hand edit alone makes it foreign)."""
    path = Path(cli.env["ENVSNAP_STORE"]) / "good.yaml"
    document = yaml.safe_load(path.read_text())
    for repo in document["facts"]["git"]["repos"].values():
        repo.update(repo_changes)
    path.write_text(yaml.safe_dump(signed(document, user_key(cli.env))))


def stash_messages(story: Story) -> list[str]:
    return story.checkout.git("stash", "list", "--format=%gs").splitlines()


def snapshot_of_tree(story: Story) -> tuple[str, str, list[str], str]:
    """What must not move when a restore refuses: HEAD, status, stashes, the user's file."""
    readme = (story.checkout.path / "README.md").read_text()
    return (story.checkout.head(), story.checkout.git("status", "--porcelain"),
            stash_messages(story), readme)


def patch_that_no_longer_applies(cli: Cli, story: Story) -> None:
    """A good snapshot whose HEAD points at a commit its patch was not made on."""
    capture_good(cli, story, "local")
    moved_and_dirty(story)
    elsewhere = story.dev.commit("Engine rework", {ENGINE: "ENGINE = 3\n"})
    story.dev.git("push", "-q", "origin", "main")
    story.pull()
    edit_snapshot(cli, head=elsewhere)
