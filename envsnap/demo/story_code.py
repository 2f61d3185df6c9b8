"""The STORY host's software (docs/STORY.md) for snapshots.py: python env, CUDA/NCCL,
environment, git.

The SGLang checkout is the heart of the STORY: HEAD bba2fc4 in the good snapshot, then
`git pull origin main` fast-forwards it to 3207427 over nine commits, one of them 0be30d4
"Fix PCG MoE Error" on the NCCL all-reduce path. The uncommitted patches (flashinfer MLA
tweak, engine.py, scheduler.py) and an older stash are in both snapshots, as a pull leaves
them. History windows hold the agent's default 200 commits, newest first, as it records them.
"""
from __future__ import annotations

import hashlib
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from envsnap.agent.gitparse import PatchFiles, uncommitted_digest

if TYPE_CHECKING:
    from envsnap.snapshot.records import Blob, Commit, Git, ReflogEntry, Repo, Stash, Uncommitted

REPO = "/root/sglang"
VENV = "/root/ml-env"
VENV_PYTHON = f"{VENV}/bin/python3"
SITE = f"{VENV}/lib/python3.11/site-packages"
PYNCCL = "python/sglang/srt/distributed/device_communicators/pynccl.py"
PARALLEL_STATE = "python/sglang/srt/distributed/parallel_state.py"
HISTORY_LIMIT = 200
NCCL_TUNING = {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "NCCL_P2P_LEVEL": "SYS",
               "NCCL_MAX_NCHANNELS": "16"}


def epoch(text: str) -> int:
    """'2025-12-09T07:58:20' (UTC) -> seconds since the epoch."""
    return int(datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp())


def made_up_hex(name: str, length: int = 40) -> str:
    return hashlib.sha256(f"envsnap example {name}".encode()).hexdigest()[:length]


def sha(prefix: str, name: str) -> str:
    """A full 40-digit sha that starts with the STORY's 7 digits."""
    return prefix + made_up_hex(name, 40 - len(prefix))


GOOD_HEAD = sha("bba2fc4", "good head")
BAD_HEAD = sha("3207427", "bad head")
HOT_COMMIT = sha("0be30d4", "fix pcg moe error")

# The pull, oldest first: (subject, files); the fifth is the STORY's.
PULLED: list[tuple[str, list[str]]] = [
    ("Support Qwen3-Next MTP weight loading", ["python/sglang/srt/models/qwen3_next_mtp.py"]),
    ("[CI] Bump nightly accuracy thresholds", [".github/workflows/nightly-test.yml",
                                               "test/srt/nightly/test_gsm8k_eval.py"]),
    ("Add tool call parser for GLM-4.6", ["python/sglang/srt/function_call/glm4_moe_detector.py",
                                          "test/srt/test_function_call_parser.py"]),
    ("[Docs] Update EAGLE-3 speculative decoding guide",
     ["docs/advanced_features/speculative_decoding.ipynb"]),
    ("Fix PCG MoE Error", [PYNCCL, PARALLEL_STATE]),
    ("Refactor tokenizer manager logging", ["python/sglang/srt/managers/tokenizer_manager.py"]),
    ("[Router] Retry failed health checks", ["sgl-router/src/routers/http/router.rs"]),
    ("Bump sgl-kernel to 0.3.18", ["python/pyproject.toml", "sgl-kernel/pyproject.toml"]),
    ("[Docs] Fix typos in server arguments", ["docs/advanced_features/server_arguments.md"]),
]
# Upstream before the good HEAD: (subject, file), cycled with a PR number each.
OLD = [("[Docs] Fix links in the send request guide", "docs/basic_usage/send_request.ipynb"),
       ("Support DeepSeek-V3.2 weight loading", "python/sglang/srt/models/deepseek_v2.py"),
       ("[Bugfix] Validate --mem-fraction-static", "python/sglang/srt/server_args.py"),
       ("[CI] Stabilise the endpoint test", "test/srt/test_srt_endpoint.py"),
       ("Read rope scaling from the HF config", "python/sglang/srt/configs/model_config.py"),
       ("[OpenAI] Stream usage in chat completions",
        "python/sglang/srt/entrypoints/openai/serving_chat.py"),
       ("[Router] Log worker URLs on start", "sgl-router/src/main.rs"),
       ("[Quant] Clean up FP8 block scale checks", "python/sglang/srt/layers/quantization/fp8.py")]


