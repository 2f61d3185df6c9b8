"""The guide's Slurm recipe (docs/guide/fleets.md) through a real one-node Slurm
(tests/helpers/slurm.py): `srun` and `sbatch` run the installed `envsnap` entry point into a
shared store folder, and `envsnap diff --fleet` reads the folder the tasks wrote."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, Cli
from helpers.slurm import Slurm

pytestmark = pytest.mark.slurm

ENTRY_POINT = Path(sys.executable).parent / "envsnap"   # the venv's, as a user runs it
SBATCH_SCRIPT = ROOT / "playbooks" / "slurm" / "capture.sbatch"
RANK_VARIABLES = ("SLURM_PROCID", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK")


@pytest.fixture
def job_env(cli: Cli, slurm_cluster: Slurm) -> dict[str, str]:
    """The CLI's environment (HOME, XDG dirs, the checkout) with `envsnap` on PATH and the
    test cluster's slurm.conf: srun and sbatch pass it all to the job (--export=ALL)."""
    assert ENTRY_POINT.is_file(), f"no envsnap entry point at {ENTRY_POINT}: pip install -e ."
    env = {key: value for key, value in cli.env.items() if key not in RANK_VARIABLES}
    env["PATH"] = f"{ENTRY_POINT.parent}{os.pathsep}{env.get('PATH', '')}"
    return slurm_cluster.env(env)


def run(env: dict[str, str], cwd: Path, *command: str) -> subprocess.CompletedProcess[str]:
    """`command` as the job's shell would run it: found on `env`'s PATH (the venv's envsnap,
    not another install on this process's PATH)."""
    program = shutil.which(command[0], path=env["PATH"]) or command[0]
    return subprocess.run([program, *command[1:]], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=180)


def saved(store: Path) -> list[str]:
    return sorted(path.relative_to(store).as_posix() for path in store.rglob("*")
                  if path.is_file())


def test_srun_one_task_per_node_into_a_shared_store(job_env: dict[str, str], tmp_path: Path,
                                                     slurm_cluster: Slurm) -> None:
    store = tmp_path / "shared"
    recipe = ("srun", "--nodes=1", "--ntasks-per-node=1", "envsnap", "capture", "local",
              "--label", "run1/{host}", "--store", str(store))
    result = run(job_env, tmp_path, *recipe)
    assert result.returncode == 0, result.stderr
    node = slurm_cluster.node
    assert saved(store) == [f"run1/{node}.yaml"]
    assert f"local: saved run1/{node} -> " in result.stdout

    # The same label again (a rerun, or two tasks on one node): refused, nothing replaced.
    before = hashlib.sha256((store / f"run1/{node}.yaml").read_bytes()).hexdigest()
    again = run(job_env, tmp_path, *recipe)
    assert again.returncode == 2
    assert f"envsnap: error: snapshot 'run1/{node}' already exists in {store}" in again.stderr
    assert hashlib.sha256((store / f"run1/{node}.yaml").read_bytes()).hexdigest() == before


def test_srun_ranks_then_diff_fleet_finds_the_odd_task(job_env: dict[str, str],
                                                       tmp_path: Path,
                                                       slurm_cluster: Slurm) -> None:
    store = tmp_path / "shared"
    # Rank 2 is the misconfigured one, as a node whose profile sets an NCCL variable.
    task = ('if [ "$SLURM_PROCID" = 2 ]; then export NCCL_P2P_DISABLE=1; fi; '
            f'exec envsnap capture local --label "run2/{{host}}-{{rank}}" --store "{store}"')
    result = run(job_env, tmp_path, "srun", "--nodes=1", "--ntasks=3", "bash", "-c", task)
    assert result.returncode == 0, result.stderr
    node = slurm_cluster.node
    assert saved(store) == [f"run2/{node}-{rank}.yaml" for rank in range(3)]

    fleet = run(job_env, tmp_path, "envsnap", "diff", "--fleet", str(store / "run2"))
    assert fleet.returncode == 1, fleet.stderr
    assert "fleet of 3 snapshots: 1 fact differs" in fleet.stdout
    assert "NCCL_P2P_DISABLE" in fleet.stdout and f"run2/{node}-2" in fleet.stdout


def test_sbatch_script_captures_the_nodes_and_diffs_them(job_env: dict[str, str],
                                                         tmp_path: Path, cli: Cli,
                                                         slurm_cluster: Slurm) -> None:
    store = tmp_path / "shared"
    # Two known-good snapshots already in the run's folder, so the one node has peers.
    for name in ("reference-a", "reference-b"):
        reference = run(job_env, tmp_path, "envsnap", "capture", "local", "--label",
                        f"run3/{name}", "--store", str(store))
        assert reference.returncode == 0, reference.stderr
    output = tmp_path / "job.out"
    job = run(job_env, tmp_path, "sbatch", "--wait", "--nodes=1", f"--output={output}",
              "--export=ALL,NCCL_P2P_DISABLE=1", str(SBATCH_SCRIPT), str(store), "run3")
    log = output.read_text() if output.exists() else ""
    node = slurm_cluster.node
    assert job.returncode == 1, (job.stderr, log)   # diff's exit: the node drifted
    assert f"local: saved run3/{node} -> " in log
    assert "fleet of 3 snapshots: 1 fact differs" in log and "NCCL_P2P_DISABLE" in log
    assert saved(store) == ["run3/reference-a.yaml", "run3/reference-b.yaml",
                            f"run3/{node}.yaml"]


def test_sbatch_on_a_one_node_allocation_is_nothing_to_compare(job_env: dict[str, str],
                                                               tmp_path: Path,
                                                               slurm_cluster: Slurm) -> None:
    """The capture worked: a fleet of one is not an error (it was exit 2, "needs at least
    two snapshots", failing the job)."""
    store = tmp_path / "shared"
    output = tmp_path / "job.out"
    job = run(job_env, tmp_path, "sbatch", "--wait", "--nodes=1", f"--output={output}",
              str(SBATCH_SCRIPT), str(store), "run4")
    log = output.read_text() if output.exists() else ""
    node = slurm_cluster.node
    assert job.returncode == 0, (job.stderr, log)
    assert f"local: saved run4/{node} -> " in log
    assert f"nothing to compare: the fleet holds one snapshot ({store}/run4/{node}.yaml)" in log
