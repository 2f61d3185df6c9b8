"""A fleet of N snapshots made from the real H200 recording (tests/data/h200/snapshot.yaml),
with planted outliers: what bench/bench_fleet.py times `diff --fleet` on (1,000 nodes) and
tests/e2e/test_fleet_scale.py checks (fewer nodes, the same generator).

Every node is its own machine: hostname, boot id, GPU uuid, worker pid and start time
differ on each (facts a fleet diff must ignore), so no section's digest is shared by two
nodes. On top of that, a few nodes carry a real difference, the planted outliers:

  driver     one node on another NVIDIA driver
  nccl-env   two nodes whose worker runs with another NCCL_ALGO
  pcie-x8    one node's GPU link trained at x8 instead of x16
  ahead      one node's checkout 3 commits ahead (commits touching pynccl.py)

Each node is saved into a store folder as the user's own capture would be: meta.host and
meta.label its own, digests recomputed, signed with the key of the user whose environment
is given (the `cli` fixture's HOME, say), so it loads as theirs.
"""
from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from envsnap.snapshot import provenance
from envsnap.snapshot.document import section_digest
from envsnap.snapshot.store import Store, atomic_write, dump_yaml
from helpers.paths import DATA

BASE = DATA / "h200" / "snapshot.yaml"
GPU_BUS = "00000000:00:06.0"
REPO = "/tmp/repo"
WORKER_PID = "768"

Change = Callable[[dict[str, Any]], None]
Row = tuple[str, str, tuple[str, ...], int]    # section, where, differing hosts, rank
# Runs `envsnap diff --json` on two snapshot files; returns its parsed output.
PairwiseDiff = Callable[[Path, Path], dict[str, Any]]


@dataclass(frozen=True)
class Plant:
    """One planted difference: its name, the nodes (by index) that carry it, the change."""

    name: str
    nodes: tuple[int, ...]
    change: Change


@dataclass(frozen=True)
class Fleet:
    folder: Path                  # the store folder holding every node's snapshot
    paths: list[Path]             # node i's file, in node order
    hosts: list[str]              # node i's meta.host
    plants: list[Plant]

    def hosts_of(self, plant: Plant) -> list[str]:
        return [self.hosts[i] for i in plant.nodes]

    @property
    def unplanted(self) -> list[Path]:
        """The nodes that carry no plant: any of them is the "good" side of a pairwise diff."""
        planted = {i for plant in self.plants for i in plant.nodes}
        return [path for i, path in enumerate(self.paths) if i not in planted]


def host_name(index: int) -> str:
    return f"gpu{index:04d}"


def other_driver(document: dict[str, Any]) -> None:
    document["facts"]["nvidia"]["driver"] = "580.126.09"


def other_nccl_algo(document: dict[str, Any]) -> None:
    worker = next(iter(document["facts"]["env"]["processes"].values()))
    worker["env"]["NCCL_ALGO"] = "Tree"


def link_at_x8(document: dict[str, Any]) -> None:
    document["facts"]["nvidia"]["gpus"][GPU_BUS]["pcie_width_current"] = 8


def three_commits_ahead(document: dict[str, Any]) -> None:
    repo = document["facts"]["git"]["repos"][REPO]
    head, when = repo["head"], int(repo["history"][0]["time"])
    new_commits, new_reflog = [], []
    for number in (1, 2, 3):
        sha = hashlib.sha1(f"ahead {number}".encode()).hexdigest()
        subject = f"pynccl: tune the ring, step {number}"
        new_commits.insert(0, {"author": "a", "files": ["pynccl.py"], "parents": [head],
                               "sha": sha, "subject": subject, "time": when + number})
        new_reflog.insert(0, {"message": f"commit: {subject}", "new": sha, "old": head,
                              "time": when + number, "tz": "+0000"})
        head = sha
    repo["history"] = new_commits + repo["history"]
    repo["reflog"] = new_reflog + repo["reflog"]
    for number, entry in enumerate(repo["reflog"]):
        entry["selector"] = f"HEAD@{{{number}}}"
    repo["head"] = head


