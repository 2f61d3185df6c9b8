"""Each ranking rule on its own: a finding in, a rank and a one-line why out (or a pass)."""
from __future__ import annotations

from envsnap.diff import rules
from envsnap.diff.findings import ADDED, NOT_CAPTURED, REMOVED, Finding
from envsnap.diff.hotpaths import CONFIGURED

CTX = rules.Context(names=("good", "bad"), shell_after={"NCCL_PROTO": "LL"},
                    gpus_after={"B1": {"pcie_gen_current": 5, "pcie_gen_max": 5,
                                       "pcie_width_current": 8, "pcie_width_max": 16},
                                "B2": {"pcie_gen_current": 4, "pcie_gen_max": 5,
                                       "pcie_width_current": 16, "pcie_width_max": 16},
                                "B3": {"pcie_gen_current": 5, "pcie_gen_max": 5,
                                       "pcie_width_current": 16, "pcie_width_max": 16}})


def commit(subject: str, hot: list[str], score: int = 0, sha: str = "0be30d4") -> dict:
    return {"sha": sha + "0" * 33, "subject": subject, "files": ["x/pynccl.py"],
            "hot_files": {"x/pynccl.py": hot[0]} if hot else {}, "hot": hot, "score": score}


def head_move(added: list[dict], relation: str = "forward", complete: bool = True) -> Finding:
    detail = {"relation": relation, "complete": complete, "old": "a" * 40, "new": "b" * 40,
              "moves": [{"selector": "HEAD@{0}", "message": "pull origin main: Fast-forward"}],
              "added": added, "dropped": [], "reflog_reaches": True}
    return Finding("git", ("repos", "/root/sglang", "head"), "a" * 40, "b" * 40, detail=detail)


# ---- code moved ----------------------------------------------------------------------------

def test_code_moved_names_the_pull_and_the_hot_commit() -> None:
    rating = rules.code_moved(head_move([commit("Change 9", []),
                                         commit("Fix PCG MoE Error", ["communication"], 99)]),
                              CTX)
    assert rating is not None and rating.rank == rules.HOT
    assert rating.why == ("code moved: 2 commits pulled into /root/sglang (pull origin main: "
                          "Fast-forward), 1 on a hot path: 0be30d4 Fix PCG MoE Error (touches "
                          "x/pynccl.py: communication)")


def test_the_verdict_names_hot_commits_by_score_then_history_order() -> None:
    commits = [commit("Tune scheduler", ["component"], 31, "1111111"),
               commit("Fix all-reduce", ["communication"], 99, "2222222"),
               commit("Attention kernel", ["kernel"], 69, "3333333"),
               commit("Fix NCCL again", ["communication"], 99, "4444444")]
    rating = rules.code_moved(head_move(commits), CTX)
    assert rating is not None and rating.why.endswith(
        ", 4 on a hot path, hottest first: 2222222 Fix all-reduce (touches x/pynccl.py: "
        "communication), 4444444 Fix NCCL again (touches x/pynccl.py: communication), 3333333 "
        "Attention kernel (touches x/pynccl.py: kernel family) and 1 more")


def test_code_moved_without_hot_commits_ranks_below_a_hot_move() -> None:
    rating = rules.code_moved(head_move([commit("Docs", [])]), CTX)
    assert rating is not None and rating.rank == rules.CODE_MOVED < rules.HOT
    assert "touch" not in rating.why


def test_configured_hot_paths_rank_highest() -> None:
    rating = rules.code_moved(head_move([commit("Tune", [CONFIGURED])]), CTX)
    assert rating is not None and rating.rank == rules.HOT_CONFIGURED


def test_code_moved_says_at_least_when_the_window_is_cut() -> None:
    rating = rules.code_moved(head_move([commit("A", [])], complete=False), CTX)
    assert rating is not None and "at least 1 commit pulled" in rating.why


def test_code_moved_unknown_history_says_so() -> None:
    finding = head_move([], relation="unknown", complete=False)
    finding.detail["note"] = "the recorded history does not reach the old HEAD: shallow"
    rating = rules.code_moved(finding, CTX)
    assert rating is not None and "does not reach the old HEAD" in rating.why
    assert "aaaaaaa -> bbbbbbb" in rating.why


def test_code_moved_passes_on_other_git_facts() -> None:
    assert rules.code_moved(Finding("git", ("repos", "/r", "branch"), "a", "b"), CTX) is None


# ---- uncommitted work ---------------------------------------------------------------------

