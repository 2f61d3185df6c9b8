"""`capture --label` templates ({host}, {date}, {time}, {rank}) and many captures writing one
store at once, through the real CLI."""
from __future__ import annotations

import re
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml
from conftest import Cli
from helpers.sshd import Sshd

from envsnap.snapshot.document import hostname

# What launchers export as the task's rank (docs/guide/fleets.md, "Slurm"); unset in these tests
RANK_VARIABLES = ("SLURM_PROCID", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK")


def with_env(cli: Cli, **variables: str) -> Cli:
    """The CLI with no launcher's rank variables (the suite may itself run under one), and
    `variables` set."""
    env = {key: value for key, value in cli.env.items() if key not in RANK_VARIABLES}
    return Cli(env={**env, **variables}, cwd=cli.cwd)


def store_files(cli: Cli) -> list[str]:
    store = Path(cli.env["ENVSNAP_STORE"])
    return sorted(path.relative_to(store).as_posix() for path in store.rglob("*")
                  if path.is_file())


def utc_dates() -> set[str]:
    """Today in UTC, and the day before: a test may start just before midnight."""
    now = datetime.now(timezone.utc)
    return {day.strftime("%Y-%m-%d") for day in (now, now - timedelta(minutes=5))}


def test_host_rank_and_date_fields_of_a_local_capture(cli: Cli) -> None:
    result = with_env(cli)("capture", "local", "--label", "run1/{host}-{rank}-{date}-{time}")
    assert result.returncode == 0, result.stderr
    [saved] = store_files(cli)
    document = yaml.safe_load((Path(cli.env["ENVSNAP_STORE"]) / saved).read_text())
    node = str(hostname(document)).split(".")[0]   # local's {host}: the short hostname
    stem, time_of_day = saved.removesuffix(".yaml").rsplit("-", 1)
    assert stem in {f"run1/{node}-0-{day}" for day in utc_dates()}
    assert re.fullmatch(r"([01]\d|2[0-3])[0-5]\d[0-5]\d", time_of_day), saved
    assert document["meta"]["label"] == saved.removesuffix(".yaml")
    assert f"saved {document['meta']['label']} ->" in result.stdout


@pytest.mark.parametrize(("variables", "rank"), [
    ({"SLURM_PROCID": "3"}, "3"),
    ({"SLURM_PROCID": "1", "RANK": "5"}, "1"),   # Slurm's own wins over a torchrun-style one
    ({"RANK": "5"}, "5"),
    ({"OMPI_COMM_WORLD_RANK": "7"}, "7"),
    ({"PMI_RANK": "2"}, "2"),
])
def test_rank_comes_from_the_launcher(cli: Cli, variables: dict[str, str], rank: str) -> None:
    result = with_env(cli, **variables)("capture", "local", "--label", "r/task-{rank}")
    assert result.returncode == 0, result.stderr
    assert store_files(cli) == [f"r/task-{rank}.yaml"]


@pytest.mark.parametrize("template", [
    "{host.__class__}", "{host.__class__.__init__.__globals__}", "{host:>9}", "{host!r}",
    "{host[0]}", "{0}", "{}", "{nope}", "run1/{host", "run1/host}", "{{host}}", "run}{host",
])
def test_a_bad_template_is_one_line_before_anything_runs(cli: Cli, template: str) -> None:
    result = with_env(cli)("capture", "local", "--label", template)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"envsnap: error: label template {template!r}: ")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "{host}, {date}, {time}, {rank}" in result.stderr
    assert store_files(cli) == []


def test_a_rank_that_is_no_number_is_refused(cli: Cli) -> None:
    result = with_env(cli, SLURM_PROCID="zero")("capture", "local", "--label", "r/{rank}")
    assert result.returncode == 2
    assert result.stderr == "envsnap: error: {rank}: SLURM_PROCID='zero' is not a whole number\n"
    assert store_files(cli) == []


def test_a_fleet_template_names_each_host(ssh_cli: Cli, sshd: Sshd) -> None:
    hosts = sshd.addresses[1:3]
    result = with_env(ssh_cli)("capture", *hosts, "--label", "nightly-{date}/{host}")
    assert result.returncode == 0, result.stderr
    saved = store_files(ssh_cli)
    assert [Path(path).name for path in saved] == [f"{host}.yaml" for host in hosts]
    assert {Path(path).parent.name for path in saved} <= {f"nightly-{day}" for day in utc_dates()}


def test_many_captures_of_one_label_at_once_save_one_and_refuse_the_rest(cli: Cli) -> None:
    """Tasks writing one shared store: one label is saved once, never silently replaced."""
    env = with_env(cli).env
    command = [sys.executable, "-m", "envsnap", "capture", "local", "--label", "run1/node"]
    tasks = [subprocess.Popen(command, cwd=cli.cwd, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    results = [(task.wait(timeout=120), *task.communicate()) for task in tasks]
    assert sorted(code for code, _, _ in results) == [0, 2, 2, 2], results
    for code, _, stderr in results:
        if code == 2:   # refused before capturing, or when saving: either way one line
            assert stderr.count("\n") == 1 and "Traceback" not in stderr
            assert "already exists" in stderr or "saved in" in stderr, stderr
    [saved] = store_files(cli)   # and no temporary file left behind
    assert cli("show", saved.removesuffix(".yaml")).returncode == 0