def plants_for(count: int) -> list[Plant]:
    """The outliers, spread over the fleet (never node 0, the first a reader sees)."""
    if count < 20:
        raise ValueError("a fleet with planted outliers needs at least 20 nodes")
    at = [count * share // 10 for share in (1, 3, 5, 6, 8)]
    return [Plant("driver", (at[0],), other_driver),
            Plant("nccl-env", (at[1], at[4]), other_nccl_algo),
            Plant("pcie-x8", (at[2],), link_at_x8),
            Plant("ahead", (at[3],), three_commits_ahead)]


def as_node(base: dict[str, Any], index: int, label: str) -> dict[str, Any]:
    """The recording as node `index` of the fleet: its own name and machine-unique facts."""
    document = copy.deepcopy(base)
    name = host_name(index)
    document["meta"].update(host=name, label=label, address=f"10.0.{index // 256}.{index % 256}")
    document["meta"].pop("signature", None)
    facts = document["facts"]
    facts["system"].update(hostname=name, boot_id=f"boot-{index:08d}")
    facts["nvidia"]["gpus"][GPU_BUS]["uuid"] = f"GPU-{index:08d}-0000-0000-0000-000000000000"
    worker = facts["env"]["processes"].pop(WORKER_PID)
    worker.update(start_epoch=worker["start_epoch"] + index, start_since_boot_s=100.0 + index)
    facts["env"]["processes"][str(1000 + index)] = worker
    return document


def refresh_digests(document: dict[str, Any]) -> None:
    document["digests"] = {name: section_digest(facts)
                           for name, facts in document["facts"].items()}


def make_fleet(store_root: Path, group: str, count: int, env: Mapping[str, str]) -> Fleet:
    """`count` snapshots saved in the store at `store_root` as `group/gpuNNNN`, signed with
    the key of the user whose environment (HOME, XDG_CONFIG_HOME) is `env`."""
    base = yaml.load(BASE.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    plants = plants_for(count)
    changes: dict[int, list[Change]] = {}
    for plant in plants:
        for index in plant.nodes:
            changes.setdefault(index, []).append(plant.change)
    store, key = Store(store_root), provenance.user_key(env)
    paths, hosts = [], []
    for index in range(count):
        label = f"{group}/{host_name(index)}"
        document = as_node(base, index, label)
        for change in changes.get(index, []):
            change(document)
        refresh_digests(document)
        path = store.path_for(label)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, dump_yaml(provenance.signed(document, key)))
        paths.append(path)
        hosts.append(host_name(index))
    return Fleet(store_root / group, paths, hosts, plants)


# ---- what a fleet diff must report ---------------------------------------------------------

def pairwise_ranks(diff: PairwiseDiff, good: Path, other: Path) -> dict[tuple[str, str], int]:
    """(section, where) -> rank of each finding of `envsnap diff good other`."""
    return {(f["section"], f["where"]): f["rank"] for f in diff(good, other)["findings"]}


def expected_rows(diff: PairwiseDiff, fleet: Fleet) -> list[Row]:
    """Per plant, what the pairwise diff finds between a good node and a planted one beyond
    what it finds between two good nodes (hostnames, boot ids, uuids: any two machines),
    ranked as it ranks them; highest rank first, as a fleet report lists them."""
    good, control = fleet.unplanted[0], fleet.unplanted[-1]
    any_two = pairwise_ranks(diff, good, control).keys()
    rows = []
    for plant in fleet.plants:
        found = pairwise_ranks(diff, good, fleet.paths[plant.nodes[0]])
        planted = {key: rank for key, rank in found.items() if key not in any_two}
        if not planted:
            raise AssertionError(f"plant {plant.name} made no difference")
        hosts = tuple(sorted(fleet.hosts_of(plant)))
        rows += [(section, where, hosts, rank) for (section, where), rank in planted.items()]
    return sorted(rows, key=lambda row: -row[3])


def reported_rows(report: dict[str, Any]) -> list[Row]:
    """The rows of `diff --fleet --json`, in its order, as (section, where, hosts, rank)."""
    return [(row["section"], row["where"],
             tuple(sorted(host for other in row["others"] for host in other["hosts"])),
             row["rank"]) for row in report["disagreements"]]
