"""Diff speed against baselines measured in the same run, on two large synthetic snapshots.

The two documents: 2,000 packages, 8 GPUs, 8 workers, 100 reflog entries, 200 history
commits, a 1 MB uncommitted patch, and exactly 10 real differences (a 3-commit pull, the
patch, a worker's NCCL_PROTO, NCCL_ALGO, torch, a package removed, one added, a GPU's PCIe
width, a GPU's power limit, sitecustomize), plus the noise a naive diff reports: shifted
history and reflog lists, new worker pids, moved volatile readings.

Prints (only ratios from one run mean anything on a noisy machine):
  deepdiff / envsnap   DeepDiff(a, b, ignore_order=True) vs envsnap's diff()     target >= 20
  cli / yaml-load      `envsnap diff a.yaml b.yaml` vs python loading both files   target <= 1.3
and checks that envsnap reports exactly the 10 differences.

Usage: python3 bench/bench_diff.py [--repeat 5]
"""
from __future__ import annotations

import argparse
import copy
import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import ledger

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from envsnap.diff.compare import diff  # noqa: E402
from envsnap.snapshot.document import SCHEMA, section_digest  # noqa: E402
from envsnap.snapshot.store import dump_yaml  # noqa: E402

REPO = "/root/sglang"
PYNCCL = "python/sglang/srt/distributed/device_communicators/pynccl.py"
EXPECTED = 10


