"""Provenance through the real CLI: a snapshot this user captured is signed and restores as
before; anything else (edited by one byte, unsigned, signed by another user's key, from a
bundle) is foreign: restore shows all it would write and run, and refuses without
--trust-foreign, leaving the host exactly as it was; `envsnap trust` adopts it."""
from __future__ import annotations

import os
import pty
import stat
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, Cli
from helpers.gitrepos import Story
from helpers.restorestory import capture_good, moved_and_dirty, snapshot_of_tree
from helpers.sshd import isolated_env

from envsnap.errors import ExitCode

BENCH_SCRIPT = "bench_one.py"    # the untracked file capture_good records (its content: 94)


@pytest.fixture
def story(tmp_path: Path) -> Story:
    story = Story(tmp_path / "story")
    # The test's own `git status` must not refresh the index: every file is compared.
    story.env["GIT_OPTIONAL_LOCKS"] = "0"
    return story


def store(cli: Cli) -> Path:
    return Path(cli.env["ENVSNAP_STORE"])


def files_under(*roots: Path) -> dict[str, tuple[int, int]]:
    """Every path under the roots with its size and mtime: what "untouched" is checked by."""
    found = {}
    for root in roots:
        for path in root.rglob("*"):
            info = path.lstat()
            found[str(path)] = (info.st_size, info.st_mtime_ns)
    return found


def host_state(cli: Cli, story: Story) -> tuple[object, ...]:
    """The checkout (HEAD, status, stashes, the user's file), every file of it and of HOME
    (agent cache, locks), and the store (journal, rollback points)."""
    return (snapshot_of_tree(story), files_under(story.checkout.path, Path(cli.env["HOME"]),
                                                 store(cli)))


def one_byte_edit(path: Path) -> None:
    """The recorded bench script prints 94; make it 95, as a hand edit would."""
    text = path.read_text()
    assert text.count("(token/s): 94") == 1
    path.write_text(text.replace("(token/s): 94", "(token/s): 95"))


def refused_untouched(cli: Cli, story: Story, reason: str) -> str:
    """restore --yes of a foreign `good`: the whole plan, exit 2, the host as it was."""
    before = host_state(cli, story)
    # --repo: a foreign snapshot's checkouts are restored only where named (restore/policy.py)
    result = cli("restore", "good", "--yes", "--repo", str(story.checkout.path))
    assert result.returncode == ExitCode.DECLINED, result.stdout + result.stderr
    assert f"is foreign ({reason})" in result.stderr and "--trust-foreign" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert host_state(cli, story) == before
    assert not (story.checkout.path / BENCH_SCRIPT).exists()
    return result.stdout


def test_a_captured_snapshot_is_mine_and_restores_as_before(cli: Cli, story: Story) -> None:
    good = capture_good(cli, story, "local")
    key = Path(cli.env["XDG_CONFIG_HOME"]) / "envsnap" / "key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert stat.S_IMODE(key.parent.stat().st_mode) == 0o700
    signature = yaml.safe_load((store(cli) / "good.yaml").read_text())["meta"]["signature"]
    assert signature["algorithm"] == "hmac-sha256" and len(signature["digest"]) == 64
    shown = cli("show", "good")
    assert "provenance" in shown.stdout and "mine (signed with your key)" in shown.stdout
    moved_and_dirty(story)
    restored = cli("restore", "good", "--yes")
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert "foreign" not in restored.stdout
    assert story.checkout.head() == good
    assert "(token/s): 94" in (story.checkout.path / BENCH_SCRIPT).read_text()
    # the rollback point envsnap saved is the user's own too: it restores without a question
    point = sorted(store(cli).glob("pre-restore-*.yaml"))[0].stem
    back = cli("restore", point, "--yes")
    assert back.returncode == 0, back.stdout + back.stderr


def test_a_one_byte_edit_is_foreign_refused_then_trusted_with_the_flag(cli: Cli,
                                                                         story: Story) -> None:
    good = capture_good(cli, story, "local")
    moved_and_dirty(story)
    one_byte_edit(store(cli) / "good.yaml")
    assert "foreign (content changed)" in cli("show", "good").stdout
    plan = refused_untouched(cli, story, "content changed")
    # the complete plan: every file with its size, every command
    script = story.checkout.path / BENCH_SCRIPT
    assert f"{script}  (untracked file: 38 bytes)" in plan
    assert f"{story.checkout.path / 'python/sglang/srt/entrypoints/engine.py'}  (patched:" in plan
    assert f"checkout main  (commit {good})" in plan and "apply  (the snapshot's" in plan

    named = ("--repo", str(story.checkout.path))
    check = cli("restore", "good", "--check", *named)   # --check never needs trust
    assert check.returncode == 1, check.stdout + check.stderr
    assert "is foreign (content changed)" in check.stdout and "plan for local" in check.stdout

    trusted = cli("restore", "good", "--yes", "--trust-foreign", *named)
    assert trusted.returncode == 0, trusted.stdout + trusted.stderr
    assert "(untracked file: 38 bytes)" in trusted.stdout   # shown, then done
    assert story.checkout.head() == good and "(token/s): 95" in script.read_text()


