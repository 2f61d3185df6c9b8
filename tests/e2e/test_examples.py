"""The STORY example snapshots (snapshots/examples/): always what the script writes, shaped
exactly like real captures, and a diff of them names the culprit at once."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import Cli, unique_marker
from helpers.gitrepos import Story
from helpers.paths import ROOT

from envsnap.demo.story_code import BAD_HEAD, GOOD_HEAD, HOT_COMMIT
from envsnap.snapshot import document as snapshot

# one worker runs them all (tests/run.sh runs parallel workers):
# the module's real capture is taken once
pytestmark = pytest.mark.xdist_group("examples")

EXAMPLES = ROOT / "snapshots" / "examples"
GOOD, BAD = EXAMPLES / "story-good.yaml", EXAMPLES / "story-bad.yaml"
H200 = ROOT / "tests" / "data" / "h200" / "snapshot.yaml"
MARKER = unique_marker("examples-test-worker")


def load(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def test_the_script_writes_exactly_the_committed_files(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, str(EXAMPLES / "make_examples.py"), str(tmp_path)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    for name in ("story-good.yaml", "story-bad.yaml"):
        assert (tmp_path / name).read_bytes() == (EXAMPLES / name).read_bytes(), (
            f"{name} drifted from envsnap/examples*.py: run "
            "python3 snapshots/examples/make_examples.py")


def test_the_diff_names_the_pull_and_0be30d4_first(cli: Cli) -> None:
    result = cli("diff", str(GOOD), str(BAD))
    assert result.returncode == 1, result.stderr
    benchmark, *paragraph = result.stdout.split("\n\n")[1].split("\n")
    verdict = " ".join(paragraph)   # folded between words to fit 80 columns
    # the numbers first (both examples hold runs of one benchmark), then what explains them
    assert benchmark == "benchmark: EAGLE-3 2-step 94.2 -> 60.2 tok/s (-36%, regression, " \
                        "5 vs 5 runs)"
    assert verdict == ("code moved: 9 commits pulled into /root/sglang (pull origin main: "
                       "Fast-forward), 1 on a hot path: 0be30d4 Fix PCG MoE Error (touches "
                       "python/sglang/srt/distributed/device_communicators/pynccl.py: "
                       "communication); "
                       "the benchmark moved; the findings listed are the candidates.")
    report = json.loads(cli("diff", str(GOOD), str(BAD), "--json", "--all").stdout)
    first = report["findings"][0]
    assert first["path"] == ["repos", "/root/sglang", "head"] and first["rank"] > 90
    assert first["detail"]["moves"][0]["message"] == "pull origin main: Fast-forward"
    hot = [c for c in first["detail"]["added"] if c["hot"]]
    assert [(c["sha"][:7], c["subject"]) for c in hot] == [("0be30d4", "Fix PCG MoE Error")]
    assert sorted(hot[0]["files"]) == [
        "python/sglang/srt/distributed/device_communicators/pynccl.py",
        "python/sglang/srt/distributed/parallel_state.py"]
    temperatures = [f for f in report["findings"] if f["path"][-1] == "temperature_c"]
    assert temperatures and all(f["rank"] < first["rank"] for f in temperatures)


def test_the_story_facts(cli: Cli) -> None:
    good, bad = load(GOOD), load(BAD)
    assert (GOOD_HEAD[:7], BAD_HEAD[:7], HOT_COMMIT[:7]) == ("bba2fc4", "3207427", "0be30d4")
    assert all(len(sha) == 40 for sha in (GOOD_HEAD, BAD_HEAD, HOT_COMMIT))
    nvidia = bad["facts"]["nvidia"]
    assert nvidia["driver"] == "590.48.01" and nvidia["cuda_driver"] == "13.1"
    assert (nvidia["kernel_module"]["flavor"], nvidia["kernel_module"]["gcc"]) == \
        ("open", "12.2.0")
    gpus = nvidia["gpus"].values()
    assert len(gpus) == 8 and {g["name"] for g in gpus} == {
        "NVIDIA RTX PRO 6000 Blackwell Server Edition"}
    assert {(g["pcie_gen_current"], g["pcie_width_current"], g["nvlink_active"])
            for g in gpus} == {(5, 16, 0)}
    links = {link for peers in nvidia["topology"].values() for link in peers.values()}
    assert links == {"NODE", "SYS"}
    assert bad["facts"]["cuda_nccl"]["nccl"]["torch"]["version"] == "2.27.5"
    assert bad["facts"]["cuda_nccl"]["torch"]["version"] == "2.10.0+cu128"
    assert bad["meta"]["agent"]["python"] == "/root/ml-env/bin/python3"
    assert good["bench"]["summary"]["median"] == 94.2 and bad["bench"]["summary"]["median"] == 60.2
    report = cli("report", str(BAD), "--vs", str(GOOD))
    assert report.returncode == 0, report.stderr
    for fact in ("8 x NVIDIA RTX PRO 6000 Blackwell Server Edition", "590.48.01, built with "
                 "GCC 12.2.0", "driver API 13.1", "torch loads 2.27.5", "2.10.0+cu128",
                 "Gen5 x16 (max Gen5 x16) on all 8", "no NVLink; over PCIe: NODE/SYS",
                 "NCCL_PROTO=LL", "sets NCCL_ALGO, NCCL_MAX_NCHANNELS, NCCL_P2P_LEVEL, "
                 "NCCL_PROTO", "60.2 (min 59.4, max 61"):
        assert fact in report.stdout, fact


def test_digests_are_the_snapshot_modules() -> None:
    for path in (GOOD, BAD):
        document = load(path)
        assert document["digests"] == {name: snapshot.section_digest(section)
                                       for name, section in document["facts"].items()}
        assert snapshot.validate(document, str(path)) is document


# ---- shaped like real captures -----------------------------------------------------------------

@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A real local capture of a STORY checkout (stash, patch, reflog) and a worker, with a
    benchmark: what the agent writes, to hold the examples against."""
    root = tmp_path_factory.mktemp("real")
    story = Story(root / "git")
    story.checkout.write("python/sglang/srt/entrypoints/engine.py", "ENGINE = 2\n")
    story.checkout.git("stash", "push", "-m", "first try")
    story.checkout.write("python/sglang/srt/managers/scheduler.py", "SCHED = 2\n")
    env = {k: v for k, v in os.environ.items() if k != "SSH_AUTH_SOCK"}
    env.update(HOME=str(root), PYTHONPATH=str(ROOT), NCCL_PROTO="LL")
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", MARKER])
    try:
        result = subprocess.run(
            [sys.executable, "-m", "envsnap", "bench", "local", "--cmd", "echo 'v: 1'",
             "--metric", r"v: (\d+)", "--repeat", "1", "--label", "real", "--store",
             str(root / "store"), "--repo", str(story.checkout.path), "--proc", MARKER],
            cwd=root, env=env, capture_output=True, text=True, timeout=120)
    finally:
        worker.kill()
        worker.wait()
    assert result.returncode == 0, result.stderr
    return load(root / "store" / "real.yaml")


