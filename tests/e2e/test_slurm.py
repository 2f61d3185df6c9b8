"""The guide's Slurm recipes (docs/guide/fleets.md) through a real one-node Slurm
(tests/helpers/slurm.py): `srun` and `sbatch` run the installed `envsnap` entry point into a
shared store folder, and `envsnap diff --fleet` reads the folder the tasks wrote; the
prolog and epilog of playbooks/slurm record each job's start and end in the history."""
from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, Cli
from helpers.slurm import Slurm

pytestmark = pytest.mark.slurm

ENTRY_POINT = Path(sys.executable).parent / "envsnap"   # the venv's, as a user runs it
SBATCH_SCRIPT = ROOT / "playbooks" / "slurm" / "capture.sbatch"
JOB_SCRIPTS = ROOT / "playbooks" / "slurm"
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


# ---- Prolog= and Epilog=: a record of the node at each job's start and end -------------------

def wrapper(path: Path, script: str, env: dict[str, str], **settings: str) -> Path:
    """What a site points Prolog= at: the settings exported, then the script. Slurm hands a
    prolog none of the environment its daemon or the job has (HOME, PYTHONPATH: the test's)."""
    exported = {key: value for key, value in env.items() if not key.startswith("SLURM_")}
    lines = ["#!/bin/bash"] + [f"export {key}={shlex.quote(value)}"
                                for key, value in {**exported, **settings}.items()]
    path.write_text("\n".join([*lines, f"exec {shlex.quote(str(JOB_SCRIPTS / script))}"]) + "\n")
    path.chmod(0o755)
    return path


def reasons(env: dict[str, str], cwd: Path, store: Path) -> list[str]:
    listed = run(env, cwd, "envsnap", "history", "list", "--store", str(store))
    assert listed.returncode in (0, 2), listed.stderr
    return [line.split("  ")[-1] for line in listed.stdout.splitlines() if "  local  " in line]


def wait_for_reasons(env: dict[str, str], cwd: Path, store: Path, wanted: list[str]) -> None:
    """The epilog runs once the job has ended, after srun has returned: its record comes a
    moment later."""
    deadline = time.monotonic() + 90
    while sorted(reasons(env, cwd, store)) != sorted(wanted):
        assert time.monotonic() < deadline, reasons(env, cwd, store)
        time.sleep(0.5)


def test_prolog_and_epilog_record_each_job_in_the_history(job_env: dict[str, str],
                                                          tmp_path: Path,
                                                          slurm_cluster: Slurm) -> None:
    store = tmp_path / "nodes"
    settings = {"ENVSNAP_PROGRAM": str(ENTRY_POINT), "ENVSNAP_STORE": str(store)}
    prolog = wrapper(tmp_path / "prolog", "watch-prolog.sh", job_env, **settings)
    epilog = wrapper(tmp_path / "epilog", "watch-epilog.sh", job_env, **settings)
    slurm_cluster.reconfigure(f"Prolog={prolog}", f"Epilog={epilog}")
    try:
        job = run(job_env, tmp_path, "srun", "--nodes=1", "bash", "-c", "echo $SLURM_JOB_ID")
        assert job.returncode == 0, (job.stderr, slurm_cluster.logs())
        first = job.stdout.strip()
        wait_for_reasons(job_env, tmp_path, store,
                         [f"slurm job {first} start", f"slurm job {first} end"])

        # envsnap gone from the node: the job runs all the same, the node stays in service
        wrapper(tmp_path / "prolog", "watch-prolog.sh", job_env,
                ENVSNAP_PROGRAM=str(tmp_path / "no-envsnap"), ENVSNAP_STORE=str(store))
        again = run(job_env, tmp_path, "srun", "--nodes=1", "bash", "-c", "echo $SLURM_JOB_ID")
        assert again.returncode == 0, (again.stderr, slurm_cluster.logs())
        second = again.stdout.strip()
        wait_for_reasons(job_env, tmp_path, store,
                         [f"slurm job {first} start", f"slurm job {first} end",
                          f"slurm job {second} end"])
        sinfo = run(job_env, tmp_path, "sinfo", "--noheader", "--format=%T")
        assert sinfo.stdout.strip() == "idle", slurm_cluster.logs()
    finally:
        slurm_cluster.reconfigure()


# What slurmd gives a prolog: the job's id and user, the node, no PATH.
PROLOG_ENV = {"SLURM_JOB_ID": "4242", "SLURM_JOB_USER": "root", "SLURM_JOB_UID": "0",
              "SLURMD_NODENAME": "node1", "SLURM_SCRIPT_CONTEXT": "prolog_slurmd"}


def run_job_script(script: str, cwd: Path, **settings: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(JOB_SCRIPTS / script)], env={**PROLOG_ENV, **settings},
                          cwd=cwd, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(("script", "settings", "line"), [
    ("watch-prolog.sh", {"ENVSNAP_PROGRAM": "/nowhere/envsnap"},
     "envsnap-slurm: job 4242 start: envsnap not found at /nowhere/envsnap; nothing recorded"),
    ("watch-epilog.sh", {"ENVSNAP_STORE": "/proc/nowhere"},
     "envsnap-slurm: job 4242 end: envsnap exited 2: envsnap: error: store /proc/nowhere "
     "(--store) is not writable"),
    ("watch-prolog.sh", {"SLURM_JOB_ID": ""},
     "envsnap-slurm: no SLURM_JOB_ID in the environment (''): nothing recorded"),
    ("watch-prolog.sh", {"ENVSNAP_JOB_CAPTURE_SECONDS": "soon"},
     "envsnap-slurm: ENVSNAP_JOB_CAPTURE_SECONDS is not a whole number of seconds above 0"),
])
def test_a_failing_prolog_exits_0_with_one_line(job_env: dict[str, str], tmp_path: Path,
                                                script: str, settings: dict[str, str],
                                                line: str) -> None:
    env = {"ENVSNAP_PROGRAM": str(ENTRY_POINT), "HOME": job_env["HOME"],
           "PYTHONPATH": job_env["PYTHONPATH"], **settings}
    done = run_job_script(script, tmp_path, **env)
    assert done.returncode == 0
    assert done.stderr.startswith(line) and done.stderr.count("\n") == 1, done.stderr


def test_a_slow_capture_is_left_to_finish_and_the_job_goes_on(tmp_path: Path) -> None:
    slow = tmp_path / "slow-envsnap"
    done_file = tmp_path / "done"
    slow.write_text(f"#!/bin/bash\nsleep 8\necho \"$*\" > {shlex.quote(str(done_file))}\n")
    slow.chmod(0o755)
    done = run_job_script("watch-prolog.sh", tmp_path, ENVSNAP_PROGRAM=str(slow),
                          ENVSNAP_STORE=str(tmp_path / "s"), ENVSNAP_JOB_CAPTURE_SECONDS="1")
    assert done.returncode == 0 and not done_file.exists()   # back before the capture ended
    assert done.stderr.startswith("envsnap-slurm: job 4242 start: the capture took over 1s; "
                                  "the job goes on, the capture (pid "), done.stderr
    deadline = time.monotonic() + 30   # never signalled: it ends on its own, as it would
    while not done_file.exists():
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert done_file.read_text() == (f"watch local --once --reason slurm job 4242 start "
                                     f"--store {tmp_path / 's'}\n")
