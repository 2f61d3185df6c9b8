"""`diff --fleet` over a generated fleet (tests/helpers/fleetgen.py, the fleet bench/bench_fleet.py
times at 1,000 nodes): exactly the planted outliers are reported, each ranked as the
pairwise `diff` of a good node and that outlier ranks it."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import Cli
from helpers.fleetgen import expected_rows, make_fleet, reported_rows
from helpers.sshd import keygen

from envsnap.hosts.transport import system_host_keys


def diff_json(cli: Cli) -> Any:
    def diff(good: Path, other: Path) -> dict[str, Any]:
        result = cli("diff", str(good), str(other), "--json")
        assert result.returncode == 1, result.stderr
        return dict(json.loads(result.stdout))
    return diff


def test_a_fleet_of_100_reports_exactly_the_planted_outliers_ranked_as_diff(cli: Cli) -> None:
    fleet = make_fleet(Path(cli.env["ENVSNAP_STORE"]), "run1", 100, cli.env)
    result = cli("diff", "--fleet", "run1", "--json")
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert report["hosts"] == fleet.hosts and report["not_captured"] == []
    expected = expected_rows(diff_json(cli), fleet)
    assert {row[2] for row in expected} == {tuple(sorted(fleet.hosts_of(plant)))
                                            for plant in fleet.plants}
    # the same rows (nothing missed, nothing extra), in the same order, with the same ranks
    assert reported_rows(report) == expected
    for row in report["disagreements"]:
        assert row["majority_count"] == 100 - sum(len(o["hosts"]) for o in row["others"])


def test_the_fleet_is_the_users_own(cli: Cli) -> None:
    """Signed with the user's key (the cli's HOME): loaded as a capture of theirs would be."""
    fleet = make_fleet(Path(cli.env["ENVSNAP_STORE"]), "run2", 20, cli.env)
    shown = cli("show", str(fleet.paths[3]))
    assert shown.returncode == 0, shown.stderr
    assert "mine (signed with your key)" in shown.stdout


def test_known_hosts_is_parsed_once_until_it_changes(tmp_path: Path) -> None:
    """Each connection of a fleet capture checks its host's key; paramiko's parse of a
    known_hosts is quadratic in its lines, so it is parsed once, again only once changed."""
    known_hosts = tmp_path / "known_hosts"
    key = keygen(tmp_path / "host_key").split()
    known_hosts.write_text("".join(f"10.0.0.{n} {key[0]} {key[1]}\n" for n in range(1, 65)))
    first = system_host_keys(known_hosts)
    assert system_host_keys(known_hosts) is first and first.lookup("10.0.0.64") is not None
    with known_hosts.open("a") as out:   # as --accept-new-host-keys records a key
        out.write(f"10.0.1.1 {key[0]} {key[1]}\n")
    again = system_host_keys(known_hosts)
    assert again is not first and again.lookup("10.0.1.1") is not None