def test_an_unsigned_snapshot_is_foreign(cli: Cli, story: Story) -> None:
    capture_good(cli, story, "local")
    moved_and_dirty(story)
    path = store(cli) / "good.yaml"
    document = yaml.safe_load(path.read_text())
    del document["meta"]["signature"]
    path.write_text(yaml.safe_dump(document))
    assert "foreign (unsigned)" in cli("show", "good").stdout
    refused_untouched(cli, story, "unsigned")
    unnamed = cli("restore", "good", "--check")   # no --repo: its checkout is left alone
    assert f"nobody named (left alone; --repo PATH names one): {story.checkout.path}" \
        in unnamed.stdout
    assert "files it would write (0):" in unnamed.stdout


def test_a_snapshot_signed_with_another_users_key_is_foreign(cli: Cli, story: Story,
                                                             tmp_path: Path) -> None:
    colleague_home = tmp_path / "colleague"
    colleague_home.mkdir()
    colleague = Cli(env={**isolated_env(colleague_home), "ENVSNAP_STORE": str(store(cli)),
                         "PYTHONPATH": cli.env["PYTHONPATH"]}, cwd=cli.cwd)
    capture_good(colleague, story, "local")
    moved_and_dirty(story)
    assert "mine" in colleague("show", "good").stdout
    assert "foreign (signed by another key)" in cli("show", "good").stdout
    refused_untouched(cli, story, "signed by another key")


def test_trust_shows_what_it_holds_then_adopts_it(cli: Cli, story: Story) -> None:
    good = capture_good(cli, story, "local")
    moved_and_dirty(story)
    path = store(cli) / "good.yaml"
    one_byte_edit(path)
    edited = path.read_bytes()
    asked = cli("trust", "good")                # no terminal, no --yes: shown, not adopted
    assert asked.returncode == ExitCode.DECLINED and "--yes" in asked.stderr
    assert f"repo {story.checkout.path}: {good} (main)" in asked.stdout
    assert "host: local" in asked.stdout and "captured: 20" in asked.stdout
    assert "(untracked file: 38 bytes)" in asked.stdout
    assert path.read_bytes() == edited
    adopted = cli("trust", "good", "--yes")
    assert adopted.returncode == 0, adopted.stdout + adopted.stderr
    assert "trusted: signed with your key and stored as good" in adopted.stdout
    assert "mine" in cli("show", "good").stdout
    restored = cli("restore", "good", "--yes")
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert "(token/s): 95" in (story.checkout.path / BENCH_SCRIPT).read_text()


def test_trust_a_file_from_elsewhere_stores_it_under_a_free_label(cli: Cli, story: Story,
                                                                  tmp_path: Path) -> None:
    capture_good(cli, story, "local")
    outside = tmp_path / "from-a-bug-report.yaml"
    outside.write_text((store(cli) / "good.yaml").read_text().replace("label: good",
                                                                       "label: theirs"))
    adopted = cli("trust", str(outside), "--yes")
    assert adopted.returncode == 0, adopted.stdout + adopted.stderr
    assert "mine" in cli("show", "theirs").stdout
    taken = cli("trust", str(outside), "--yes", "--label", "good")
    assert taken.returncode == 2 and "--force" in taken.stderr


def test_a_bundle_snapshot_is_foreign_even_to_its_maker(cli: Cli, story: Story,
                                                        tmp_path: Path) -> None:
    capture_good(cli, story, "local")
    bundle = tmp_path / "bundle.tar.gz"
    made = cli("report", "good", "--bundle", str(bundle))
    assert made.returncode in (0, 1), made.stdout + made.stderr
    with tarfile.open(bundle) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("snapshots/good.yaml"))
        extracted = tar.extractfile(member)
        assert extracted is not None
        (tmp_path / "unpacked.yaml").write_bytes(extracted.read())
    assert "foreign (unsigned)" in cli("show", str(tmp_path / "unpacked.yaml")).stdout