def test_uncommitted_patch_change_is_summarised() -> None:
    text = "diff --git a/x.py b/x.py\n+1\ndiff --git a/y.py b/y.py\n+2\n"
    after = {"dirty": True, "patch": {"bytes": 2_000_000, "sha256": "f" * 64, "text": text},
             "untracked_count": 1}
    rating = rules.uncommitted(Finding("git", ("repos", "/r", "uncommitted"),
                                       {"dirty": False}, after), CTX)
    assert rating is not None and rating.rank == rules.PATCH
    assert rating.why == ("uncommitted changes in /r changed: clean -> patch 1.9 MB sha256 "
                          "ffffffffffff (2 files), 1 untracked file")


def test_binary_patch_is_flagged() -> None:
    after = {"dirty": True, "patch": {"bytes": 10, "sha256": "0" * 64, "base64": "AAEC"}}
    rating = rules.uncommitted(Finding("git", ("repos", "/r", "uncommitted"), None, after), CTX)
    assert rating is not None and "binary" in rating.why


def test_stash_added_and_dropped() -> None:
    stash = {"sha": "s" * 40, "message": "On main: flashinfer tweaks"}
    added = rules.uncommitted(Finding("git", ("repos", "/r", "stashes", "s" * 40), None, stash,
                                      ADDED), CTX)
    dropped = rules.uncommitted(Finding("git", ("repos", "/r", "stashes", "s" * 40), stash,
                                        None, REMOVED), CTX)
    assert added == rules.Rating(rules.PATCH, "stash added in /r: On main: flashinfer tweaks")
    assert dropped is not None and "dropped or popped" in dropped.why


# ---- environment ------------------------------------------------------------------------------

def worker_finding(kind: str, name: str = "NCCL_PROTO") -> Finding:
    return Finding("env", ("processes", "python -m sglang", "env", name),
                   "LL" if kind != ADDED else None, "LL" if kind == ADDED else None, kind,
                   detail={"pid_before": "4000", "pid_after": "4242"})


def test_env_missing_in_a_worker_but_set_in_the_shell() -> None:
    rating = rules.worker_env(worker_finding(REMOVED), CTX)
    assert rating == rules.Rating(rules.WORKER_ENV,
                                  "NCCL_PROTO=LL missing in worker 4242 (still set in the shell)")


def test_unrelated_worker_env_ranks_low() -> None:
    rating = rules.worker_env(worker_finding(ADDED, "HOME_ISH"), CTX)
    assert rating is not None and rating.rank == rules.OTHER_ENV < rules.WORKER_ENV


def test_worker_gone_says_its_env_was_not_compared() -> None:
    finding = Finding("env", ("processes", "python -m sglang"), {}, None, REMOVED,
                      detail={"pid_before": "4000"})
    rating = rules.worker_env(finding, CTX)
    assert rating is not None and "worker 4000" in rating.why and "not compared" in rating.why


def test_shell_env_perf_variables_rank_high() -> None:
    nccl = rules.shell_env(Finding("env", ("shell", "NCCL_ALGO"), "Ring", "Tree"), CTX)
    other = rules.shell_env(Finding("env", ("shell", "EDITOR"), "vi", "nano"), CTX)
    preload = rules.shell_env(Finding("env", ("shell", "LD_PRELOAD"), None, "/x.so", ADDED), CTX)
    assert nccl == rules.Rating(rules.ENV, "NCCL_ALGO in the shell Ring -> Tree")
    assert other is not None and other.rank == rules.OTHER_ENV
    assert preload is not None and preload.rank == rules.ENV


def test_sitecustomize_change() -> None:
    finding = Finding("python_env", ("customize", "sitecustomize"),
                      {"sha256": "a" * 64, "size": 10}, {"sha256": "b" * 64, "size": 12})
    rating = rules.startup_code(finding, CTX)
    assert rating is not None and rating.rank == rules.STARTUP_CODE
    assert rating.why.startswith("sitecustomize changed")


# ---- versions, hardware ----------------------------------------------------------------------

def test_versions_of_the_gpu_stack() -> None:
    driver = rules.versions(Finding("nvidia", ("driver",), "590.48.01", "595.10"), CTX)
    nccl = rules.versions(Finding("cuda_nccl", ("nccl", "torch", "version"), "2.27.5",
                                  "2.28.9"), CTX)
    assert driver == rules.Rating(rules.VERSIONS, "NVIDIA driver 590.48.01 -> 595.10")
    assert nccl == rules.Rating(rules.VERSIONS, "NCCL torch.version 2.27.5 -> 2.28.9")
    params = Finding("nvidia", ("kernel_module", "params", "EnableMSI"), "1", "0")
    assert rules.versions(params, CTX) is None
    assert rules.gpu_settings(params, CTX) is not None


