"""restore says only what is true, through the real CLI on real parts: `--pip` removes the
packages the snapshot did not have (or names those it leaves, never verifying past them),
"verified" names only what was checked equal, advice fits the kind of difference, a rollback
drops the stash of the work it put back, and `--check` shows the refusals the run would make.
Real git repositories, real venvs, real wheels installed offline by the host's pip."""
from __future__ import annotations

import subprocess
import venv
from pathlib import Path

import pytest
import yaml
from conftest import Cli
from helpers.folded import words
from helpers.gitrepos import Story
from helpers.pythons import make_venv, site_packages
from helpers.restorestory import capture_good, moved_and_dirty, stash_messages
from helpers.wheels import make_wheel

TUNED = "import os\nos.environ['NCCL_ALGO'] = 'Ring'\n"


@pytest.fixture
def story(tmp_path: Path) -> Story:
    return Story(tmp_path / "story")


def verified_line(stdout: str) -> str:
    """The verified sentence, folded lines joined."""
    said = words(stdout)
    assert "verified: " in said, stdout
    return said.split("verified: ", 1)[1].split(" match the snapshot", 1)[0]


# ---- --pip: the snapshot's packages, and no more ----------------------------------------------

@pytest.fixture
def ml_env(tmp_path: Path, cli: Cli) -> Path:
    """A venv with pip and tinypkg, and wheels of tinypkg and tabulate beside it; the host's
    pip installs from that folder only (no index)."""
    venv.EnvBuilder(with_pip=True, symlinks=True).create(tmp_path / "ml-env")  # offline
    python = tmp_path / "ml-env" / "bin" / "python3"
    for package, version in (("tinypkg", "1.0"), ("tabulate", "0.9.0")):
        make_wheel(tmp_path, version, package)
    pip_install(python, tmp_path, "tinypkg==1.0")
    cli.env.update(PIP_NO_INDEX="1", PIP_FIND_LINKS=str(tmp_path))
    return python


def pip_install(python: Path, wheels: Path, *args: str) -> None:
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-index", "--find-links",
                    str(wheels), *args], check=True)


def installed(python: Path, package: str) -> bool:
    return subprocess.run([str(python), "-c", f"import {package}"],
                          capture_output=True).returncode == 0


def test_pip_removes_a_package_the_snapshot_did_not_have(cli: Cli, story: Story,
                                                         ml_env: Path, tmp_path: Path) -> None:
    assert cli("capture", "local", "--label", "good", "--repo", str(story.checkout.path),
               "--python", str(ml_env)).returncode == 0
    pip_install(ml_env, tmp_path, "tabulate==0.9.0")

    plan = cli("restore", "good", "--check", "--pip")
    assert plan.returncode == 1, plan.stdout + plan.stderr
    assert "  ~ pip uninstall tabulate" in plan.stdout.splitlines(), plan.stdout
    assert installed(ml_env, "tabulate")               # --check changed nothing
    without = cli("restore", "good", "--check")
    assert "packages.tabulate: now 0.9.0, snapshot (absent)" in without.stdout
    assert "pip uninstall NAME" in words(without.stdout)   # advice for an added package

    applied = cli("restore", "good", "--yes", "--pip")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert not installed(ml_env, "tabulate") and installed(ml_env, "tinypkg")
    assert "the installed packages" in verified_line(applied.stdout)
    assert "still different" not in applied.stdout


