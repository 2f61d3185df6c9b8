"""The Ansible path (collection envsnap.gpu) against `ansible -m setup`, on the same hosts, in
one run: N loopback aliases of one real sshd (tests/helpers/sshd.py) are N hosts.

Both are ad-hoc `ansible` runs with the same inventory, forks and SSH settings, so Ansible's
own start-up and connection costs are on both sides; what differs is the module (envsnap's
agent and the controller storing N snapshots, against Ansible's fact gathering). Prints the
medians and the wall-time ratio; envsnap's own `capture --forks N` of the same hosts is printed
beside, for reference.

Usage: python3 bench/bench_ansible.py [--hosts 32] [--repeat 3]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

import ledger

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from bench_capture import timed  # noqa: E402  (beside this script)
from helpers.sshd import start_sshd  # noqa: E402

BIN = Path(sys.executable).parent   # ansible and ansible-playbook beside this python


def median_time(argv: list[str], env: dict[str, str], cwd: Path, repeat: int) -> float:
    timed(argv, env, cwd)   # warm: ControlPersist masters, the agent cached, bytecode
    return statistics.median(timed(argv, env, cwd) for _ in range(repeat))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hosts", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if not (BIN / "ansible").exists():
        raise SystemExit(f"no ansible beside {sys.executable}: pip install ansible-core")
    work = Path(tempfile.mkdtemp(prefix="envsnap-bench-ansible-"))
    daemon = start_sshd(work / "sshd", aliases=args.hosts)
    try:
        env = daemon.write_home(work / "home")
        python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
        inventory = work / "inv.ini"
        inventory.write_text("[gpu]\n" + "".join(
            f"h{n} ansible_host={address} ansible_port={daemon.port} ansible_user=root "
            f"ansible_python_interpreter={python}\n"
            for n, address in enumerate(daemon.addresses)))
        env.update(PYTHONPATH=str(ROOT), ENVSNAP_STORE=str(work / "store"),
                   PATH=f"{BIN}:{env.get('PATH', '/usr/bin:/bin')}",
                   ANSIBLE_COLLECTIONS_PATH=str(work / "collections"),
                   ANSIBLE_SSH_COMMON_ARGS=f"-F {work / 'home' / '.ssh' / 'config'}")
        timed([sys.executable, "-m", "envsnap", "ansible", str(work / "collections")], env,
              work)
        ansible = [str(BIN / "ansible"), "gpu", "-i", str(inventory), "-f", str(args.hosts)]
        setup = median_time([*ansible, "-m", "setup"], env, work, args.repeat)
        collection = median_time([*ansible, "-m", "envsnap.gpu.envsnap_capture",
                                  "-a", "label=fleet force=true"], env, work, args.repeat)
        own = median_time([sys.executable, "-m", "envsnap", "capture", "gpu", "--inventory",
                           str(inventory), "--label", "own", "--force", "--forks",
                           str(args.hosts)], env, work, args.repeat)
        stored = len(list((work / "store" / "fleet").glob("*.yaml")))
        print(f"{args.hosts} loopback hosts, forks {args.hosts}, median of {args.repeat} "
              f"(after one warm run each); {stored} snapshots stored by the collection")
        print(f"ansible -m setup:                         {setup:.2f} s")
        print(f"ansible -m envsnap.gpu.envsnap_capture:   {collection:.2f} s")
        print(f"envsnap capture --forks {args.hosts} (reference):   {own:.2f} s")
        print(f"ratio envsnap_capture / setup:            {collection / setup:.2f}x")
        print(f"ratio envsnap_capture / envsnap --forks:  {collection / own:.2f}x")
        ledger.record(__file__, "envsnap_capture / ansible setup", collection / setup, "x",
                      f"ansible -m setup, {args.hosts} hosts {setup:.2f} s")
        ledger.record(__file__, "envsnap_capture / envsnap --forks", collection / own, "x",
                      f"envsnap capture --forks {args.hosts} {own:.2f} s")
    finally:
        daemon.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    os.environ.pop("SSH_AUTH_SOCK", None)
    main()
