"""Explain on a real GPU: two causes of unequal size, bytecode written, a results file left.

Run on the GPU host with torch, from the repository root:
    python3 tests/data/record_explain_story.py OUT_DIR
It writes OUT_DIR/explain-story.tar.gz holding h200-explain/ (kept as tests/data/h200/explain/):
1. An upstream repository and a clone of it, `work`, at the good commit: bench.py imports
   the model module from the checkout (so python writes `__pycache__/` there: no
   .gitignore, bytecode writing left on, as every user has it) and writes results.json
   into the checkout after each run. The model turns TF32 on for its fp32 matmuls, as
   projects do. The user keeps a file of their own there, untracked (notes.txt).
2. `envsnap bench local` -> snapshots/good.yaml.
3. Four commits land upstream and `git pull` brings them in: the second adds bf16 work to
   every step (the pull's cost, about a quarter). The shell now exports
   NVIDIA_TF32_OVERRIDE=0, which switches TF32 off under torch's feet (about 40%).
4. `envsnap bench local` -> snapshots/bad.yaml.
5. `envsnap explain good bad --yes`: explain.txt; then the checkout's HEAD, status, stash
   list and notes.txt compared with before it ran (checkout.json).
The step's sizes come from a calibration on the GPU at the start (calibration.json), so the
two causes keep their sizes whatever the card's speeds. log.json holds every command's argv,
exit code, seconds and stderr. STORY_DRY_RUN=1 plays it without a GPU: the benchmark
then sleeps for the time the GPU work would take.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import tarfile
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from record_story import ROOT, Story  # noqa: E402

METRIC = r"steps/s ([0-9.]+)"
REPEAT = "3"
ENV_CAUSE = {"NVIDIA_TF32_OVERRIDE": "0"}
DRY = bool(os.environ.get("STORY_DRY_RUN"))

CALIBRATE = r'''
import json, time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
x = torch.randn(4096, 4096, device="cuda")
def timed(fn, n=20):
    for _ in range(3): fn()
    torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(n): fn()
    torch.cuda.synchronize(); return (time.perf_counter() - t) / n
torch.backends.cuda.matmul.allow_tf32 = True
tf32 = timed(lambda: x @ x)
torch.backends.cuda.matmul.allow_tf32 = False
fp32 = timed(lambda: x @ x)
bf16 = timed(lambda: a @ a)
print(json.dumps({"bf16": bf16, "tf32": tf32, "fp32": fp32}))
'''

MODEL = '''"""One step of the model: {bf16} bf16 matmuls and one fp32 matmul (TF32 on)."""
import os
import time

BF16_MATMULS = {bf16}
EXTRA_BF16 = {extra}
DRY_SECONDS = {dry}


def step(tensors):
    if tensors is None:   # STORY_DRY_RUN: the GPU's time, as calibrated
        tf32_off = os.environ.get("NVIDIA_TF32_OVERRIDE") == "0"
        time.sleep(DRY_SECONDS[0] * (BF16_MATMULS + EXTRA_BF16)
                   + DRY_SECONDS[2 if tf32_off else 1])
        return
    a, x = tensors
    for _ in range(BF16_MATMULS + EXTRA_BF16):
        a @ a
    x @ x


def tensors():
    if os.environ.get("STORY_DRY_RUN"):
        return None
    import torch
    torch.backends.cuda.matmul.allow_tf32 = True
    return (torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16),
            torch.randn(4096, 4096, device="cuda"))


def sync():
    if not os.environ.get("STORY_DRY_RUN"):
        import torch
        torch.cuda.synchronize()
'''

BENCH = '''"""Steps per second of the model for about a second; results.json left beside it."""
import json
import time

from model import step, sync, tensors

STEPS = {steps}

state = tensors()
for _ in range(3):
    step(state)
sync()
started = time.perf_counter()
for _ in range(STEPS):
    step(state)
sync()
rate = STEPS / (time.perf_counter() - started)
with open("results.json", "w") as handle:
    json.dump({{"steps_per_s": rate}}, handle)
print(f"steps/s {{rate:.2f}}")
'''


def calibrate(story: Story) -> dict[str, float]:
    """The three matmuls' seconds on this GPU (or a CPU's stand-in figures when dry)."""
    if DRY:
        return {"bf16": 0.0014, "tf32": 0.0003, "fp32": 0.0021}
    proc = story.run("calibrate", [sys.executable, "-c", CALIBRATE])
    return json.loads(proc.stdout)


def sizes(seconds: dict[str, float]) -> dict[str, int]:
    """bf16 matmuls per step so that TF32 off costs ~40% of the speed, the pull's extra ones
    ~25%, and steps for about a second. From (y + x) / (y + rho x) = 0.6 with x the fp32
    matmul's time with TF32 and y the bf16 ones'."""
    rho = seconds["fp32"] / seconds["tf32"]
    y = max(seconds["bf16"], (0.6 * rho - 1) * seconds["tf32"] / 0.4)
    bf16 = max(1, round(y / seconds["bf16"]))
    base = bf16 * seconds["bf16"] + seconds["tf32"]
    extra = max(1, round(base / 3 / seconds["bf16"]))
    return {"bf16": bf16, "extra": extra, "steps": max(5, round(1.0 / base))}


def files(size: dict[str, int], extra: int, seconds: dict[str, float]) -> dict[str, str]:
    dry = (seconds["bf16"], seconds["tf32"], seconds["fp32"])
    return {"model.py": MODEL.format(bf16=size["bf16"], extra=extra, dry=dry),
            "bench.py": BENCH.format(steps=size["steps"])}


def checkout_state(story: Story) -> dict[str, str]:
    with open(os.path.join(story.work, "notes.txt"), "rb") as handle:
        notes = hashlib.sha256(handle.read()).hexdigest()
    return {"head": story.git(story.work, "rev-parse", "HEAD"),
            "branch": story.git(story.work, "symbolic-ref", "-q", "HEAD"),
            "stashes": story.git(story.work, "stash", "list"),
            "status": "\n".join(  # what the benchmark itself writes aside
                line for line in story.git(story.work, "status", "--porcelain",
                                           "--untracked-files=all").splitlines()
                if "__pycache__/" not in line and not line.endswith("results.json")),
            "notes.txt": notes}


def play(story: Story) -> dict[str, object]:
    seconds = calibrate(story)
    size = sizes(seconds)
    facts: dict[str, object] = {"calibration": seconds, "sizes": size, "good": [], "pulled": []}
    os.makedirs(story.upstream)
    story.git(story.upstream, "init", "-q", "-b", "main")
    facts["good"] = [story.commit(story.upstream, "Add the model and its benchmark",
                                  {**files(size, 0, seconds), "README.md": "# model\n"})]
    story.git(os.path.dirname(story.work), "clone", "-q", story.upstream, story.work)
    with open(os.path.join(story.work, "notes.txt"), "w") as handle:
        handle.write("my own notes: try a bigger batch\n")
    bench = ["bench", "local", "--repo", story.work, "--cwd", story.work,
             "--cmd", f"{sys.executable} bench.py", "--metric", METRIC, "--repeat", REPEAT,
             "--python", sys.executable]
    story.envsnap("bench good", *bench, "--label", "good", keep="bench-good.txt")
    pulled = [("README: how to run", {"README.md": "# model\n\n    python bench.py\n"}),
              ("model: a second bf16 pass for accuracy", files(size, size["extra"], seconds)),
              ("docs: note the TF32 setting", {"NOTES.md": "TF32 is on for fp32 matmuls.\n"}),
              ("README: fix a typo", {"README.md": "# model\n\nRun: python bench.py\n"})]
    facts["pulled"] = [[story.commit(story.upstream, subject, changed), subject]
                       for subject, changed in pulled]
    story.git(story.work, "pull", "-q", "--ff-only")
    story.env.update(ENV_CAUSE)
    story.envsnap("bench bad", *bench, "--label", "bad", keep="bench-bad.txt")
    before = checkout_state(story)
    story.envsnap("explain", "explain", "good", "bad", "--cwd", story.work,
                  "--cmd", f"{sys.executable} bench.py", "--metric", METRIC,
                  "--repeat", REPEAT, "--yes", keep="explain.txt")
    facts["checkout"] = {"before": before, "after": checkout_state(story)}
    return facts


def main(out: str) -> None:
    scratch = tempfile.mkdtemp(prefix="explain-story-")
    name = "h200-explain"
    story = Story(os.path.join(scratch, name), scratch)
    story.env.pop("PYTHONDONTWRITEBYTECODE", None)   # bytecode written, as users have it
    story.env.pop("NVIDIA_TF32_OVERRIDE", None)
    if DRY:
        story.env["STORY_DRY_RUN"] = "1"
    try:
        story.write_json("story.json", play(story))
    finally:
        story.write_json("log.json", story.log)
        with tarfile.open(os.path.join(out, "explain-story.tar.gz"), "w:gz") as tar:
            tar.add(story.folder, arcname=name)
    for part in ("explain.txt", "story.json"):
        path = os.path.join(story.folder, part)
        if os.path.exists(path):
            with open(path) as handle:
                print(f"==== {part}\n{handle.read()[-4000:]}")
    print(f"ROOT {ROOT}")


if __name__ == "__main__":
    main(sys.argv[1])