def test_a_package_pip_leaves_is_remaining_drift_never_verified(
        cli: Cli, story: Story, ml_env: Path, tmp_path: Path) -> None:
    """tabulate lies outside the venv (a .pth puts its folder on sys.path): the venv's pip
    will not remove it. It is named as still different, with pip's words, and the packages
    are not called verified."""
    assert cli("capture", "local", "--label", "good", "--repo", str(story.checkout.path),
               "--python", str(ml_env)).returncode == 0
    outside = tmp_path / "outside"
    pip_install(ml_env, tmp_path, "--target", str(outside), "tabulate==0.9.0")
    (site_packages(ml_env) / "outside.pth").write_text(f"{outside}\n")
    moved_and_dirty(story)

    applied = cli("restore", "good", "--yes", "--pip")
    said = words(applied.stdout)
    assert applied.returncode == 1, applied.stdout + applied.stderr
    assert installed(ml_env, "tabulate")
    assert "~ pip uninstall tabulate" in said
    after = said.split("still different after the restore")[1]
    assert "packages.tabulate: now 0.9.0, snapshot (absent)" in after, said
    assert "what to do: tabulate: pip left it installed: " in after, said
    assert "packages" not in verified_line(applied.stdout)
    assert story.checkout.path.as_posix() in verified_line(applied.stdout)


def test_pip_itself_is_never_removed_and_says_so(cli: Cli, story: Story, tmp_path: Path) -> None:
    """A snapshot of a venv without pip, restored with --pip once pip is there: pip stays,
    named as remaining drift with why, in the plan and after."""
    python = make_venv(tmp_path / "venv")
    assert cli("capture", "local", "--label", "good", "--repo", str(story.checkout.path),
               "--python", str(python)).returncode == 0
    subprocess.run([str(python), "-m", "ensurepip"], check=True, capture_output=True)
    moved_and_dirty(story)
    applied = cli("restore", "good", "--yes", "--pip")
    said = words(applied.stdout)
    assert applied.returncode == 1, applied.stdout + applied.stderr
    assert "pip uninstall pip" not in said.split("what to do")[0]
    assert "what to do: pip: pip is the installer restore --pip runs: not removed" in said
    assert subprocess.run([str(python), "-m", "pip", "--version"],
                          capture_output=True).returncode == 0
    assert "packages" not in verified_line(applied.stdout)


# ---- "verified" only of what was checked equal; advice that fits --------------------------

def test_a_shadowed_sitecustomize_is_not_verified_nor_sent_to_pip(cli: Cli, story: Story,
                                                                  tmp_path: Path) -> None:
    """The venv's own sitecustomize never runs: a .pth puts a folder with another one first.
    It changed since the snapshot; restore writes only the file that runs, so the verified
    line names that file by its path, and the venv's file is named as different with advice
    that says which file shadows it."""
    python = make_venv(tmp_path / "venv")
    site = site_packages(python)
    shadow = tmp_path / "shadow" / "sitecustomize.py"
    shadow.parent.mkdir()
    shadow.write_text("import os\n")
    (site / "00-shadow-first.pth").write_text(
        f"import sys; sys.path.insert(0, {str(shadow.parent)!r})\n")
    own = site / "sitecustomize.py"
    own.write_text(TUNED)
    assert cli("capture", "local", "--label", "good", "--repo", str(story.checkout.path),
               "--python", str(python)).returncode == 0
    own.write_text(TUNED.replace("Ring", "Tree"))
    moved_and_dirty(story)

    result = cli("restore", "good", "--yes")
    said = words(result.stdout)
    assert result.returncode == 1, result.stdout + result.stderr
    assert verified_line(result.stdout) == (f"checkout {story.checkout.path} and the "
                                            f"sitecustomize that runs ({shadow})")
    assert "checkouts and sitecustomize match" not in said
    after = said.split("still different after the restore")[1]
    assert f"customize_shadowed[{own}]" in after.replace(" ", "")
    assert (f"what to do: venv sitecustomize.py never runs: {shadow} comes first on sys.path "
            "and runs in its place, so this difference has no effect") in after, said
    assert "pin the packages back" not in said and "--pip" not in said
    assert own.read_text() == TUNED.replace("Ring", "Tree")   # never written: it never runs


# ---- a rollback drops the stash of the work it put back ----------------------------------------