def test_a_key_others_can_read_is_refused(cli: Cli, story: Story) -> None:
    capture_good(cli, story, "local")
    key = Path(cli.env["XDG_CONFIG_HOME"]) / "envsnap" / "key"
    os.chmod(key, 0o644)
    result = cli("restore", "good", "--check")
    assert result.returncode == 2 and f"chmod 600 {key}" in result.stderr
    assert "Traceback" not in result.stderr


def restore_at_a_terminal(cli: Cli, story: Story,
                          typed: bytes) -> subprocess.CompletedProcess[str]:
    """`restore good` with a terminal on stdin, answering its questions with `typed`."""
    main_end, child_end = pty.openpty()
    running = subprocess.Popen([sys.executable, "-m", "envsnap", "restore", "good", "--repo",
                                str(story.checkout.path)],
                               cwd=cli.cwd, env=cli.env, stdin=child_end,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    os.close(child_end)
    os.write(main_end, typed)
    out, err = running.communicate(timeout=120)
    os.close(main_end)
    return subprocess.CompletedProcess(running.args, running.returncode, out, err)


def test_at_a_terminal_typing_the_label_trusts_it(cli: Cli, story: Story) -> None:
    good = capture_good(cli, story, "local")
    moved_and_dirty(story)
    one_byte_edit(store(cli) / "good.yaml")
    before = host_state(cli, story)
    wrong = restore_at_a_terminal(cli, story, b"yes\n")   # not the label: refused
    assert "type the label (good) to trust this snapshot" in wrong.stdout
    assert wrong.returncode == ExitCode.DECLINED and "is foreign" in wrong.stderr
    assert host_state(cli, story) == before
    declined = restore_at_a_terminal(cli, story, b"good\nn\n")   # trusted, then no to the plan
    assert "apply these changes to local? [y/N]" in declined.stdout
    assert declined.returncode == ExitCode.DECLINED, declined.stdout + declined.stderr
    assert declined.stderr == "envsnap: declined: nothing was changed on local\n"
    assert snapshot_of_tree(story) == before[0]   # the checkout; the store has no journal
    assert files_under(store(cli)) == {path: info for path, info in before[1].items()
                                       if path.startswith(str(store(cli)))}
    typed = restore_at_a_terminal(cli, story, b"good\ny\n")
    assert typed.returncode == 0, typed.stdout + typed.stderr
    assert "apply these changes to local? [y/N]" in typed.stdout
    assert story.checkout.head() == good


def test_play_applies_a_foreign_snapshot_only_when_trusted(cli: Cli, story: Story) -> None:
    """`play restore.yml -e snapshot=` is restore by hand: the same gate stands before it."""
    good = capture_good(cli, story, "local")
    moved_and_dirty(story)
    one_byte_edit(store(cli) / "good.yaml")
    playbook = str(ROOT / "playbooks" / "restore.yml")
    before = host_state(cli, story)
    refused = cli("play", playbook, "-e", "snapshot=good", "-l", "local")
    assert refused.returncode == ExitCode.DECLINED, refused.stdout + refused.stderr
    assert "is foreign (content changed)" in refused.stderr and "--trust-foreign" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert host_state(cli, story) == before
    check = cli("play", playbook, "-e", "snapshot=good", "-l", "local", "--check")
    assert check.returncode in (0, 1), check.stdout + check.stderr
    applied = cli("play", playbook, "-e", "snapshot=good", "-l", "local", "--trust-foreign")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert story.checkout.head() == good


KEY_NOTICE = ("envsnap: created your signing key ~/.config/envsnap/key; keep it: your "
              "snapshots are trusted as your own by it, and without it they read as foreign\n")


def test_the_run_that_makes_the_key_says_where_it_is_once(cli: Cli) -> None:
    key = Path(cli.env["XDG_CONFIG_HOME"]) / "envsnap" / "key"
    listed = cli("list")   # signs nothing (no store yet, even)
    assert "signing key" not in listed.stderr and not key.exists()
    first = cli("capture", "local", "--label", "first")
    assert first.returncode == 0, first.stderr
    assert first.stderr.count("signing key") == 1 and first.stderr.endswith(KEY_NOTICE)
    assert key.is_file() and stat.S_IMODE(key.stat().st_mode) == 0o600
    again = cli("capture", "local", "--label", "again")
    assert again.returncode == 0, again.stderr
    assert "signing key" not in again.stderr
    shown = cli("show", "first")
    assert shown.returncode == 0 and "signing key" not in shown.stderr
