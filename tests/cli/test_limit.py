"""`--limit PATTERN`, Ansible's host pattern language, through the real CLI: what it selects is
what the real `ansible --list-hosts --limit` lists for the same inventory (the `test` extra
installs ansible-core), and capture, bench, play and `diff --fleet` act on exactly that."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import Cli
from helpers.ansibleview import STRICT, VENV_BIN, with_ansible_on_path
from helpers.benchscript import write_bench
from helpers.folded import words

INVENTORY = """\
[gpu]
node[01:08]
[rack1]
node0[1:3]
node07
[rack2]
node0[4:6]
[login]
login1
gw ansible_port=2222
[cluster:children]
rack1
rack2
[all:vars]
ansible_connection=local
"""

PATTERNS = [
    "node03", "gpu", "gpu:!node03", "gpu:&rack1", "gpu:&rack1:!node02", "rack1,login",
    "!rack1", "all:!gpu", "gpu[0]", "gpu[1:3]", "gpu[5:]", "gpu[-1]", "node0*", "node0?",
    "~node0[2-4]", "~^log", "cluster", "cluster:!rack2", "rack*", "nosuch:login", "login[1]",
    "gpu:!~node0[1-6]", "&rack2", "*", "node[01:04]", "ungrouped", "nosuch",
]


@pytest.fixture
def ansible_cli(cli: Cli) -> Cli:
    (cli.cwd / "inv.ini").write_text(INVENTORY)
    (cli.cwd / "all.yml").write_text("- hosts: all\n  tasks:\n    - debug: {msg: here}\n")
    return with_ansible_on_path(cli)


def ansible_lists(cli: Cli, limit: str) -> set[str]:
    """The hosts `ansible all --list-hosts --limit` lists (none: Ansible's error)."""
    done = subprocess.run([str(VENV_BIN / "ansible"), "all", "-i", "inv.ini", "--list-hosts",
                           "--limit", limit], cwd=cli.cwd, env={**cli.env, **STRICT},
                          capture_output=True, text=True)
    if done.returncode != 0:
        assert "no hosts to target" in done.stderr or "No hosts matched" in done.stderr, \
            done.stderr
        return set()
    return set(done.stdout.split("\n", 1)[1].split())


def envsnap_plays_on(cli: Cli, limit: str) -> set[str]:
    result = cli("play", "all.yml", "--inventory", "inv.ini", "--limit", limit)
    if result.returncode == 2 and "no hosts matched" in result.stderr:
        return set()
    assert result.returncode == 0, result.stderr
    return set(re.findall(r"^ok: \[([^\]]+)\]", result.stdout, re.M))


@pytest.mark.parametrize("limit", PATTERNS)
def test_a_limit_selects_what_ansible_lists(ansible_cli: Cli, limit: str) -> None:
    assert envsnap_plays_on(ansible_cli, limit) == ansible_lists(ansible_cli, limit)


def test_the_patterns_have_teeth(ansible_cli: Cli) -> None:
    """The cross-check is not comparing empty sets: the patterns select different hosts."""
    chosen = {limit: frozenset(ansible_lists(ansible_cli, limit)) for limit in PATTERNS[:12]}
    assert len(set(chosen.values())) == 12
    assert chosen["gpu[1:3]"] == {"node02", "node03", "node04"}


def test_a_limit_file_is_a_retry_file(ansible_cli: Cli) -> None:
    (ansible_cli.cwd / "failed.retry").write_text("node02\nlogin1\n\n")
    assert envsnap_plays_on(ansible_cli, "@failed.retry") == {"node02", "login1"} == \
        ansible_lists(ansible_cli, "@failed.retry")


def test_capture_of_a_group_with_a_limit(ansible_cli: Cli) -> None:
    result = ansible_cli("capture", "rack1", "--inventory", "inv.ini", "--limit",
                         "rack1:!node02:!node07", "--label", "run1")
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (ansible_cli.cwd / "store" / "run1").iterdir()) == \
        ["node01.yaml", "node03.yaml"]


def test_a_limit_that_leaves_no_host_is_one_line_and_exit_2(ansible_cli: Cli) -> None:
    result = ansible_cli("capture", "rack1", "--inventory", "inv.ini", "--limit",
                         "nosuch:login", "--label", "run1")
    assert result.returncode == 2
    assert result.stderr == ("envsnap: error: --limit 'nosuch:login' leaves no host to act "
                             "on (no host matches nosuch)\n")
    assert not (ansible_cli.cwd / "store").exists()


def test_a_pattern_that_matches_nothing_is_a_warning(ansible_cli: Cli) -> None:
    result = ansible_cli("capture", "login", "--inventory", "inv.ini", "--limit",
                         "nosuch,login1", "--label", "run1")
    assert result.returncode == 0, result.stderr
    assert "warning: --limit: no host matches 'nosuch', ignoring it\n" in result.stderr
    assert "login1: saved run1 -> " in result.stdout   # one host: the label as given


def test_a_missing_limit_file_is_one_line(ansible_cli: Cli) -> None:
    result = ansible_cli("capture", "gpu", "--inventory", "inv.ini", "--limit", "@nope.retry",
                         "--label", "run1")
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1
    assert "--limit @nope.retry: no such file" in result.stderr


