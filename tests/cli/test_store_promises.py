"""The small promises of a CLI, through the real CLI: the store is named by its absolute path
and how it was chosen, a store envsnap makes inside a git checkout stays out of commits, a
missing store is said as such, a fleet's folder points to its members, `report -o` takes
its format from the suffix, `envsnap ansible` says what next, and typos get "did you mean"."""
from __future__ import annotations

import subprocess
from pathlib import Path

from conftest import ROOT, Cli, OfflineCli


def without_store_variable(cli: Cli) -> Cli:
    cli.env.pop("ENVSNAP_STORE", None)
    return cli


def test_list_with_no_store_yet_names_the_default_and_how_to_make_one(cli: Cli) -> None:
    result = without_store_variable(cli)("list")
    assert result.returncode == 0, result.stderr
    assert result.stdout == (f"no snapshots yet: the store {cli.cwd / 'snapshots'} (the "
                             "default ./snapshots; --store or $ENVSNAP_STORE picks another) "
                             "does not exist; `envsnap capture local` makes the first\n")


def test_a_store_named_by_hand_that_does_not_exist_is_an_error(cli: Cli) -> None:
    result = cli("list", "--store", "typo")
    assert result.returncode == 2
    assert result.stderr == f"envsnap: error: store {cli.cwd / 'typo'} (--store) does not exist\n"


def test_a_missing_label_names_the_store_how_it_was_chosen_and_the_nearest_label(
        cli: Cli) -> None:
    assert cli("capture", "local", "--label", "run1/gpu-a").returncode == 0
    result = cli("show", "run1/gpu-b")
    assert result.returncode == 2
    assert result.stderr == (f"envsnap: error: no snapshot labelled 'run1/gpu-b' in "
                             f"{cli.env['ENVSNAP_STORE']} ($ENVSNAP_STORE) (did you mean "
                             "'run1/gpu-a'?); envsnap list shows what there is\n")


def test_a_fleets_folder_points_to_its_members_and_to_diff_fleet(cli: Cli) -> None:
    (cli.cwd / "inv.ini").write_text("[gpu]\nn1\nn2\n[gpu:vars]\nansible_connection=local\n")
    assert cli("capture", "gpu", "--inventory", "inv.ini", "--label", "run1").returncode == 0
    result = cli("show", "run1")
    assert result.returncode == 2
    assert result.stderr == ("envsnap: error: 'run1' is a fleet's folder of 2 snapshots "
                             "(run1/n1, run1/n2): name one (envsnap show run1/n1), or compare "
                             "them: envsnap diff --fleet run1\n")


def git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True,
                          text=True).stdout


def test_a_store_made_inside_a_git_checkout_stays_out_of_commits(cli: Cli) -> None:
    checkout = cli.cwd / "work"
    checkout.mkdir()
    git(checkout, "init", "-q")
    cli.cwd = checkout
    result = without_store_variable(cli)("capture", "local", "--label", "mine")
    assert result.returncode == 0, result.stderr
    assert (checkout / "snapshots" / "mine.yaml").is_file()
    assert git(checkout, "status", "--porcelain", "--untracked-files=all") == ""
    elsewhere = cli.cwd.parent / "plain"
    assert cli("capture", "local", "--label", "x", "--store", str(elsewhere)).returncode == 0
    assert not (elsewhere / ".gitignore").exists()   # not in a checkout: nothing to keep out


def test_envsnaps_own_clone_ignores_what_its_default_store_holds() -> None:
    ignored = subprocess.run(["git", "-C", str(ROOT), "check-ignore",
                              "snapshots/run1/node01.yaml", "snapshots/mine.yaml"],
                             capture_output=True, text=True)
    assert ignored.stdout.split() == ["snapshots/run1/node01.yaml", "snapshots/mine.yaml"]
    examples = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q",
                               "snapshots/examples/story-good.yaml"])
    assert examples.returncode == 1   # the tracked examples are not


def test_report_takes_its_format_from_the_suffix_and_refuses_one_it_does_not_write(
        cli: Cli) -> None:
    assert cli("capture", "local", "--label", "one").returncode == 0
    refused = cli("report", "one", "-o", "x.pdf")
    assert refused.returncode == 2
    assert refused.stderr == ("envsnap: error: -o x.pdf: envsnap writes no .pdf file; name it "
                              ".md, .markdown, .html, .htm, .json, or give --format\n")
    assert not (cli.cwd / "x.pdf").exists()
    assert cli("report", "one", "-o", "x.html").returncode == 0
    assert (cli.cwd / "x.html").read_text().lstrip().lower().startswith("<!doctype html")


def test_envsnap_ansible_prints_the_path_and_what_to_do_next(cli: Cli) -> None:
    result = cli("ansible", "build")
    assert result.returncode == 0, result.stderr
    built = cli.cwd / "build" / "ansible_collections" / "envsnap" / "gpu"
    assert result.stdout == f"{built}\n"   # alone, for $(envsnap ansible DEST)
    assert result.stderr == (f"next: export ANSIBLE_COLLECTIONS_PATH={cli.cwd / 'build'} and "
                             "use envsnap.gpu.envsnap_capture in a play "
                             "(docs/guide/fleets.md#ansible), or "
                             f"pack it: ansible-galaxy collection build {built}\n")


def test_typos_get_did_you_mean(cli: Cli, offline_cli: OfflineCli) -> None:
    command = cli("captur", "local")
    assert command.returncode == 2
    assert command.stderr.endswith("envsnap: error: unknown command 'captur'; did you mean "
                                   "capture?\n")
    option = cli("capture", "local", "--lable", "x")
    assert option.returncode == 2
    assert option.stderr.endswith("envsnap: error: unrecognized option --lable; did you mean "
                                  "--label?\n")
    (cli.cwd / "inv.ini").write_text("[gpu]\nnode01\n[gpu:vars]\nansible_connection=local\n")
    (Path(cli.env["HOME"]) / ".ssh").mkdir()
    (Path(cli.env["HOME"]) / ".ssh" / "config").write_text("")
    host = offline_cli("capture", "node10", "--inventory", "inv.ini", "--label", "x")
    assert host.returncode == 2
    assert host.stderr == ("envsnap: error: node10: not in inventory inv.ini (groups: gpu, "
                           "all), not a Host in ~/.ssh/config, and the name does not resolve "
                           "(did you mean 'node01'?)\n")
