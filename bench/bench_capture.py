"""Capture speed against baselines measured in the same run, on a real sshd on loopback.

Prints ratios (the machines are noisy; only ratios from one run mean anything). The two of
one host are paired: each pair runs both commands back to back (in alternating order), and
the ratio printed is the median of the pairs' ratios, over --repeat pairs (at least 10):
  capture / ssh-floor      envsnap capture of one host vs `ssh host 'python3 -c pass'` (one
                           OpenSSH connection plus the remote interpreter's start); then
                           against the same floor with the key exchange capture prefers
                           (curve25519, as paramiko: OpenSSH 9's default costs ~0.1 s more)
  ansible / capture        `ansible -m setup` against the same sshd vs envsnap capture
  the agent's own cost     meta.agent.startup_seconds and masking_seconds of those captures
  CPU on this side         user+sys CPU of the envsnap process and of the ssh client, each
                           run's median: steadier than wall time on a loaded machine
Fleet (--fleet N, 0 for none):
  fleet32 / capture        32 hosts (loopback aliases of one sshd) vs one host
  fleet32 / openssh32      the same 32 captures vs 32 concurrent OpenSSH runs of the cached
                           agent: on one 2-core machine every "host" shares the same cores, so
                           this is the part of the fleet time that envsnap itself adds

Bytecode is cached on both sides, as an installed envsnap runs: envsnap is compiled before
the first run and PYTHONDONTWRITEBYTECODE is dropped (the host's python caches the agent's
own in its folder).

Usage: python3 bench/bench_capture.py [--repeat 10] [--fleet 32]
"""
from __future__ import annotations

import argparse
import compileall
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import ledger
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from helpers.sshd import start_sshd  # noqa: E402

from envsnap.hosts.openssh import KEX_FIRST  # noqa: E402