def test_bench_runs_on_the_one_host_a_limit_picks(ansible_cli: Cli, tmp_path: Path) -> None:
    cmd = write_bench(tmp_path / "b")
    many = ansible_cli("bench", "rack1", "--inventory", "inv.ini", "--cmd", cmd, "--metric",
                       r"gen throughput \(token/s\): ([0-9.]+)", "--label", "b")
    assert many.returncode == 2
    assert "bench runs on one host; 'rack1' names 4 (--limit picks one)" in many.stderr
    result = ansible_cli("bench", "rack1", "--inventory", "inv.ini", "--limit", "rack1[2]",
                         "--cmd", cmd, "--metric", r"gen throughput \(token/s\): ([0-9.]+)",
                         "--repeat", "2", "--label", "b")
    assert result.returncode == 0, result.stderr
    assert "node03: saved b -> " in words(result.stdout)


@pytest.fixture
def fleet(ansible_cli: Cli) -> Path:
    """A fleet folder of four members, node05 the odd one (another NCCL_PROTO)."""
    captured = ansible_cli("capture", "local", "--label", "one")
    assert captured.returncode == 0, captured.stderr
    source = ansible_cli.cwd / "store" / "one.yaml"
    folder = ansible_cli.cwd / "fleet"
    folder.mkdir()
    for name in ("node01", "node04", "node05", "node06"):
        shutil.copy(source, folder / f"{name}.yaml")
    odd = yaml.safe_load((folder / "node05.yaml").read_text())
    odd["facts"]["env"]["shell"]["NCCL_PROTO"] = "LL"
    (folder / "node05.yaml").write_text(yaml.safe_dump(odd))
    return folder


def test_diff_fleet_with_a_limit_compares_only_the_members_it_selects(
        ansible_cli: Cli, fleet: Path) -> None:
    everyone = ansible_cli("diff", "--fleet", str(fleet))
    assert everyone.returncode == 1 and "NCCL_PROTO" in everyone.stdout, everyone.stdout
    without_odd = ansible_cli("diff", "--fleet", str(fleet), "--limit", "all:!node05")
    assert without_odd.returncode == 0, without_odd.stdout + without_odd.stderr
    assert "fleet of 3 snapshots" in without_odd.stdout
    by_group = ansible_cli("diff", "--fleet", str(fleet), "--inventory", "inv.ini",
                           "--limit", "rack2:!node05")
    assert by_group.returncode == 0 and "fleet of 2 snapshots" in by_group.stdout, \
        by_group.stdout + by_group.stderr


def test_a_fleet_of_one_is_nothing_to_compare(ansible_cli: Cli, fleet: Path) -> None:
    result = ansible_cli("diff", "--fleet", str(fleet), "--limit", "node05")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"nothing to compare: the fleet holds one snapshot " \
                            f"({fleet / 'node05.yaml'})\n"


def test_a_failed_fleet_writes_a_retry_file_and_a_rerun_captures_only_the_missing(
        cli: Cli) -> None:
    inventory = cli.cwd / "fleet.ini"
    inventory.write_text("[gpu]\nn1\nn2 python=/nonexistent/python3\nn3\n"
                         "[gpu:vars]\nansible_connection=local\n")
    first = cli("capture", "gpu", "--inventory", "fleet.ini", "--label", "run1")
    assert first.returncode == 3
    retry = cli.cwd / "store" / "run1.retry"
    assert retry.read_text() == "n2\n"
    assert f"1 of 3 hosts failed or partly failed; their names are in {retry} (--limit " \
           f"@{retry})" in first.stderr
    kept = {name: (cli.cwd / "store" / "run1" / name).read_bytes()
            for name in ("n1.yaml", "n3.yaml")}

    inventory.write_text("[gpu]\nn1\nn2\nn3\n[gpu:vars]\nansible_connection=local\n")
    again = cli("capture", "gpu", "--inventory", "fleet.ini", "--label", "run1")
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("skipped 2 hosts already in 'run1': n1, n3 (--force "
                                   "captures them again)\nn2: saved run1/n2 -> ")
    assert all((cli.cwd / "store" / "run1" / name).read_bytes() == data
               for name, data in kept.items())   # the others' snapshots untouched

    whole = cli("capture", "gpu", "--inventory", "fleet.ini", "--label", "run1")
    assert whole.returncode == 2   # nothing missing: an existing label, as before
    assert "already exists" in whole.stderr


def test_the_retry_file_limits_a_capture(cli: Cli) -> None:
    (cli.cwd / "fleet.ini").write_text("[gpu]\nn1\nn2\nn3\n[gpu:vars]\nansible_connection=local\n")
    (cli.cwd / "run1.retry").write_text("n2\nn3\n")
    result = cli("capture", "gpu", "--inventory", "fleet.ini", "--label", "run2", "--limit",
                 "@run1.retry")
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (cli.cwd / "store" / "run2").iterdir()) == \
        ["n2.yaml", "n3.yaml"]
