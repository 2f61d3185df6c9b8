"""What checking a snapshot against its description costs, against baselines from the same run.

The document: bench_diff.py's large synthetic snapshot grown to about 5 MB of YAML (20,000
packages, 4,000 history commits, 1,000 reflog entries, 64 workers, 8 GPUs, a 1 MB patch, a
benchmark record of 5 runs x 8 GPUs x 10 readings x 1,500 samples).

Prints (only ratios from one run mean anything on a noisy machine):
  validate              envsnap's check of the 5 MB document               target <= 50 ms
  validate / yaml-load  the same against loading its YAML (what every load pays anyway)
  jsonschema / envsnap  jsonschema (Draft 2020-12, docs/snapshot.schema.json) on the same
                        document: the library alternative, measured
  import cost           what `import X` adds to an interpreter that has loaded the store (and
                        yaml): envsnap's schema, jsonschema, pydantic (each would be paid by
                        every `envsnap diff`)
  diff / yaml-load      `envsnap diff a b` vs python loading both files with yaml, on the real
                        H200 snapshots (start-up) and on bench_diff.py's pair (large files)
                                                                            target <= 1.5

Usage: python3 bench/bench_schema.py [--repeat 7]
"""
from __future__ import annotations

import argparse
import copy
import importlib.util
import sys
import tempfile
from pathlib import Path
from typing import Any

import ledger

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from bench_diff import (  # noqa: E402
    best,
    cli_env,
    document,
    facts,
    history,
    reflog,
    run_quiet,
    the_pair,
)

from envsnap.snapshot.document import check_document  # noqa: E402
from envsnap.snapshot.schema import exported  # noqa: E402
from envsnap.snapshot.store import dump_yaml  # noqa: E402
from envsnap.yamlread import SafeLoader as Loader  # noqa: E402

H200_PAIR = [ROOT / "tests" / "data" / "h200x1" / "snapshots" / name
             for name in ("before.yaml", "during.yaml")]


def large_document() -> dict[str, Any]:
    grown = facts()
    grown["python_env"]["packages"] = {f"pkg-{i:05d}": f"1.{i % 7}.{i % 13}"
                                       for i in range(20_000)}
    repo = grown["git"]["repos"]["/root/sglang"]
    repo["history"], repo["reflog"] = history(4000, 4000), reflog(1000, 4000)
    workers = grown["env"]["processes"]
    first = next(iter(workers.values()))
    grown["env"]["processes"] = {str(5000 + i): dict(copy.deepcopy(first), ppid=5000)
                                 for i in range(64)}
    snapshot = document("large", grown, 0)
    snapshot["bench"] = bench_record()
    return snapshot


def bench_record() -> dict[str, Any]:
    readings = ("sm_mhz", "mem_mhz", "power_w", "temp_c", "util_gpu_pct", "util_mem_pct",
                "pcie_rx_kbs", "pcie_tx_kbs", "reasons_mask", "t")
    samples = {f"gpu{g}": {name: [float(i % 97) for i in range(1500)] for name in readings}
               for g in range(8)}
    runs = [{"run": n, "value": 93.0 + n, "exit_code": 0, "seconds": 90.0, "output_tail": "ok",
             "gpus": {}, "samples": samples, "sampler": {"ticks": 1500, "cpu_seconds": 0.2}}
            for n in range(1, 6)]
    return {"values": [94.0, 95.0, 96.0, 97.0, 98.0], "command": "bench.py", "metric": "x",
            "repeat": 5, "runs": runs}


def import_cost(module: str, repeat: int, pycache: str) -> float:
    """Seconds `import module` adds to what loading a snapshot imports anyway (the store and
    yaml), in a fresh interpreter: the median of runs with it minus the median without."""
    env = cli_env(pycache)

    def timed(code: str) -> float:
        return best(repeat, lambda: run_quiet([sys.executable, "-c", code], env, (0,)))
    base = "import envsnap.snapshot.store"
    return timed(f"{base}; import {module}") - timed(base)


