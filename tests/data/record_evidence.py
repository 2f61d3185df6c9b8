"""Record a GPU host's own evidence of change, and the reports people paste about it.

Run on a real GPU host from the repository root:  python3 tests/data/record_evidence.py OUT_DIR
It writes OUT_DIR/h200-evidence/ (copy it to tests/data/h200-evidence/):

- what a timeline reads without any earlier snapshot: boot time (/proc/stat, /proc/uptime),
  the NVIDIA kernel module (/proc/driver/nvidia/version, /sys/module/nvidia and its times),
  kernel messages (dmesg, journalctl -k) where the host lets them be read, the package logs
  (dpkg, apt) and the install times of the interpreter's packages (.dist-info mtimes);
- the texts bug reports carry: `pip list` (columns, json), `pip freeze`, `pip inspect`,
  nvidia-smi's table, `-q`, `-q -x` and `topo -m`, torch's `collect_env`;
- the agent's whole output of the same minute, to compare imported facts with;
- paired timings: the agent against `python -m torch.utils.collect_env`, alternating.

Every command's exit code, seconds and stderr tail go to commands.json: a source the host
does not let us read is recorded as such, never dropped.
"""
from __future__ import annotations

import base64
import glob
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

COMMANDS: list[tuple[str, list[str]]] = [
    ("proc_stat_btime.txt", ["sh", "-c", "grep ^btime /proc/stat"]),
    ("proc_uptime.txt", ["cat", "/proc/uptime"]),
    ("date_utc.txt", ["date", "-u", "+%Y-%m-%dT%H:%M:%S%z"]),
    ("uname.txt", ["uname", "-a"]),
    ("os_release.txt", ["cat", "/etc/os-release"]),
    ("proc_driver_nvidia_version.txt", ["cat", "/proc/driver/nvidia/version"]),
    ("sys_module_nvidia.txt", ["sh", "-c", "for f in /sys/module/nvidia/version "
                               "/sys/module/nvidia/initstate /sys/module/nvidia/refcnt "
                               "/sys/module/nvidia/srcversion; do echo \"$f: $(cat $f)\"; done"]),
    ("sys_module_times.txt", ["sh", "-c", "stat -c '%n %W %X %Y %Z' /sys/module/nvidia "
                              "/sys/module/nvidia/* /proc/driver/nvidia /dev/nvidia*"]),
    ("lsmod.txt", ["sh", "-c", "lsmod || cat /proc/modules"]),
    ("dmesg.txt", ["dmesg"]),
    ("dmesg_iso.txt", ["dmesg", "--time-format", "iso"]),
    ("journalctl_k.txt", ["journalctl", "-k", "-o", "short-iso-precise", "--no-pager", "-n",
                          "2000"]),
    ("journalctl_boots.txt", ["journalctl", "--list-boots", "--no-pager"]),
    ("dpkg_log.txt", ["sh", "-c", "tail -n 400 /var/log/dpkg.log"]),
    ("apt_history.txt", ["sh", "-c", "tail -n 200 /var/log/apt/history.log"]),
    ("var_log_listing.txt", ["sh", "-c", "ls -la --time-style=full-iso /var/log /var/log/apt"]),
    ("rpm_last.txt", ["sh", "-c", "rpm -qa --last | head -200"]),
    ("nccl_conf.txt", ["sh", "-c", "stat -c '%n %Y' /etc/nccl.conf ~/.nccl.conf "
                       "/etc/environment; cat /etc/nccl.conf /etc/environment"]),
    ("pip_list.txt", [sys.executable, "-m", "pip", "list"]),
    ("pip_list.json", [sys.executable, "-m", "pip", "list", "--format=json"]),
    ("pip_freeze.txt", [sys.executable, "-m", "pip", "freeze"]),
    ("pip_inspect.json", [sys.executable, "-m", "pip", "inspect"]),
    ("smi.txt", ["nvidia-smi"]),
    ("smi_q.txt", ["nvidia-smi", "-q"]),
    ("smi_q.xml", ["nvidia-smi", "-q", "-x"]),
    ("smi_topo_m.txt", ["nvidia-smi", "topo", "-m"]),
    ("ps_lstart.txt", ["ps", "-eo", "pid,lstart,etimes,args"]),
    ("agent.json", [sys.executable, "-m", "envsnap.agent", base64.b64encode(b"{}").decode()]),
    ("torch_version.txt", [sys.executable, "-c", "import torch; print(torch.__version__, "
                           "torch.version.cuda, torch.cuda.nccl.version())"]),
]


def run(argv: list[str], timeout: float = 180) -> dict[str, Any]:
    started = time.monotonic()
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"argv": argv, "rc": None, "out": b"", "err": str(exc), "seconds": None}
    return {"argv": argv, "rc": proc.returncode, "out": proc.stdout,
            "err": proc.stderr.decode("utf-8", "replace")[-2000:],
            "seconds": round(time.monotonic() - started, 3)}


def package_times() -> list[dict[str, Any]]:
    """Every .dist-info of the interpreter with its folder's and RECORD's mtimes."""
    rows = []
    for site in sys.path:
        for info in sorted(glob.glob(os.path.join(site, "*.dist-info"))):
            record = os.path.join(info, "RECORD")
            installer = os.path.join(info, "INSTALLER")
            rows.append({"dist_info": info, "mtime": os.stat(info).st_mtime,
                         "record_mtime": os.stat(record).st_mtime if os.path.exists(record)
                         else None,
                         "installer": open(installer).read().strip()
                         if os.path.exists(installer) else None})
    return rows


def paired_timings(pairs: int) -> dict[str, Any]:
    """The agent and collect_env, alternating, so drift hits both alike."""
    config = base64.b64encode(b"{}").decode()
    agent = [sys.executable, "-m", "envsnap.agent", config]
    collect_env = [sys.executable, "-m", "torch.utils.collect_env"]
    run(agent)  # the first run writes .pyc files, as an installed envsnap has them
    run(collect_env)
    seconds: dict[str, list[float]] = {"agent": [], "collect_env": []}
    for _ in range(pairs):
        for name, argv in (("agent", agent), ("collect_env", collect_env)):
            result = run(argv)
            seconds[name].append(result["seconds"] if result["rc"] == 0 else -1.0)
    ratios = [c / a for a, c in zip(seconds["agent"], seconds["collect_env"]) if a > 0 < c]
    return {"seconds": seconds, "median_ratio_collect_env_over_agent":
            round(statistics.median(ratios), 2) if ratios else None}


def main(out: str) -> None:
    folder = os.path.join(out, "h200-evidence")
    os.makedirs(folder, exist_ok=True)
    log = []
    for name, argv in COMMANDS:
        result = run(argv)
        with open(os.path.join(folder, name), "wb") as handle:
            handle.write(result["out"])
        log.append({k: v for k, v in result.items() if k != "out"} | {"file": name})
    with open(os.path.join(folder, "package_times.json"), "w") as handle:
        json.dump(package_times(), handle, indent=1)
    with open(os.path.join(folder, "timings.json"), "w") as handle:
        json.dump(paired_timings(7), handle, indent=1)
    with open(os.path.join(folder, "commands.json"), "w") as handle:
        json.dump(log, handle, indent=1)


if __name__ == "__main__":
    sys.path.insert(0, os.getcwd())
    main(sys.argv[1])
