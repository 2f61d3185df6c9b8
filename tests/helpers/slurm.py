"""A real one-node Slurm cluster on loopback for the tests: munged, slurmctld and slurmd.

Everything is the suite's own: a slurm.conf, a munge key and socket, state and spool
folders under a temporary folder, ports picked free. The client commands (srun, sbatch,
sinfo) find the cluster through SLURM_CONF, so the machine's own Slurm, if any, is never
touched. No cgroups and no accounting (proctrack/linuxproc, task/none): what runs in a
container. The daemons run as root (SlurmUser=root), as CI does; `stop` ends them all.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from helpers.sshd import free_port

PROGRAMS = ("munged", "slurmctld", "slurmd", "sinfo", "srun", "sbatch", "scontrol")
SBIN = ("/usr/sbin", "/sbin")   # the daemons' folder, on PATH for root only
READY_SECONDS = 30
ADDED = "# added by a test (Slurm.reconfigure)\n"


def find_program(name: str) -> str | None:
    path = os.pathsep.join([os.environ.get("PATH", ""), *SBIN])
    return shutil.which(name, path=path)


def missing_programs() -> list[str]:
    return [name for name in PROGRAMS if find_program(name) is None]


def short_hostname() -> str:
    return socket.gethostname().split(".")[0]


@dataclass
class Slurm:
    conf: Path
    node: str
    workdir: Path
    processes: list[subprocess.Popen[bytes]]
    munge_dir: Path

    def env(self, base: dict[str, str]) -> dict[str, str]:
        """`base` with this cluster's slurm.conf for srun, sbatch and sinfo, and no other
        SLURM_ variable: a suite run inside a job of a real cluster would hand srun that
        job's id and nodes."""
        env = {key: value for key, value in base.items() if not key.startswith("SLURM_")}
        return {**env, "SLURM_CONF": str(self.conf)}

    def logs(self) -> str:
        return read_logs(self.workdir)

    def reconfigure(self, *lines: str) -> None:
        """slurm.conf as started plus `lines` (`Prolog=...`; none: as started), read again
        by the controller and the node (`scontrol reconfigure`), which then is idle again."""
        base = self.conf.read_text().split(ADDED)[0]
        self.conf.write_text(base + (ADDED + "".join(f"{line}\n" for line in lines)
                                     if lines else ""))
        done = subprocess.run([str(find_program("scontrol")), "reconfigure"],
                              env=self.env(dict(os.environ)), capture_output=True, text=True,
                              timeout=30)
        if done.returncode != 0:
            raise RuntimeError(f"scontrol reconfigure: {done.stderr.strip()}")
        wait_until(lambda: node_state(self) == "idle", self.processes,
                   "the node did not become idle after reconfigure", self.workdir)

    def stop(self) -> None:
        # slurmd first: it holds the node; then the controller; munged last (both use it).
        for process in reversed(self.processes):
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        shutil.rmtree(self.munge_dir, ignore_errors=True)


def slurm_conf(workdir: Path, node: str, munge_socket: Path) -> str:
    controller_port, node_port = free_port(), free_port()
    cpus = max(4, os.cpu_count() or 1)   # the tests run up to 3 tasks at once, on any runner
    lines = [
        "ClusterName=envsnaptest",
        f"SlurmctldHost={node}(127.0.0.1)",
        f"SlurmctldPort={controller_port}", f"SlurmdPort={node_port}",
        "SlurmUser=root", "SlurmdUser=root",
        "AuthType=auth/munge", "CredType=cred/munge", f"AuthInfo=socket={munge_socket}",
        f"StateSaveLocation={workdir / 'state'}", f"SlurmdSpoolDir={workdir / 'spool'}",
        f"SlurmctldPidFile={workdir / 'slurmctld.pid'}",
        f"SlurmdPidFile={workdir / 'slurmd.pid'}",
        f"SlurmctldLogFile={workdir / 'slurmctld.log'}",
        f"SlurmdLogFile={workdir / 'slurmd.log'}",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none", "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none", "SwitchType=switch/none", "MpiDefault=none",
        "SchedulerType=sched/builtin", "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU", "ReturnToService=2",
        # the node is as configured here, whatever slurmd counts (CPUs above)
        "SlurmdParameters=config_overrides",
        f"NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN",
        "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
    ]
    return "\n".join(lines) + "\n"