def sha(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


# ---- the synthetic documents --------------------------------------------------------------

def gpu(index: int) -> dict[str, Any]:
    return {"index": index, "name": "NVIDIA H200", "uuid": f"GPU-{index:08d}",
            "architecture": "Hopper", "persistence_mode": "Enabled",
            "ecc_mode_current": "Enabled", "mig_mode_current": "Disabled",
            "pcie_gen_current": 5, "pcie_gen_max": 5, "pcie_width_current": 16,
            "pcie_width_max": 16, "power_limit_w": 700.0, "memory_total_mib": 143771,
            "clock_max_sm_mhz": 1980, "clock_event_reasons_supported": ["gpu_idle"],
            **{f"field_{k}": k for k in range(30)}}


def history(count: int, start: int) -> list[dict[str, Any]]:
    commits = []
    for n in range(start, start - count, -1):
        files = [f"python/sglang/srt/module_{n % 50}.py", f"docs/page_{n}.md"]
        commits.append({"sha": sha(f"c{n}"), "parents": [sha(f"c{n - 1}")],
                        "time": 1_700_000_000 + n, "author": "Dev", "subject": f"Change {n}",
                        "files": files})
    return commits


def reflog(count: int, start: int) -> list[dict[str, Any]]:
    return [{"selector": f"HEAD@{{{i}}}", "old": sha(f"c{n - 1}"), "new": sha(f"c{n}"),
             "time": 1_700_000_000 + n, "tz": "+0000", "message": f"commit: Change {n}"}
            for i, n in enumerate(range(start, start - count, -1))]


def patch_text() -> str:
    hunk = "".join(f"+    line {i} of a local tweak to the MLA kernel wrapper\n" for i in range(40))
    parts = [f"diff --git a/python/f{i}.py b/python/f{i}.py\n--- a/python/f{i}.py\n"
             f"+++ b/python/f{i}.py\n@@ -1,0 +1,40 @@\n{hunk}" for i in range(420)]
    return "".join(parts)[:1 << 20]


def blob(text: str) -> dict[str, Any]:
    return {"bytes": len(text), "sha256": hashlib.sha256(text.encode()).hexdigest(),
            "truncated": False, "text": text}


def worker(pid: int, rank: int) -> dict[str, Any]:
    return {"cmdline": ["/root/ml-env/bin/python3", "-m", "sglang.launch_server", "--tp", "8"],
            "exe": "/usr/bin/python3.12", "cwd": "/root", "ppid": 1000, "matched": "child of 1000",
            "start_since_boot_s": 100.0 + rank, "start_epoch": 1_700_000_100.0 + rank,
            "env": {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "CUDA_VISIBLE_DEVICES": str(rank)},
            "limits": {"nofile": {"soft": 1048576, "hard": 1048576}}}


def facts() -> dict[str, Any]:
    packages = {f"pkg-{i:04d}": f"1.{i % 7}.{i % 13}" for i in range(1999)}
    packages["torch"] = "2.10.0+cu128"
    buses = [f"00000000:{0x19 + 0x10 * i:02X}:00.0" for i in range(8)]
    return {
        "system": {"hostname": "gpu-node-01", "boot_id": "b-1", "kernel": {"release": "6.8.0"},
                   "cmdline": "quiet iommu=pt", "cpu": {"logical_cpus": 192}},
        "nvidia": {"present": True, "driver": "590.48.01", "cuda_driver": "13.1",
                   "kernel_module": {"version": "590.48.01", "gcc": "12.2.0",
                                     "params": {f"P{i}": str(i) for i in range(40)}},
                   "gpus": {bus: gpu(i) for i, bus in enumerate(buses)},
                   "topology": {a: {b: "SYS" for b in buses if b != a} for a in buses}},
        "cuda_nccl": {"cuda_toolkit": {"version": "13.1"}, "torch": {"version": "2.10.0+cu128"},
                      "nccl": {"torch": {"version": "2.27.5"}, "wheels": {}, "libraries": {}}},
        "python_env": {"packages": packages, "editable": {"sglang": REPO},
                       "customize": {"sitecustomize": dict(
                           path="/root/ml-env/lib/python3.12/site-packages/sitecustomize.py",
                           **blob_content("import os\nos.environ.setdefault('NCCL_PROTO', 'LL')\n"
                                          ))}},
        "env": {"shell": {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "NCCL_P2P_LEVEL": "SYS",
                          "PATH": "/usr/bin"},
                "processes": {str(4000 + i): worker(4000 + i, i) for i in range(8)},
                "processes_omitted": 0, "proc_patterns": ["sglang"]},
        "git": {"git": {"version": "2.43.0"}, "repos": {REPO: {
            "head": sha("c200"), "branch": "main", "upstream": None, "ahead": None,
            "behind": None, "detached": False, "shallow": False, "remotes": {},
            "history": history(200, 200), "history_limit": 200, "history_complete": False,
            "reflog": reflog(100, 200), "reflog_truncated": True, "stashes": {},
            "uncommitted": {"dirty": True, "tracked": {"python/f1.py": ".M"},
                            "patch": blob(patch_text()), "untracked": {}, "untracked_count": 0,
                            "digest": "d1"}}}},
    }


def blob_content(text: str) -> dict[str, Any]:
    return {"content": text, "sha256": hashlib.sha256(text.encode()).hexdigest(),
            "size": len(text), "imported": True}


def volatile(shift: int) -> dict[str, Any]:
    return {"system": {"uptime_seconds": 5000.0 + shift},
            "nvidia": {"gpus": {f"gpu{i}": {"clock_sm_mhz": 1900 + shift, "temperature_c": 40 + i}
                                for i in range(8)}}}


def document(label: str, facts_: dict[str, Any], shift: int) -> dict[str, Any]:
    return {"schema": SCHEMA,
            "meta": {"label": label, "host": "gpu-node-01", "captured_at": f"2026-01-0{1 + shift}",
                     "collectors": {name: {"error": None, "seconds": 0.1} for name in facts_}},
            "facts": facts_, "volatile": volatile(shift),
            "digests": {name: section_digest(value) for name, value in facts_.items()}}


def pull(repo: dict[str, Any]) -> None:
    """Three commits pulled, the second touching pynccl.py: history and reflog shift."""
    new = history(3, 203)
    new[1]["files"] = [PYNCCL]
    repo["history"] = new + repo["history"][:197]
    repo["reflog"] = [{"selector": "HEAD@{0}", "old": sha("c200"), "new": sha("c203"),
                       "time": 1_700_000_203, "tz": "+0000",
                       "message": "pull origin main: Fast-forward"}] + repo["reflog"][:99]
    repo["head"] = sha("c203")


def the_pair() -> tuple[dict[str, Any], dict[str, Any]]:
    before = facts()
    after = copy.deepcopy(before)
    repo = after["git"]["repos"][REPO]
    pull(repo)                                                                   # 1
    text = repo["uncommitted"]["patch"]["text"]
    repo["uncommitted"]["patch"] = blob(text[:500_000] + "X" + text[500_001:])   # 2
    repo["uncommitted"]["digest"] = "d2"
    workers = after["env"]["processes"]
    after["env"]["processes"] = {str(int(pid) + 5000): dict(w, ppid=6000)
                                 for pid, w in workers.items()}  # restart: every pid new
    del after["env"]["processes"]["9003"]["env"]["NCCL_PROTO"]                   # 3
    after["env"]["shell"]["NCCL_ALGO"] = "Tree"                                  # 4
    packages = after["python_env"]["packages"]
    packages["torch"] = "2.11.0+cu130"                                           # 5
    del packages["pkg-1000"]                                                     # 6
    packages["new-pkg"] = "0.1.0"                                                # 7
    gpus = after["nvidia"]["gpus"]
    list(gpus.values())[3]["pcie_width_current"] = 8                             # 8
    list(gpus.values())[5]["power_limit_w"] = 500.0                              # 9
    after["python_env"]["customize"]["sitecustomize"].update(                    # 10
        blob_content("import os\n"))
    return document("good", before, 0), document("bad", after, 1)


# ---- timing --------------------------------------------------------------------------------

def best(repeat: int, work: Callable[[], Any]) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def cli_env(pycache: str) -> dict[str, str]:
    """The environment of a timed interpreter: the checkout's envsnap, with bytecode cached
    in `pycache` as an installed envsnap has it (pip compiles at install time). Without it,
    PYTHONDONTWRITEBYTECODE (set on some machines) makes every start compile every module,
    and start-up measures the compiler."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONPYCACHEPREFIX=pycache)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def run_quiet(argv: list[str], env: dict[str, str], ok: tuple[int, ...]) -> float:
    started = time.perf_counter()
    result = subprocess.run(argv, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if result.returncode not in ok:
        raise SystemExit(f"failed ({result.returncode}): {' '.join(argv)}\n{result.stderr[-800:]}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    try:  # the baseline, not a dependency of envsnap: the `bench` extra installs it
        from deepdiff import DeepDiff
    except ImportError:
        raise SystemExit("bench_diff.py measures envsnap against DeepDiff, which is not "
                         "installed: pip install -e '.[bench]'") from None
    a, b = the_pair()
    report = diff(a, b)
    for finding in report.findings:
        print(f"  {finding.rank:>3} {finding.section:<10} {finding.why[:100]}")
    print(f"envsnap reports {len(report.findings)} differences (expected {EXPECTED})")

    deep = DeepDiff(a, b, ignore_order=True)
    deep_s = best(min(3, args.repeat), lambda: DeepDiff(a, b, ignore_order=True))
    ours_s = best(args.repeat, lambda: diff(a, b))
    kinds = ", ".join(f"{len(v)} {k}" for k, v in sorted(deep.items()))
    print(f"deepdiff(ignore_order)   {deep_s * 1000:9.1f} ms  ({kinds})")
    print(f"envsnap diff()           {ours_s * 1000:9.1f} ms")
    print(f"deepdiff / envsnap       {deep_s / ours_s:9.1f} x   (target >= 20)")
    ledger.record(__file__, "deepdiff / envsnap", deep_s / ours_s, "x",
                  f"DeepDiff(ignore_order) {deep_s * 1000:.1f} ms", ">= 20")

    with tempfile.TemporaryDirectory() as folder:
        paths = [str(Path(folder) / name) for name in ("good.yaml", "bad.yaml")]
        for path, doc in zip(paths, (a, b)):
            Path(path).write_text(dump_yaml(doc), encoding="utf-8")
        env = cli_env(folder)
        load = ("import sys, yaml\nfor p in sys.argv[1:]:\n"
                "    yaml.load(open(p, encoding='utf-8').read(), Loader=yaml.CSafeLoader)")
        cli = [sys.executable, "-m", "envsnap", "diff", *paths]
        base = [sys.executable, "-c", load, *paths]
        run_quiet(cli, env, (1,))  # warm the page cache for both
        cli_s = best(args.repeat, lambda: run_quiet(cli, env, (1,)))
        base_s = best(args.repeat, lambda: run_quiet(base, env, (0,)))
        size = sum(Path(p).stat().st_size for p in paths)
    print(f"python + yaml load both  {base_s * 1000:9.1f} ms  ({size / 1e6:.1f} MB of YAML)")
    print(f"envsnap diff (CLI)       {cli_s * 1000:9.1f} ms")
    print(f"cli / yaml-load          {cli_s / base_s:9.2f} x   (target <= 1.3)")
    ledger.record(__file__, "cli / yaml-load", cli_s / base_s, "x",
                  f"python + yaml load {base_s * 1000:.0f} ms (envsnap diff "
                  f"{cli_s * 1000:.0f} ms)", "<= 1.3")
    return 0 if len(report.findings) == EXPECTED else 1


if __name__ == "__main__":
    sys.exit(main())
