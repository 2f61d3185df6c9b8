"""Hot paths as weighted evidence: whole segments or globs, weights by kind, configured first."""
from __future__ import annotations

import pytest
from helpers.paths import ROOT

from envsnap.diff import hotpaths as hp

DEFAULTS = hp.hot_patterns()
PYNCCL = "python/sglang/srt/distributed/device_communicators/pynccl.py"


def area(path: str, patterns: tuple[hp.HotPattern, ...] = DEFAULTS) -> str | None:
    found = hp.hottest(path, patterns)
    return found.area if found else None


@pytest.mark.parametrize(("path", "expected"), [
    (PYNCCL, "communication"),
    ("python/sglang/srt/distributed/parallel_state.py", "communication"),
    ("vllm_ascend/distributed/communication_op.py", "communication"),
    ("src/all_reduce.cu", "communication"),
    ("python/sglang/srt/layers/attention/flashinfer_backend.py", "kernel"),
    ("python/sgl_jax/srt/kernels/ragged_paged_attention/util.py", "kernel"),
    ("vllm_ascend/ops/fused_moe.py", "kernel"),
    ("python/sglang/srt/managers/scheduler.py", "component"),
    ("vllm_ascend/worker/model_runner_v1.py", "component"),
    ("python/sglang/srt/model_executor/cuda_graph_runner.py", "component"),
])
def test_each_kind_of_default_path(path: str, expected: str) -> None:
    assert area(path) == expected


@pytest.mark.parametrize("path", [
    # a word inside a segment is not the segment: the substrings the old table matched
    "python/sglang/srt/managers/scheduler_metrics_mixin.py",
    "python/sglang/srt/function_call/glm4_moe_detector.py",
    # docs, tests, benchmarks, examples and CI are never hot by default
    "docs/backend/attention_backend.md", "docs/distributed/index.rst", "README.md",
    "test/srt/test_pynccl.py", "tests/ut/distributed/test_parallel_state.py",
    "python/sgl_jax/test/test_gdn_fused_chunk_parallel_state_contract.py",
    "python/sglang/srt/distributed/pynccl_test.py", "benchmark/kernels/fused_moe/tune.py",
    "examples/disaggregated_prefill_hccl/distributed/run.py",
    ".github/workflows/pr-test-distributed.yml",
])
def test_what_is_never_hot_by_default(path: str) -> None:
    assert area(path) is None


def test_a_plain_name_is_a_whole_segment_or_a_file_name_less_its_extension() -> None:
    assert hp.matches("pynccl", PYNCCL) and hp.matches("distributed", PYNCCL)
    assert not hp.matches("pynccl", "x/pynccl_wrapper.py")
    assert not hp.matches("nccl", PYNCCL) and not hp.matches("distrib", PYNCCL)
    assert hp.matches("distributed/", PYNCCL) and not hp.matches("pynccl.py/", PYNCCL)
    assert hp.matches("*_wrapper.py", "x/pynccl_wrapper.py")


def test_a_pattern_with_a_slash_is_the_path_from_the_root_or_a_directory_above() -> None:
    for pattern in ("python/sglang/srt/distributed/*", "python/sglang/srt/distributed",
                    "python/sglang/srt/distributed/", "*/device_communicators/pynccl.py"):
        assert hp.matches(pattern, PYNCCL), pattern
    assert not hp.matches("sglang/srt/distributed", PYNCCL)  # anchored at the root


def test_configured_paths_outrank_every_default_and_may_name_docs_and_tests() -> None:
    patterns = hp.hot_patterns(["*/engine.py", "docs/", "flashinfer_mla*"])
    assert area("python/sglang/srt/entrypoints/engine.py", patterns) == hp.CONFIGURED
    assert area("docs/backend/attention_backend.md", patterns) == hp.CONFIGURED
    assert area("x/flashinfer_mla_backend.py", patterns) == hp.CONFIGURED
    configured = hp.hot_patterns(["python/sglang/srt/distributed/*"])
    found = hp.hottest(PYNCCL, configured)
    assert found is not None and found.area == hp.CONFIGURED
    assert found.weight > max(p.weight for p in hp.DEFAULT_HOT_PATHS) + hp.SHARE_BONUS


def test_kinds_are_weighed_apart_so_no_share_lifts_a_commit_above_a_heavier_kind() -> None:
    order = ["communication", "kernel", "component"]
    weights = {a: [p.weight for p in hp.DEFAULT_HOT_PATHS if p.area == a] for a in order}
    for heavier, lighter in zip(order, order[1:]):
        assert min(weights[heavier]) > max(weights[lighter]) + hp.SHARE_BONUS


def test_a_commit_is_judged_by_what_it_changes_on_a_hot_path() -> None:
    def score(files: list[str]) -> int:
        return hp.score(hp.hot_files(files, DEFAULTS), files)

    one_fix = score([PYNCCL])
    with_its_test = score([PYNCCL, "test/srt/test_pynccl.py"])   # a test is no code changed
    refactor = score([PYNCCL] + [f"python/sglang/srt/x{n}.py" for n in range(30)])
    kernel_only = score(["python/sglang/srt/layers/attention/triton_backend.py"])
    assert one_fix == with_its_test > kernel_only > refactor > score(["README.md"]) == 0
    # a tenth of the code on one path counts in full: above every lighter kind
    concentrated = score([PYNCCL] + [f"python/sglang/srt/x{n}.py" for n in range(9)])
    assert concentrated > score(["python/sglang/srt/layers/attention/a.py"] * 2)
    hot = hp.hot_files(["python/sglang/srt/managers/scheduler.py", PYNCCL], DEFAULTS)
    assert [m.path for m in hot] == [PYNCCL, "python/sglang/srt/managers/scheduler.py"]


def test_a_package_of_every_model_is_no_hot_path() -> None:
    assert area("vllm/model_executor/models/llama.py") is None
    assert area("vllm/model_executor/layers/fused_moe/layer.py") == "kernel"


def test_the_guide_table_is_the_default_table() -> None:
    guide = (ROOT / "docs" / "guide" / "diff.md").read_text()
    section = guide.split("## How hot paths are weighed", 1)[1].split("\n#", 1)[0]
    kinds = {"communication": "communication", "kernel family": "kernel",
             "generic component": "component"}
    rows = [line.split("|")[1:4] for line in section.splitlines()
            if line.startswith("| ") and line.split("|")[1].strip() in kinds]
    documented = {(p.strip("` "), int(weight), kinds[kind.strip()])
                  for kind, weight, patterns in rows for p in patterns.split(", ")}
    assert documented == {(p.pattern, p.weight, p.area) for p in hp.DEFAULT_HOT_PATHS}
    assert all(f"`{pattern}`" in section for pattern in hp.NEVER_HOT)
