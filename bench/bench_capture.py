"""Capture speed against baselines measured in the same run, on a real sshd on loopback.

Prints ratios (the machines are noisy; only ratios from one run mean anything):
  capture / ssh-floor      envsnap capture of one host vs `ssh host 'python3 -c pass'`
  ansible / capture        `ansible -m setup` against the same sshd vs envsnap capture
  fleet32 / capture        32 hosts (loopback aliases of one sshd) vs one host
  fleet32 / openssh32      the same 32 captures vs 32 concurrent OpenSSH runs of the cached
                           agent: on one 2-core machine every "host" shares the same cores, so
                           this is the part of the fleet time that envsnap itself adds

Usage: python3 bench/bench_capture.py [--repeat 7] [--fleet 32]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from helpers.sshd import start_sshd  # noqa: E402


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    started = time.perf_counter()
    result = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--fleet", type=int, default=32)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="envsnap-bench-"))
    daemon = start_sshd(work / "sshd", aliases=args.fleet)
    try:
        env = daemon.write_home(work / "home")
        env["ENVSNAP_STORE"] = str(work / "store")
        env["ANSIBLE_HOST_KEY_CHECKING"] = "True"
        host = daemon.addresses[0]
        ssh_config = str(work / "home" / ".ssh" / "config")
        timed(envsnap(host, "--label", "warm"), env, work)  # ships the agent once
        floor = median_of(args.repeat, lambda i: ["ssh", "-F", ssh_config, host,
                                                  "python3 -c pass"], env, work)
        one = median_of(args.repeat, lambda i: envsnap(host, "--label", "one"), env, work)
        print(f"ssh floor (ssh host 'python3 -c pass'): {floor:.3f} s")
        print(f"envsnap capture, one host:              {one:.3f} s")
        print(f"ratio capture / ssh-floor:               {one / floor:.2f}x  (target <= 2.0)")
        report_ansible(work, env, host, one, args.repeat)
        inventory = work / "fleet.yml"
        write_inventory(inventory, daemon.addresses)
        fleet = median_of(max(3, args.repeat // 2), lambda i: envsnap(
            "all", "--inventory", str(inventory), "--label", "fleet", "--forks",
            str(args.fleet)), env, work)
        print(f"envsnap capture, {args.fleet} hosts (forks {args.fleet}): {fleet:.3f} s")
        ratio = fleet / one
        print(f"ratio fleet{args.fleet} / one:                  {ratio:.2f}x  (target <= 3.0)")
        floor32 = median_of(max(3, args.repeat // 2), lambda i: None, env, work,
                            runner=lambda _argv: parallel_ssh_agent(daemon.addresses, env,
                                                                    ssh_config,
                                                                    daemon.host_home))
        print(f"{args.fleet} concurrent OpenSSH runs of the agent:  {floor32:.3f} s")
        print(f"ratio fleet{args.fleet} / openssh{args.fleet}:            {fleet / floor32:.2f}x")
    finally:
        daemon.stop()
        shutil.rmtree(work, ignore_errors=True)


def report_ansible(work: Path, env: dict[str, str], host: str, one: float, repeat: int) -> None:
    if not shutil.which("ansible"):
        print("ansible not installed (pip install ansible-core): ansible ratio not measured")
        return
    inventory = work / "ansible.ini"
    inventory.write_text(f"{host} ansible_python_interpreter=/usr/bin/python3\n")
    argv = ["ansible", "all", "-i", str(inventory), "-m", "setup"]
    ansible_env = {**env, "ANSIBLE_SSH_ARGS": f"-F {work / 'home' / '.ssh' / 'config'}"}
    ansible = median_of(repeat, lambda i: argv, ansible_env, work)
    print(f"ansible -m setup, one host:             {ansible:.3f} s")
    print(f"ratio ansible / capture:                 {ansible / one:.2f}x  (target >= 3.0)")


if __name__ == "__main__":
    os.environ.pop("SSH_AUTH_SOCK", None)
    main()