def keys(value: Any) -> set[str]:
    return set(value) if isinstance(value, dict) else set()


def first(mapping: dict[str, Any]) -> Any:
    return next(iter(mapping.values()))


def test_document_meta_and_sections_have_the_real_keys(real: dict[str, Any]) -> None:
    for path in (GOOD, BAD):
        example = load(path)
        assert keys(example) == keys(real)
        # a shipped example is signed by no one (foreign to every user); a capture is signed
        assert "signature" not in example["meta"] and "signature" in real["meta"]
        assert keys(example["meta"]) == keys(real["meta"]) - {"signature"}
        assert keys(example["meta"]["config"]) == keys(real["meta"]["config"])
        assert keys(example["meta"]["agent"]) == keys(real["meta"]["agent"])
        for name, info in example["meta"]["collectors"].items():
            assert keys(info) == keys(real["meta"]["collectors"][name])
        for name in ("system", "cuda_nccl", "python_env", "env", "git"):
            assert keys(example["facts"][name]) == keys(real["facts"][name]), name
            assert keys(example["volatile"][name]) <= keys(real["volatile"][name]) | {
                "seconds"}, name


def test_gpus_and_workers_have_the_keys_of_the_h200_capture() -> None:
    h200 = load(H200)
    example = load(BAD)
    nvidia, real_nvidia = example["facts"]["nvidia"], h200["facts"]["nvidia"]
    assert keys(nvidia) == keys(real_nvidia)
    assert all(keys(g) == keys(first(real_nvidia["gpus"])) for g in nvidia["gpus"].values())
    volatile = example["volatile"]["nvidia"]["gpus"].values()
    assert all(keys(g) == keys(first(h200["volatile"]["nvidia"]["gpus"])) for g in volatile)
    assert keys(real_nvidia["kernel_module"]) <= keys(nvidia["kernel_module"])
    real_process = first(h200["facts"]["env"]["processes"])
    assert all(keys(p) == keys(real_process)
               for p in example["facts"]["env"]["processes"].values())


def test_repos_reflog_history_stash_and_bench_have_the_real_keys(real: dict[str, Any]) -> None:
    real_repo = first(real["facts"]["git"]["repos"])
    for path in (GOOD, BAD):
        example = load(path)
        repo = first(example["facts"]["git"]["repos"])
        assert keys(repo) == keys(real_repo)
        for part in ("reflog", "history"):
            assert all(keys(entry) == keys(real_repo[part][0]) for entry in repo[part]), part
        assert keys(first(repo["stashes"])) == keys(first(real_repo["stashes"]))
        assert keys(repo["uncommitted"]) == keys(real_repo["uncommitted"])
        assert keys(repo["uncommitted"]["patch"]) == keys(real_repo["uncommitted"]["patch"])
        assert len(repo["history"]) == repo["history_limit"] == real_repo["history_limit"]
        assert keys(example["bench"]) == keys(real["bench"])
        assert all(keys(run) == keys(real["bench"]["runs"][0]) for run in example["bench"]["runs"])