CPU: dict[str, list[float]] = {}   # argv[0]'s name -> user+sys seconds of each run


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    result = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.setdefault(Path(argv[0]).name, []).append(
        after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    if result.returncode != 0:
        raise SystemExit(f"failed: {' '.join(argv)}\n{result.stdout[-800:]}{result.stderr[-800:]}")
    return elapsed


def median_of(repeat: int, argv_for: Callable[[int], Any], env: dict[str, str], cwd: Path,
              runner: Callable[[Any], float] | None = None) -> float:
    run = runner or (lambda argv: timed(argv, env, cwd))
    return statistics.median(run(argv_for(i)) for i in range(repeat))


def parallel_ssh_agent(addresses: list[str], env: dict[str, str], ssh_config: str,
                       login_home: Path) -> float:
    """The same remote work as a fleet capture, with OpenSSH and no envsnap in between.
    The agent is the one the capture cached in the logins' HOME (the test sshd gives every
    login one of its own), not this user's."""
    agent = sorted((login_home / ".cache" / "envsnap").glob("agent-*/"),
                   key=lambda path: path.stat().st_mtime)[-1]
    command = f"cd && exec python3 .cache/envsnap/{agent.name} e30="   # config: {}
    started = time.perf_counter()
    procs = [subprocess.Popen(["ssh", "-F", ssh_config, address, command], env=env,
                              stdout=subprocess.DEVNULL) for address in addresses]
    if any(proc.wait() for proc in procs):
        raise SystemExit("an OpenSSH run of the agent failed")
    return time.perf_counter() - started


def envsnap(*args: str) -> list[str]:
    return [sys.executable, "-m", "envsnap", "capture", *args, "--force"]


def write_inventory(path: Path, addresses: list[str]) -> None:
    lines = ["all:", "  hosts:"]
    lines += [f"    h{n}: {{ansible_host: {address}}}" for n, address in enumerate(addresses)]
    path.write_text("\n".join(lines) + "\n")


def paired(repeat: int, first: Callable[[], float],
           second: Callable[[], float]) -> tuple[float, float, float]:
    """(median of first, median of second, median of second/first) over `repeat` pairs, the
    order alternating so that neither always runs on the warmer machine."""
    pairs = []
    for index in range(repeat):
        if index % 2:
            b = second()
            a = first()
        else:
            a = first()
            b = second()
        pairs.append((a, b))
    return (statistics.median(a for a, _ in pairs), statistics.median(b for _, b in pairs),
            statistics.median(b / a for a, b in pairs))


def agent_costs(store: Path, labels: list[str]) -> str:
    """Median start-up and masking seconds the agent recorded in these snapshots."""
    agents = [yaml.safe_load((store / f"{label}.yaml").read_text())["meta"]["agent"]
              for label in labels]
    if not all("startup_seconds" in agent for agent in agents):
        return "not recorded (an older agent)"
    startup = statistics.median(agent["startup_seconds"] for agent in agents)
    masking = statistics.median(agent["masking_seconds"] for agent in agents)
    return f"start-up {startup:.3f} s, masking {masking:.4f} s (medians, as recorded)"


def cpu_ms(program: str) -> float:
    return 1000 * statistics.median(CPU[Path(program).name])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--fleet", type=int, default=32)
    args = parser.parse_args()
    repeat = max(10, args.repeat)
    compileall.compile_dir(str(ROOT / "envsnap"), quiet=1)
    work = Path(tempfile.mkdtemp(prefix="envsnap-bench-"))
    daemon = start_sshd(work / "sshd", aliases=max(1, args.fleet))
    try:
        env = daemon.write_home(work / "home")
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["ENVSNAP_STORE"] = str(work / "store")
        env["ANSIBLE_HOST_KEY_CHECKING"] = "True"
        host = daemon.addresses[0]
        ssh_config = str(work / "home" / ".ssh" / "config")
        timed(envsnap(host, "--label", "warm"), env, work)  # ships the agent once
        labels: list[str] = []

        def capture() -> float:
            labels.append(f"one-{len(labels)}")
            return timed(envsnap(host, "--label", labels[-1]), env, work)

        floor_argv = ["ssh", "-F", ssh_config, host, "python3 -c pass"]
        floor, one, ratio = paired(repeat, lambda: timed(floor_argv, env, work), capture)
        print(f"ssh floor (ssh host 'python3 -c pass'): {floor:.3f} s  (median of {repeat})")
        print(f"envsnap capture, one host:              {one:.3f} s")
        print(f"ratio capture / ssh-floor:               {ratio:.2f}x  (median of {repeat} "
              "pairs; target <= 1.25)")
        ledger.record(__file__, "capture / ssh-floor", ratio, "x",
                      f"ssh floor {floor:.3f} s (capture {one:.3f} s)", "<= 1.25")
        same_kex = [*floor_argv[:3], "-o", f"KexAlgorithms={KEX_FIRST}", *floor_argv[3:]]
        floor_kex, one_kex, ratio_kex = paired(repeat, lambda: timed(same_kex, env, work),
                                               capture)
        print(f"the same, the floor with capture's key exchange ({KEX_FIRST.split(',')[0][1:]}"
              f"): {floor_kex:.3f} s against {one_kex:.3f} s: {ratio_kex:.2f}x")
        ledger.record(__file__, "capture / ssh-floor (curve25519)", ratio_kex, "x",
                      f"the floor with capture's key exchange {floor_kex:.3f} s")
        print(f"the agent on the host: {agent_costs(work / 'store', labels)}")
        print(f"CPU on this side, per run: capture {cpu_ms(sys.executable):.0f} ms, "
              f"ssh {cpu_ms('ssh'):.0f} ms (medians; robust where the wall times are noisy)")
        report_ansible(work, env, host, capture, repeat)
        if args.fleet:
            report_fleet(work, env, daemon.addresses, ssh_config, daemon.host_home, one,
                         max(3, repeat // 2))
    finally:
        daemon.stop()
        shutil.rmtree(work, ignore_errors=True)


def report_fleet(work: Path, env: dict[str, str], addresses: list[str], ssh_config: str,
                 host_home: Path, one: float, repeat: int) -> None:
    inventory = work / "fleet.yml"
    write_inventory(inventory, addresses)
    fleet = median_of(repeat, lambda i: envsnap(
        "all", "--inventory", str(inventory), "--label", "fleet", "--forks",
        str(len(addresses))), env, work)
    count = len(addresses)
    print(f"envsnap capture, {count} hosts (forks {count}): {fleet:.3f} s")
    print(f"ratio fleet{count} / one:                  {fleet / one:.2f}x  (target <= 3.0)")
    ledger.record(__file__, f"fleet{count} / one", fleet / one, "x",
                  f"one host {one:.3f} s", "<= 3.0")
    floor_fleet = median_of(repeat, lambda i: None, env, work,
                            runner=lambda _argv: parallel_ssh_agent(addresses, env, ssh_config,
                                                                    host_home))
    print(f"{count} concurrent OpenSSH runs of the agent:  {floor_fleet:.3f} s")
    print(f"ratio fleet{count} / openssh{count}:            {fleet / floor_fleet:.2f}x")
    ledger.record(__file__, f"fleet{count} / openssh{count}", fleet / floor_fleet, "x",
                  f"{count} concurrent OpenSSH runs of the agent {floor_fleet:.3f} s")


def report_ansible(work: Path, env: dict[str, str], host: str, capture: Callable[[], float],
                   repeat: int) -> None:
    beside = Path(sys.executable).parent / "ansible"   # a venv's, not on PATH
    ansible_bin = shutil.which("ansible") or (str(beside) if beside.exists() else None)
    if ansible_bin is None:
        print("ansible not installed (pip install ansible-core): ansible ratio not measured")
        return
    inventory = work / "ansible.ini"
    inventory.write_text(f"{host} ansible_python_interpreter=/usr/bin/python3\n")
    argv = [ansible_bin, "all", "-i", str(inventory), "-m", "setup"]
    ansible_env = {**env, "ANSIBLE_SSH_ARGS": f"-F {work / 'home' / '.ssh' / 'config'}"}
    one, ansible, ratio = paired(repeat, capture, lambda: timed(argv, ansible_env, work))
    print(f"ansible -m setup, one host:             {ansible:.3f} s  (capture {one:.3f} s)")
    print(f"ratio ansible / capture:                 {ratio:.2f}x  (median of {repeat} "
          "pairs; target >= 6.0)")
    ledger.record(__file__, "ansible / capture", ratio, "x",
                  f"envsnap capture {one:.3f} s (ansible -m setup {ansible:.3f} s)", ">= 6.0")


if __name__ == "__main__":
    os.environ.pop("SSH_AUTH_SOCK", None)
    main()
