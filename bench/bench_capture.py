"""Capture speed against baselines measured in the same run, on a real sshd on loopback.

Prints ratios (the machines are noisy; only ratios from one run mean anything). The two of
one host are paired: each pair runs both commands back to back (in alternating order), and
the ratio printed is the median of the pairs' ratios, over --repeat pairs (at least 10).
Capture and its floor always use the same key exchange, the one OpenSSH and the SSH config
choose (capture puts none of its own first), and the floor is `ssh` with the options capture
gives it (BatchMode, host-key checking, known_hosts, timeouts, keepalives):
  capture / ssh-floor (same key exchange)   the headline: a capture that reuses the master
                           an earlier run kept (as every capture but the first does) vs
                           `ssh host 'python3 -c pass'`, one OpenSSH connection plus the
                           remote interpreter's start
  first capture / ssh-floor  no master kept (ENVSNAP_SSH_CONTROL_PERSIST=0): the capture
                           makes its handshake, as the floor does, and runs the agent's
                           collectors, which the floor does not
  first capture / ssh running the agent   the same first capture vs OpenSSH sending the
                           remote command the capture sends (its cached agent, its config),
                           with the same exchange and options: the same connection and
                           remote work, so what envsnap adds
  capture / ssh-floor, both over a kept master   the floor through a ControlMaster of its
                           own: what envsnap adds to a command sent over a connection
  --before CHECKOUT        the same capture by another checkout's code (an older envsnap),
                           paired in the same run against the same floors
  ansible / capture        `ansible -m setup` against the same sshd vs envsnap capture
  the agent's own cost     meta.agent.startup_seconds and masking_seconds of those captures
  CPU on this side         user+sys CPU of the envsnap process and of the ssh client, each
                           run's median: steadier than wall time on a loaded machine
Fleet (--fleet N, 0 for none):
  fleet32 / first capture  32 hosts (loopback aliases of one sshd, each a new connection)
                           vs one host's first capture (no master kept)
  fleet32 / openssh32      the same 32 captures vs 32 concurrent OpenSSH runs of the cached
                           agent: on one 2-core machine every "host" shares the same cores, so
                           this is the part of the fleet time that envsnap itself adds

Bytecode is cached on both sides, as an installed envsnap runs: envsnap is compiled before
the first run and PYTHONDONTWRITEBYTECODE is dropped (the host's python caches the agent's
own in its folder).

Usage: python3 bench/bench_capture.py [--repeat 10] [--fleet 32] [--before /path/to/checkout]
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
from pairing import paired

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))
from helpers.sshd import start_sshd  # noqa: E402

from envsnap.hosts import payload  # noqa: E402
from envsnap.hosts.agentconfig import CaptureOptions, agent_config  # noqa: E402
from envsnap.hosts.inventory import Host  # noqa: E402
from envsnap.hosts.openssh import OpenSSHTransport, stop_master  # noqa: E402

# The exchange the code before this change put first (a like-for-like floor for it).
CURVE25519_FIRST = "^curve25519-sha256,curve25519-sha256@libssh.org"

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


def capture_command(address: str) -> str:
    """The remote command a capture of this host sends: the cached agent, with the config
    the capture gives it (hosts/payload.py, from the code under test)."""
    host = Host(name=address, address=address)
    return payload.run_command(host.python, payload.agent_digest(),
                               agent_config(host, CaptureOptions(label="bench")))


def parallel_ssh_agent(addresses: list[str], env: dict[str, str], ssh_config: str) -> float:
    """The same remote work as a fleet capture (each host's own capture command, its
    config included), with OpenSSH and no envsnap in between."""
    started = time.perf_counter()
    procs = [subprocess.Popen(["ssh", "-F", ssh_config, address, capture_command(address)],
                              env=env, stdout=subprocess.DEVNULL) for address in addresses]
    if any(proc.wait() for proc in procs):
        raise SystemExit("an OpenSSH run of the agent failed")
    return time.perf_counter() - started


def envsnap(*args: str) -> list[str]:
    return [sys.executable, "-m", "envsnap", "capture", *args, "--force"]


def write_inventory(path: Path, addresses: list[str]) -> None:
    lines = ["all:", "  hosts:"]
    lines += [f"    h{n}: {{ansible_host: {address}}}" for n, address in enumerate(addresses)]
    path.write_text("\n".join(lines) + "\n")


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


def floor_options(host: str) -> list[str]:
    """The options capture's own ssh is given (from the code under test), for the floor."""
    return list(OpenSSHTransport(Host(name=host, address=host), "ssh").options())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--fleet", type=int, default=32)
    parser.add_argument("--before", type=Path, default=None,
                        help="another checkout whose capture is measured in the same run")
    args = parser.parse_args()
    repeat = max(10, args.repeat)
    compileall.compile_dir(str(ROOT / "envsnap"), quiet=1)
    if args.before:
        compileall.compile_dir(str(args.before / "envsnap"), quiet=1)
    work = Path(tempfile.mkdtemp(prefix="envsnap-bench-"))
    daemon = start_sshd(work / "sshd", aliases=max(1, args.fleet))
    runtime = work / "run"   # the kept masters' folder: short, ended with the run
    runtime.mkdir(mode=0o700)
    try:
        env = daemon.write_home(work / "home")
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env.update(ENVSNAP_STORE=str(work / "store"), ANSIBLE_HOST_KEY_CHECKING="True",
                   PYTHONPATH=str(ROOT), XDG_RUNTIME_DIR=str(runtime))
        os.environ.update(HOME=env["HOME"], XDG_RUNTIME_DIR=str(runtime))
        host = daemon.addresses[0]
        ssh_config = str(work / "home" / ".ssh" / "config")
        timed(envsnap(host, "--label", "warm"), env, work)  # ships the agent once
        labels: list[str] = []

        def capture_with(environment: dict[str, str]) -> Callable[[], float]:
            def capture() -> float:
                labels.append(f"one-{len(labels)}")
                return timed(envsnap(host, "--label", labels[-1]), environment, work)
            return capture

        capture = capture_with(env)
        first = capture_with({**env, "ENVSNAP_SSH_CONTROL_PERSIST": "0"})
        options = floor_options(host)
        floor_argv = ["ssh", "-F", ssh_config, *options, host, "python3 -c pass"]

        def floor() -> float:
            return timed(floor_argv, env, work)

        print(f"the key exchange of both: {negotiated_kex(floor_argv, env)} (OpenSSH's and the "
              "SSH config's own)")
        base, one, ratio = paired(repeat, floor, capture)
        print(f"ssh floor (ssh host 'python3 -c pass'): {base:.3f} s  (median of {repeat})")
        print(f"envsnap capture, one host (master kept): {one:.3f} s")
        print(f"ratio capture / ssh-floor (same key exchange): {ratio:.2f}x  (median of "
              f"{repeat} pairs; target <= 1.25)")
        ledger.record(__file__, "capture / ssh-floor (same key exchange)", ratio, "x",
                      f"ssh floor {base:.3f} s (capture, master kept, {one:.3f} s)", "<= 1.25")
        base_first, one_first, ratio_first = paired(repeat, floor, first)
        print(f"first capture (no master kept) / ssh-floor: {ratio_first:.2f}x  ({one_first:.3f}"
              f" s against {base_first:.3f} s)")
        ledger.record(__file__, "first capture / ssh-floor (same key exchange)", ratio_first,
                      "x", f"ssh floor {base_first:.3f} s (capture {one_first:.3f} s)")
        agent_argv = ["ssh", "-F", ssh_config, *options, host, capture_command(host)]
        base_agent, one_agent, ratio_agent = paired(
            repeat, lambda: timed(agent_argv, env, work), first)
        print(f"first capture / OpenSSH running the agent: {ratio_agent:.2f}x  ({one_agent:.3f}"
              f" s against {base_agent:.3f} s: the same connection and remote work, without "
              "envsnap; target <= 1.25)")
        ledger.record(__file__, "first capture / ssh running the agent (same key exchange)",
                      ratio_agent, "x", f"ssh sending the capture's command {base_agent:.3f} s "
                      f"(capture, no master kept, {one_agent:.3f} s)", "<= 1.25")
        kept = str(runtime / "floor")
        muxed = ["ssh", "-F", ssh_config, *options, "-o", "ControlMaster=auto", "-o",
                 f"ControlPath={kept}", "-o", "ControlPersist=300", host, "python3 -c pass"]
        timed(muxed, env, work)   # its master, kept
        base_mux, one_mux, ratio_mux = paired(repeat, lambda: timed(muxed, env, work), capture)
        stop_master(kept)
        print(f"capture / ssh-floor, both over a kept master: {ratio_mux:.2f}x  ({one_mux:.3f} s"
              f" against {base_mux:.3f} s: envsnap's own cost on a made connection)")
        ledger.record(__file__, "capture / ssh-floor, both over a kept master", ratio_mux, "x",
                      f"ssh over its own kept master {base_mux:.3f} s (capture {one_mux:.3f} s)")
        if args.before:
            report_before(args.before, env, work, host, floor, floor_argv, repeat)
        print(f"the agent on the host: {agent_costs(work / 'store', labels)}")
        print(f"CPU on this side, per run: capture {cpu_ms(sys.executable):.0f} ms, "
              f"ssh {cpu_ms('ssh'):.0f} ms (medians; robust where the wall times are noisy)")
        report_ansible(work, env, host, capture, repeat)
        if args.fleet:
            # a fleet's hosts are new connections: against a first capture, no master kept
            report_fleet(work, env, daemon.addresses, ssh_config, one_first, max(3, repeat // 2))
    finally:
        for socket in (runtime / "envsnap").glob("*"):
            stop_master(str(socket))
        daemon.stop()
        shutil.rmtree(work, ignore_errors=True)


def negotiated_kex(argv: list[str], env: dict[str, str]) -> str:
    """The key exchange `ssh -v` says it chose for this command line."""
    said = subprocess.run([argv[0], "-v", *argv[1:]], env=env, capture_output=True,
                          text=True).stderr
    for line in said.splitlines():
        if "kex: algorithm:" in line:
            return line.split("kex: algorithm:")[1].strip()
    return "unknown"


def report_before(before: Path, env: dict[str, str], work: Path, host: str,
                  floor: Callable[[], float], floor_argv: list[str], repeat: int) -> None:
    """The other checkout's capture, paired against the same floor, and against the floor
    with the key exchange that code put first (its like-for-like)."""
    before_env = {**env, "PYTHONPATH": str(before)}
    what = f"{before.name} {ledger_commit(before)}"
    timed(envsnap(host, "--label", "before"), before_env, work)   # ships its agent once

    def capture() -> float:
        return timed(envsnap(host, "--label", "before"), before_env, work)

    base, one, ratio = paired(repeat, floor, capture)
    print(f"before ({what}): capture {one:.3f} s / ssh-floor {base:.3f} s: {ratio:.2f}x  "
          "(its capture put curve25519 first; the floor did not)")
    ledger.record(__file__, "before: capture / ssh-floor (default exchange)", ratio, "x",
                  f"{what}; ssh floor {base:.3f} s (capture {one:.3f} s)")
    curve = [*floor_argv[:3], "-o", f"KexAlgorithms={CURVE25519_FIRST}", *floor_argv[3:]]
    base_kex, one_kex, ratio_kex = paired(repeat, lambda: timed(curve, env, work), capture)
    print(f"before ({what}): capture / ssh-floor, both curve25519: {ratio_kex:.2f}x  "
          f"({one_kex:.3f} s against {base_kex:.3f} s)")
    ledger.record(__file__, "before: capture / ssh-floor (same key exchange)", ratio_kex, "x",
                  f"{what}; the floor with its curve25519 {base_kex:.3f} s")


def ledger_commit(checkout: Path) -> str:
    """The other checkout's commit, as the ledger reads one (from the .git files)."""
    try:
        return ledger.commit(checkout)[:7]
    except (OSError, ValueError, IndexError):
        return "(commit unknown)"


def report_fleet(work: Path, env: dict[str, str], addresses: list[str], ssh_config: str,
                 one: float, repeat: int) -> None:
    inventory = work / "fleet.yml"
    write_inventory(inventory, addresses)
    fleet = median_of(repeat, lambda i: envsnap(
        "all", "--inventory", str(inventory), "--label", "fleet", "--forks",
        str(len(addresses))), env, work)
    count = len(addresses)
    print(f"envsnap capture, {count} hosts (forks {count}): {fleet:.3f} s")
    print(f"ratio fleet{count} / first capture:        {fleet / one:.2f}x  (target <= 3.0)")
    ledger.record(__file__, f"fleet{count} / first capture of one host", fleet / one, "x",
                  f"one host, no master kept, {one:.3f} s", "<= 3.0")
    floor_fleet = median_of(repeat, lambda i: None, env, work,
                            runner=lambda _argv: parallel_ssh_agent(addresses, env, ssh_config))
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