# ---- history and reflog ------------------------------------------------------------------

def commit(sha_: str, parent: str, subject: str, files: list[str], when: int,
           author: str) -> Commit:
    return {"author": author, "files": files, "parents": [parent], "sha": sha_,
            "subject": subject, "time": when}


def older_commits(count: int) -> list[Commit]:
    """Upstream before the good HEAD, newest first, one every three hours."""
    start = epoch("2025-12-08T16:31:00")
    shas = [sha("", f"old {n}") for n in range(count + 1)]
    found = []
    for n in range(count):
        subject, area = OLD[n % len(OLD)]
        found.append(commit(shas[n], shas[n + 1], f"{subject} (#{14180 - 3 * n})", [area],
                            start - 10800 * n,
                            f"contributor-{n % 7 + 1}"))
    return found


def full_history() -> list[Commit]:
    """The upstream as the bad snapshot sees it, newest first."""
    old = older_commits(HISTORY_LIMIT)
    head = commit(GOOD_HEAD, str(old[0]["sha"]), "Add Kimi-K2.5 tool call parser",
                  ["python/sglang/srt/function_call/kimik2_detector.py"],
                  epoch("2025-12-08T19:31:00"), "contributor-2")
    pulled: list[Commit] = []
    parent, when = GOOD_HEAD, epoch("2025-12-09T09:02:00")
    for number, (subject, files) in enumerate(PULLED):
        this = HOT_COMMIT if number == 4 else BAD_HEAD if number == 8 else \
            sha("", f"pulled {number}")
        pulled.insert(0, commit(this, parent, subject, files, when + 11400 * number,
                                f"contributor-{number % 5 + 3}"))
        parent = this
    return pulled + [head] + old


def reflog_entry(position: int, old: str | None, new: str | None, when: str,
                 message: str) -> ReflogEntry:
    return {"message": message, "new": new, "old": old, "selector": f"HEAD@{{{position}}}",
            "time": epoch(when), "tz": "+0000"}


def reflog(good: bool, history: list[Commit]) -> list[ReflogEntry]:
    older = history[len(PULLED) + 1:]
    moves = [(GOOD_HEAD, GOOD_HEAD, "2025-12-09T14:07:31", "reset: moving to HEAD"),
             (older[6]["sha"], GOOD_HEAD, "2025-12-08T21:02:44", "pull origin main: Fast-forward"),
             (older[40]["sha"], older[6]["sha"], "2025-12-03T10:15:02",
              "pull origin main: Fast-forward"),
             ("0" * 40, older[40]["sha"], "2025-11-27T09:30:12",
              "clone: from https://github.com/sgl-project/sglang.git")]
    if not good:  # the silent pull, in the night between the two snapshots
        moves.insert(0, (GOOD_HEAD, BAD_HEAD, "2025-12-10T22:14:09",
                         "pull origin main: Fast-forward"))
    return [reflog_entry(n, *move) for n, move in enumerate(moves)]


# ---- uncommitted work ------------------------------------------------------------------------