def test_rolling_back_drops_the_stash_of_the_work_it_put_back(cli: Cli, story: Story) -> None:
    capture_good(cli, story, "local")
    moved_and_dirty(story)
    work = {name: (story.checkout.path / name).read_text() for name in ("README.md", "mine.txt")}
    pulled = story.checkout.head()
    restored = cli("restore", "good", "--yes")
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert any("work saved before restoring good" in m for m in stash_messages(story))
    rollback = restored.stdout.split("rollback point: envsnap restore ")[1].split()[0]

    back = cli("restore", rollback, "--yes")
    assert back.returncode == 0, back.stdout + back.stderr
    assert story.checkout.head() == pulled
    for name, text in work.items():         # the work is back, byte for byte
        assert (story.checkout.path / name).read_text() == text
    assert "dropped the stash the restore made of your work, all back in the checkout: " \
        in words(back.stdout), back.stdout
    assert not any("before restoring good" in m for m in stash_messages(story))
    assert "engineer's own stash" in stash_messages(story)[-1]   # the user's own stays
    # a later `git stash pop` cannot apply the work twice: no stash of it is left
    assert story.checkout.git("status", "--porcelain").count("mine.txt") == 1


# ---- --check shows the refusals the run would make ---------------------------------------------

def test_check_with_rerun_shows_the_refusal_the_run_makes(cli: Cli, story: Story) -> None:
    capture_good(cli, story, "local")
    moved_and_dirty(story)
    real = cli("restore", "good", "--yes", "--rerun")
    assert real.returncode == 2 and "no recorded benchmark to rerun" in real.stderr
    check = cli("restore", "good", "--check", "--rerun")
    said = words(check.stdout + check.stderr)
    assert check.returncode == 2, said
    assert "plan for local (check mode: nothing changed)" in said
    assert "the restore itself would refuse: snapshot 'good' has no recorded benchmark to " \
        "rerun" in said, said
    assert "--rerun: the snapshot" not in said       # no command to show


def test_check_with_rerun_names_the_command_the_run_shows_and_when_it_runs(
        cli: Cli, story: Story) -> None:
    bench = story.checkout.path / "bench_one.py"
    bench.write_text("print('gen throughput (token/s): 94')\n")
    recorded = cli("bench", "local", "--cmd", f"python3 {bench}", "--metric",
                   r"token/s\): ([0-9.]+)", "--repeat", "3", "--label", "good", "--repo",
                   str(story.checkout.path))
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    moved_and_dirty(story)
    check = cli("restore", "good", "--check", "--rerun")
    assert check.returncode == 1, check.stdout + check.stderr
    assert (f"--rerun: the snapshot 'good' records the benchmark command 'python3 {bench}': "
            "the restore shows it, then runs it only with --yes or a yes at a terminal"
            in words(check.stdout)), check.stdout
    assert "would refuse" not in check.stdout
    declined = cli("restore", "good", "--rerun")
    assert declined.returncode == 5 and "nothing was changed or run" in declined.stderr


def test_check_shows_the_refusal_of_a_snapshot_whose_checkouts_nobody_named(
        cli: Cli, story: Story, tmp_path: Path) -> None:
    """A snapshot the user did not sign (here: one edited by hand) restores only checkouts
    named with --repo; the real run refuses, and --check says so after its plan."""
    capture_good(cli, story, "local")
    path = Path(cli.env["ENVSNAP_STORE"]) / "good.yaml"
    document = yaml.safe_load(path.read_text())
    document["meta"].pop("signature")
    path.write_text(yaml.safe_dump(document))
    moved_and_dirty(story)
    real = cli("restore", "good", "--yes", "--trust-foreign")
    assert real.returncode == 2 and "neither --repo nor the inventory" in real.stderr
    check = cli("restore", "good", "--check", "--trust-foreign")
    assert check.returncode == 2, check.stdout + check.stderr
    assert "the restore itself would refuse: the snapshot records checkouts that neither " \
        "--repo nor the inventory names" in words(check.stdout)