def test_pcie_width_below_max_outranks_a_speed_drop() -> None:
    width = rules.pcie(Finding("nvidia", ("gpus", "B1", "pcie_width_current"), 16, 8), CTX)
    speed = rules.pcie(Finding("nvidia", ("gpus", "B2", "pcie_gen_current"), 5, 4), CTX)
    back = rules.pcie(Finding("nvidia", ("gpus", "B3", "pcie_gen_current"), 4, 5), CTX)
    assert width is not None and width.rank == rules.PCIE_WIDTH
    assert "Gen5 x8: width below its max x16" in width.why
    assert speed is not None and speed.rank == rules.PCIE_GEN and "idle GPU" in speed.why
    assert back is not None and back.rank < speed.rank


def test_throttle_reasons_decoded_and_idle_is_benign() -> None:
    path = ("gpus", "B1", "clock_event_reasons")
    hot = rules.throttled(Finding("nvidia", path, ["gpu_idle"], ["sw_power_cap",
                                                                 "hw_thermal_slowdown"],
                                  volatile=True), CTX)
    idle = rules.throttled(Finding("nvidia", path, [], ["gpu_idle"], volatile=True), CTX)
    assert hot == rules.Rating(rules.THROTTLED, "GPU B1 clocks held back by hw_thermal_slowdown, "
                                                "sw_power_cap (was: gpu_idle)")
    assert idle is not None and idle.rank < rules.PERFORMANCE


def test_gpu_settings_and_a_lost_gpu() -> None:
    power = rules.gpu_settings(Finding("nvidia", ("gpus", "B1", "power_limit_w"), 700.0, 500.0),
                               CTX)
    ecc = rules.gpu_settings(Finding("nvidia", ("gpus", "B1", "ecc_mode_current"), "Enabled",
                                     "Disabled"), CTX)
    lost = rules.gpu_settings(Finding("nvidia", ("gpus", "B9"), {}, None, REMOVED), CTX)
    assert power == rules.Rating(rules.GPU_SETTINGS, "GPU B1 power_limit_w 700.0 -> 500.0")
    assert ecc is not None and ecc.rank == rules.GPU_SETTINGS
    assert lost == rules.Rating(rules.VERSIONS, "GPU B9 missing in bad")


def test_reboot_on_one_host_but_not_across_hosts() -> None:
    boot = Finding("system", ("boot_id",), "x", "y")
    assert rules.system(boot, CTX) == rules.Rating(rules.SYSTEM,
                                                   "host rebooted between the snapshots")
    other = rules.Context(same_host=False)
    rating = rules.system(boot, other)
    assert rating is not None and rating.rank < rules.PERFORMANCE


def test_packages_gpu_stack_above_the_rest() -> None:
    torch = rules.python_env(Finding("python_env", ("packages", "torch"), "2.10.0", "2.11.0"),
                             CTX)
    six = rules.python_env(Finding("python_env", ("packages", "six"), None, "1.16", ADDED),
                           CTX)
    assert torch == rules.Rating(rules.GPU_PACKAGES, "package torch 2.10.0 -> 2.11.0")
    assert six == rules.Rating(rules.PACKAGES, "package six added: 1.16")


# ---- capture problems, readings, the rest ----------------------------------------------------

def test_not_captured_is_never_removed() -> None:
    rating = rules.not_captured(Finding("nvidia", (), None, "timed out after 20s",
                                        NOT_CAPTURED), CTX)
    assert rating == rules.Rating(rules.NOT_CAPTURED_RANK,
                                  "nvidia not captured in bad (timed out after 20s): not compared")
    assert rules.not_captured(Finding("nvidia", ("driver",), "a", None, REMOVED), CTX) is None


def test_volatile_readings_rank_last_and_fallback_answers_everything() -> None:
    reading = rules.volatile(Finding("system", ("uptime_seconds",), 1, 2, volatile=True), CTX)
    assert reading is not None and reading.rank == rules.VOLATILE
    assert rules.anything(Finding("zzz", ("a",), 1, 2), CTX).rank == rules.OTHER  # type: ignore


def test_rank_all_orders_by_rank_and_keeps_walk_order_for_ties() -> None:
    findings = [Finding("python_env", ("packages", "a"), "1", "2"),
                Finding("env", ("shell", "NCCL_ALGO"), "Ring", "Tree"),
                Finding("python_env", ("packages", "b"), "1", "2")]
    ranked = rules.rank_all(findings, CTX)
    assert [f.path[-1] for f in ranked] == ["NCCL_ALGO", "a", "b"]
    assert all(f.why for f in ranked)