def cli_ratio(paths: list[str], repeat: int, pycache: str) -> tuple[float, float]:
    env = cli_env(pycache)
    load = ("import sys, yaml\nfor p in sys.argv[1:]:\n"
            "    yaml.load(open(p, encoding='utf-8').read(), Loader=yaml.CSafeLoader)")
    cli = [sys.executable, "-m", "envsnap", "diff", *paths]
    base = [sys.executable, "-c", load, *paths]
    run_quiet(cli, env, (0, 1))  # the page cache and the bytecode cache warm for both
    run_quiet(base, env, (0,))
    return (best(repeat, lambda: run_quiet(cli, env, (0, 1))),
            best(repeat, lambda: run_quiet(base, env, (0,))))


def compare_jsonschema(loaded: dict[str, Any], ours: float, repeat: int) -> None:
    try:
        import jsonschema  # the library alternative, measured here only
    except ImportError:
        print("jsonschema validate      (not installed)")
        return
    validator = jsonschema.Draft202012Validator(exported())
    theirs = best(min(3, repeat), lambda: list(validator.iter_errors(loaded)))
    print(f"jsonschema validate      {theirs * 1000:9.1f} ms")
    print(f"jsonschema / envsnap     {theirs / ours:9.1f} x")
    ledger.record(__file__, "jsonschema / envsnap", theirs / ours, "x",
                  f"jsonschema Draft 2020-12 {theirs * 1000:.1f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()

    snapshot = large_document()
    text = dump_yaml(snapshot)
    import yaml

    loaded = yaml.load(text, Loader=Loader)
    check = check_document()
    check(loaded)  # valid, or this raises
    ours = best(args.repeat, lambda: check(loaded))
    load_s = best(3, lambda: yaml.load(text, Loader=Loader))
    print(f"document                 {len(text) / 1e6:9.1f} MB of YAML")
    print(f"yaml load (CSafeLoader)  {load_s * 1000:9.1f} ms")
    print(f"envsnap validate         {ours * 1000:9.1f} ms   (target <= 50 ms)")
    print(f"validate / yaml-load     {ours / load_s:9.3f} x")
    ledger.record(__file__, "envsnap validate (5 MB document)", ours * 1000, "ms",
                  f"yaml load {load_s * 1000:.0f} ms", "<= 50")

    compare_jsonschema(loaded, ours, args.repeat)
    failed = ours > 0.050
    with tempfile.TemporaryDirectory() as folder:
        for module in ("envsnap.snapshot.schema", "jsonschema", "pydantic"):
            if importlib.util.find_spec(module) is None:
                print(f"import {module:<24} (not installed)")
                continue
            cost = import_cost(module, args.repeat, folder)
            print(f"import {module:<24} {cost * 1000:6.1f} ms")
            ledger.record(__file__, f"import {module}", cost * 1000, "ms")
        pair = [str(Path(folder) / name) for name in ("good.yaml", "bad.yaml")]
        for path, doc in zip(pair, the_pair()):
            Path(path).write_text(dump_yaml(doc), encoding="utf-8")
        for name, paths in (("h200 pair", [str(p) for p in H200_PAIR]), ("large pair", pair)):
            cli_s, base_s = cli_ratio(paths, args.repeat, folder)
            size = sum(Path(p).stat().st_size for p in paths) / 1e6
            print(f"{name}: yaml load {base_s * 1000:.0f} ms, envsnap diff {cli_s * 1000:.0f} ms"
                  f" ({size:.1f} MB)")
            print(f"diff / yaml-load         {cli_s / base_s:9.2f} x   (target <= 1.5)")
            ledger.record(__file__, f"diff / yaml-load ({name})", cli_s / base_s, "x",
                          f"yaml load {base_s * 1000:.0f} ms", "<= 1.5")
            failed = failed or cli_s / base_s > 1.5
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
