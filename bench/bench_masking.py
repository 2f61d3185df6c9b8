"""Secret masking on the corpus (tests/data/secrets/corpus.json): recall, false positives, cost.

    python bench/bench_masking.py [--mb 5] [--runs 3] [--no-capture]

- recall: planted secrets that no longer show after masking, by channel and overall, each
  channel masked the way the agent masks it (a patch by its files, a file by its name, a
  source as code, env by name and value, argv flag by flag, free text);
- false positives: benign look-alikes (SHAs, digests, UUIDs, base64 of text, versions,
  package names, paths) that did not survive as they were;
- cost: seconds of masking per MB of patch text, on a patch of --mb MB (the corpus files and
  envsnap's own sources, changed), against a real `envsnap capture local` of a repository
  holding that same patch (median of --runs); the target is at most 10% of the capture.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from envsnap.agent import redact  # noqa: E402

CORPUS = ROOT / "tests" / "data" / "secrets" / "corpus.json"


def as_patch(files: dict[str, str]) -> str:
    """Every file added whole, as `git diff` shows a new file."""
    parts = []
    for path, text in files.items():
        lines = text.splitlines()
        parts.append(f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n"
                     f"+++ b/{path}\n@@ -0,0 +1,{len(lines)} @@\n" +
                     "".join(f"+{line}\n" for line in lines))
    return "".join(parts)


def masked_channels(channels: dict[str, Any]) -> dict[str, str]:
    """Each channel's text as the agent returns it."""
    shown = {
        "patch": redact.redact_patch(as_patch(channels["tracked"])),
        "untracked": "\n".join(redact.redact_file(text, path)
                               for path, text in channels["untracked"].items()),
        "stash": redact.redact_patch(as_patch(channels["stash"])),
        "subject": "\n".join(map(redact.redact_text, channels["subjects"])),
        "reflog": "\n".join(map(redact.redact_text, channels["reflog"])),
        "remote": "\n".join(map(redact.redact_text, channels["remotes"].values())),
        "worker_argv": "\n".join(redact.redact_argv(["python", *channels["worker_argv"]])),
        "sitecustomize": redact.redact_code(channels["sitecustomize"]),
        "pth": redact.redact_code(channels["pth"]),
        "bench_cmd": redact.redact_text(channels["bench_cmd"]),
        "bench_output": redact.redact_text(channels["bench_output"]),
        "error_message": redact.redact_text(f"not a git repository: {channels['missing_repo']}"),
    }
    for channel in ("worker_env", "shell_env"):
        shown[channel] = "\n".join(f"{redact.redact_text(name)}="
                                   f"{redact.redact_env_value(name, value)}"
                                   for name, value in channels[channel].items())
    return shown


def quality(corpus: dict[str, Any]) -> dict[str, Any]:
    shown = masked_channels(corpus["channels"])
    everything = "\n".join(shown.values())
    by_channel: dict[str, list[int]] = {}
    leaked = []
    for entry in corpus["planted"]:
        found = entry["value"] in shown[entry["channel"]] or entry["value"] in everything
        counts = by_channel.setdefault(entry["channel"], [0, 0])
        counts[0] += not found
        counts[1] += 1
        if found:
            leaked.append(f"{entry['channel']}/{entry['kind']}")
    lost = [f"{entry['channel']}/{entry['kind']}: {entry['value']}"
            for entry in corpus["benign"] if entry["value"] not in everything]
    masked = sum(masked for masked, _ in by_channel.values())
    return {"planted": len(corpus["planted"]), "masked": masked,
            "recall": masked / len(corpus["planted"]), "leaked": leaked,
            "by_channel": by_channel, "benign": len(corpus["benign"]), "benign_lost": lost,
            "false_positive_rate": len(lost) / len(corpus["benign"])}


def big_patch(corpus: dict[str, Any], megabytes: float) -> dict[str, str]:
    """Files whose addition makes a patch of about `megabytes`: envsnap's sources and the
    corpus files, renamed copy after copy."""
    sources = {str(path.relative_to(ROOT)): path.read_text()
               for path in sorted((ROOT / "envsnap").rglob("*.py"))}
    sources.update(corpus["channels"]["tracked"])
    files: dict[str, str] = {}
    size, copy = 0, 0
    while size < megabytes * 1e6:
        for path, text in sources.items():
            if size >= megabytes * 1e6:
                break
            files[f"copy{copy}/{path}"] = text
            size += len(text) + text.count("\n") + 80
        copy += 1
    return files


def masking_seconds(patch: str, runs: int) -> float:
    times = []
    for _ in range(runs):
        redact.redact_patch.cache_clear()   # each run masks anew
        started = time.process_time()
        redact.redact_patch(patch)
        times.append(time.process_time() - started)
    return statistics.median(times)


def capture_seconds(files: dict[str, str], runs: int) -> float:
    """`envsnap capture local` of a repository whose uncommitted patch adds `files`."""
    with tempfile.TemporaryDirectory() as temp:
        repo, home = Path(temp, "repo"), Path(temp, "home")
        home.mkdir()
        env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
               "XDG_CACHE_HOME": str(home / ".cache"), "PYTHONPATH": str(ROOT),
               "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@x", "GIT_COMMITTER_NAME": "b",
               "GIT_COMMITTER_EMAIL": "b@x"}
        subprocess.run(["git", "init", "-q", str(repo)], check=True, env=env)
        subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "init"], cwd=repo,
                       check=True, env=env)
        for path, text in files.items():
            target = repo / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        subprocess.run(["git", "add", "-A"], cwd=repo, check=True, env=env)
        times = []
        for run in range(runs + 1):   # the first run caches the agent on the host
            started = time.perf_counter()
            subprocess.run([sys.executable, "-m", "envsnap", "capture", "local", "--repo",
                            str(repo), "--label", f"m{run}", "--max-patch-bytes", "64000000",
                            "--store", str(Path(temp, "store"))], check=True, env=env,
                           capture_output=True)
            if run:
                times.append(time.perf_counter() - started)
        return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=float, default=5.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-capture", action="store_true", help="skip the capture timing")
    args = parser.parse_args()
    redact.emit_digests()   # as in the agent
    corpus = json.loads(CORPUS.read_text())
    found = quality(corpus)
    print(f"recall: {found['masked']}/{found['planted']} planted secrets masked "
          f"({found['recall']:.1%})")
    for channel, (masked, total) in sorted(found["by_channel"].items()):
        print(f"  {channel:14} {masked}/{total}")
    for leak in found["leaked"]:
        print(f"  LEAKED {leak}")
    print(f"false positives: {len(found['benign_lost'])}/{found['benign']} benign values "
          f"changed ({found['false_positive_rate']:.1%})")
    for lost in found["benign_lost"]:
        print(f"  CHANGED {lost}")
    files = big_patch(corpus, args.mb)
    patch = as_patch(files)
    megabytes = len(patch.encode()) / 1e6
    seconds = masking_seconds(patch, args.runs)
    print(f"masking: {seconds:.3f} s CPU for a {megabytes:.1f} MB patch "
          f"({seconds / megabytes * 1000:.0f} ms per MB)")
    if not args.no_capture:
        capture = capture_seconds(files, args.runs)
        print(f"capture local of that patch: {capture:.2f} s; masking is "
              f"{seconds / capture:.1%} of it (target: at most 10%)")


if __name__ == "__main__":
    main()