FLASHINFER = "python/sglang/srt/layers/attention/flashinfer_mla_backend.py"
ENGINE = "python/sglang/srt/entrypoints/engine.py"
SCHEDULER = "python/sglang/srt/managers/scheduler.py"
HUNKS = {
    FLASHINFER: ["@@ -412,2 +412,3 @@ class FlashInferMLAAttnBackend(AttentionBackend):",
                 "             self.prefill_wrapper_ragged = BatchPrefillWithRaggedKVCacheWrapper(",
                 "-                self.workspace_buffer, \"NHD\"",
                 "+                # EAGLE-3 verify runs as extend without CUDA graphs: pin fa2",
                 "+                self.workspace_buffer, \"NHD\", backend=\"fa2\""],
    ENGINE: ["@@ -118,3 +118,6 @@ class Engine(EngineBase):",
             "         server_args = ServerArgs(**kwargs)",
             " ",
             "+        # sitecustomize sets the tuned NCCL env: say what the workers inherit",
             "+        for name in sorted(k for k in os.environ if k.startswith(\"NCCL_\")):",
             "+            logger.info(\"NCCL env for workers: %s=%s\", name, os.environ[name])",
             "         # Shutdown the subprocesses automatically when the program exits"],
    SCHEDULER: ["@@ -2580,2 +2580,5 @@ def run_scheduler_process(",
                "     faulthandler.enable()",
                "+    logger.info(\"NCCL env: %s\", {k: v for k, v in os.environ.items()",
                "+                                 if k.startswith(\"NCCL_\")})",
                "+",
                "     kill_itself_when_parent_died()"],
}


def file_diff(path: str, hunk: list[str]) -> str:
    before, after = made_up_hex(f"blob {path} before"), made_up_hex(f"blob {path} after")
    return "\n".join([f"diff --git a/{path} b/{path}", f"index {before}..{after} 100644",
                      f"--- a/{path}", f"+++ b/{path}", *hunk]) + "\n"


def blob(text: str) -> Blob:
    """A patch as the agent records it: the text, and each file's part measured."""
    data = text.encode("utf-8")
    recorded: Blob = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                      "text": text, "truncated": False}
    measured = PatchFiles()
    measured.feed(data)
    files = measured.finish()
    if files["files_total"]:
        recorded["files"], recorded["files_total"] = files["files"], files["files_total"]
    return recorded


def uncommitted() -> Uncommitted:
    patch = blob("".join(file_diff(path, hunk) for path, hunk in sorted(HUNKS.items())))
    return {"digest": uncommitted_digest(str(patch["sha256"]), {}), "dirty": True, "patch": patch,
            "staged": blob(""),   # the local patches were never `git add`ed: tracked ".M"
            "tracked": {path: ".M" for path in sorted(HUNKS)}, "untracked": {},
            "untracked_count": 0, "untracked_truncated": False}


def stashes() -> dict[str, Stash]:
    first_try = [HUNKS[FLASHINFER][0].replace("+412,3", "+412,2"), HUNKS[FLASHINFER][1],
                 HUNKS[FLASHINFER][2], HUNKS[FLASHINFER][4]]
    return {"stash@{0}": {"base": GOOD_HEAD, "has_untracked": False,
                          "message": "On main: flashinfer MLA tweak, first try",
                          "patch": blob(file_diff(FLASHINFER, first_try)),
                          "sha": sha("", "stash"), "time": epoch("2025-12-09T14:07:31")}}


def repo(good: bool) -> Repo:
    history = full_history()
    window = history[len(PULLED):] if good else history
    return {"ahead": 0, "behind": 0, "branch": "main", "detached": False,
            "head": GOOD_HEAD if good else BAD_HEAD, "history": window[:HISTORY_LIMIT],
            "history_complete": False, "history_limit": HISTORY_LIMIT, "realpath": REPO,
            "reflog": reflog(good, history), "reflog_truncated": False,
            "remotes": {"origin": "https://github.com/sgl-project/sglang.git"},
            "shallow": False, "stashes": stashes(), "toplevel": REPO,
            "uncommitted": uncommitted(), "upstream": "origin/main"}


def git_facts(good: bool) -> Git:
    return {"git": {"path": "/usr/bin/git", "version": "2.39.5"}, "repos": {REPO: repo(good)}}