def start_munged(workdir: Path, socket_dir: Path) -> tuple[subprocess.Popen[bytes], Path]:
    """munged with a key of its own, in a private folder."""
    key_dir = workdir / "munge-key"
    key_dir.mkdir(mode=0o700)
    key = key_dir / "munge.key"
    key.write_bytes(os.urandom(1024))
    os.chmod(key, 0o600)
    munge_socket = socket_dir / "munge.socket"
    process = subprocess.Popen(
        [str(find_program("munged")), "--foreground", f"--socket={munge_socket}",
         f"--key-file={key}", f"--pid-file={socket_dir / 'munged.pid'}",
         f"--seed-file={socket_dir / 'munged.seed'}", f"--log-file={workdir / 'munged.log'}"],
        stdout=subprocess.DEVNULL, stderr=(workdir / "munged.out.log").open("ab"))
    wait_until(munge_socket.exists, [process], "munged made no socket", workdir)
    return process, munge_socket


def start_slurm(workdir: Path) -> Slurm:
    """The cluster, started and ready: `sinfo` shows its node idle. A daemon that cannot
    start stops the others and raises with their logs."""
    workdir.mkdir(parents=True, exist_ok=True)
    for folder in ("state", "spool"):
        (workdir / folder).mkdir()
    node = short_hostname()
    # munged wants its socket's folder, and every folder above it, searchable by all: not
    # so under pytest's private temporary folders, so the socket lives in a folder of its own.
    socket_dir = Path(tempfile.mkdtemp(prefix="envsnap-munge-"))
    os.chmod(socket_dir, 0o755)
    slurm = Slurm(workdir / "slurm.conf", node, workdir, [], socket_dir)
    try:
        munged, munge_socket = start_munged(workdir, socket_dir)
        slurm.processes.append(munged)
        slurm.conf.write_text(slurm_conf(workdir, node, munge_socket))
        env = slurm.env(dict(os.environ))
        for daemon, flags in (("slurmctld", ["-D"]), ("slurmd", ["-D", "-N", node])):
            out = (workdir / f"{daemon}.out.log").open("ab")
            slurm.processes.append(subprocess.Popen(
                [str(find_program(daemon)), *flags, "-f", str(slurm.conf)], env=env,
                stdout=out, stderr=subprocess.STDOUT))
        wait_until(lambda: node_state(slurm) == "idle", slurm.processes,
                   "the node did not become idle", workdir)
    except BaseException:
        slurm.stop()
        raise
    return slurm


def node_state(slurm: Slurm) -> str:
    result = subprocess.run([str(find_program("sinfo")), "--noheader", "--nodes", slurm.node,
                             "--format=%T"], env=slurm.env(dict(os.environ)),
                            capture_output=True, text=True, timeout=10)
    return result.stdout.strip()


def wait_until(ready: Callable[[], bool], processes: list[subprocess.Popen[bytes]], what: str,
               workdir: Path) -> None:
    """Poll `ready`; a daemon that exits meanwhile ends the wait with the logs."""
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline:
        for process in processes:
            if process.poll() is not None:
                raise RuntimeError(f"{process.args[0]!s} exited ({process.returncode}): "
                                   f"{read_logs(workdir)}")
        if ready():
            return
        time.sleep(0.2)
    raise RuntimeError(f"{what} within {READY_SECONDS}s: {read_logs(workdir)}")


def read_logs(workdir: Path) -> str:
    return "\n".join(f"--- {log.name}\n{log.read_text(errors='replace')[-3000:]}"
                     for log in sorted(workdir.glob("*.log")))
