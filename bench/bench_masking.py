"""Secret masking on the corpora (tests/data/secrets*/corpus.json): recall, false positives, cost.

    python bench/bench_masking.py [--mb 5] [--runs 3] [--no-capture] [--baseline REV]
                                  [--baseline-source FILE] [--baseline-tree DIR]

- recall: planted secrets that no longer show after masking, by channel and overall, each
  channel masked the way the agent masks it (a patch by its files, a file by its name, a
  source as code, env by name and value, argv flag by flag, free text);
- false positives: benign look-alikes (SHAs, digests, UUIDs, base64 of text, versions,
  package names, paths) that did not survive as they were;
- cost: seconds of masking per MB of patch text, on a patch of --mb MB (the corpus files and
  envsnap's own sources, changed), against a real `envsnap capture local` of a repository
  holding that same patch (median of --runs); the target is at most 10% of the capture;
- against a baseline: the detector of commit --baseline (read from git, not imported from
  the work tree; or from --baseline-source, a copy of it, where there is no git), on the
  same patch in the same run, the two timed in turn (median of
  --runs each): the cost per MB of both and their ratio (target: at most 1.2x), the recall
  of the baseline on each corpus, and the time to import each (its own, in a fresh
  interpreter, bytecode cached, the least of 15);
- against another checkout (--baseline-tree, e.g. the main branch's): its envsnap/agent
  imported under another package name, timed in turn with this tree's on the same patch
  and on a secret-dense text of 400 KB (the vendor corpus's files, repeated): the ratio of
  their costs per MB on each (target: at most 1.3x).
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

import ledger

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from envsnap.agent import redact as current  # noqa: E402

Detector = types.ModuleType   # envsnap/agent/redact.py, of this tree or of the baseline

CORPORA = [ROOT / "tests" / "data" / "secrets" / "corpus.json",
           ROOT / "tests" / "data" / "secrets-shapes" / "corpus.json",
           ROOT / "tests" / "data" / "secrets-vendors" / "corpus.json",
           ROOT / "tests" / "data" / "secrets-names" / "corpus.json"]
DENSE_BYTES = 400_000
# main when the second corpus was added: the detector before it knew webhooks, mail keys,
# .netrc/.pgpass, base64 keys and command lines
BASELINE = "e4c9853f945868151a3a60fa67664593a081ebc0"


def as_patch(files: dict[str, str]) -> str:
    """Every file added whole, as `git diff` shows a new file."""
    parts = []
    for path, text in files.items():
        lines = text.splitlines()
        parts.append(f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n"
                     f"+++ b/{path}\n@@ -0,0 +1,{len(lines)} @@\n" +
                     "".join(f"+{line}\n" for line in lines))
    return "".join(parts)


def masked_channels(redact: Detector, channels: dict[str, Any]) -> dict[str, str]:
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
        "command_argv": "\n".join("\n".join(redact.redact_argv(argv))
                                  for argv in channels.get("commands", [])),
        "crash_log": "\n".join(redact.redact_argv(channels.get("crash_argv", []))),
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


def quality(redact: Detector, corpus: dict[str, Any]) -> dict[str, Any]:
    """Planted values that show anywhere in what the detector returns (a file's value is
    planted under env_file or config_file, carried by the patch and the untracked files)."""
    everything = "\n".join(masked_channels(redact, corpus["channels"]).values())
    by_channel: dict[str, list[int]] = {}
    leaked = []
    for entry in corpus["planted"]:
        found = entry["value"] in everything
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


def masking_seconds(detectors: list[Detector], patch: str, runs: int,
                    how: str = "redact_patch") -> list[list[float]]:
    """CPU seconds to mask `patch`, `runs` times, for each detector: timed in turn, run
    after run, so that a busy machine slows both alike (and which goes first alternates)."""
    times: list[list[float]] = [[] for _ in detectors]
    for run in range(runs):
        pairs = list(zip(detectors, times))
        for redact, taken in pairs[::-1] if run % 2 else pairs:
            redact.redact_patch.cache_clear()   # each run masks anew
            gc.collect()   # as timeit: no collection of the other's garbage inside a run
            gc.disable()
            started = time.process_time()
            getattr(redact, how)(patch)
            taken.append(time.process_time() - started)
            gc.enable()
    return times


def tree_detector(tree: Path, name: str) -> Detector:
    """The detector of another checkout: its envsnap/agent imported as package `name`, so
    that its relative imports (util, vendors) are its own."""
    import importlib
    import importlib.util

    agent = tree / "envsnap" / "agent"
    spec = importlib.util.spec_from_file_location(name, agent / "__init__.py",
                                                  submodule_search_locations=[str(agent)])
    assert spec is not None and spec.loader is not None
    package = importlib.util.module_from_spec(spec)
    sys.modules[name] = package
    spec.loader.exec_module(package)
    return importlib.import_module(f"{name}.redact")


def dense_text(corpus: dict[str, Any], size: int) -> str:
    """A text of `size` bytes thick with secrets: a corpus's files and bench output, over
    and over."""
    channels = corpus["channels"]
    unit = "\n".join([*channels["tracked"].values(), *channels["untracked"].values(),
                      channels["bench_output"]])
    return (unit * (size // len(unit) + 1))[:size]


def compare_trees(tree: Path, patch: str, corpus: dict[str, Any], runs: int) -> None:
    """This tree's detector against `tree`'s, timed in turn, on the patch and on a
    secret-dense text: cost per MB and ratio, in the ledger."""
    other = tree_detector(tree, "baseline_tree_agent")
    other.emit_digests()
    label = f"the detector of {tree}"
    for what, text, how in (("ordinary patch", patch, "redact_patch"),
                            ("secret-dense text", dense_text(corpus, DENSE_BYTES), "redact_text")):
        megabytes = len(text.encode()) / 1e6
        now, then = masking_seconds([current, other], text, runs, how)
        ours, theirs = statistics.median(now) / megabytes, statistics.median(then) / megabytes
        print(f"masking, {what} ({megabytes:.1f} MB): {ours * 1000:.1f} ms per MB; {label}: "
              f"{theirs * 1000:.1f} ms per MB: {ours / theirs:.2f}x (target: at most 1.3x); "
              f"least disturbed runs {min(now) / min(then):.2f}x")
        ledger.record(__file__, f"masking, CPU per MB, {what}", ours * 1000, "ms",
                      f"{label}: {theirs * 1000:.1f} ms")
        ledger.record(__file__, f"masking / the tree before, {what}", ours / theirs, "x",
                      f"{label}, same run, median of {runs}", "<= 1.3")


def baseline_source(revision: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), "show", f"{revision}:envsnap/agent/redact.py"],
                          check=True, capture_output=True, text=True).stdout


def load_detector(source: str, name: str) -> Detector:
    """The detector from its source text (it imports only the standard library)."""
    module = types.ModuleType(name)
    sys.modules[name] = module   # dataclasses and typing look their module up
    exec(compile(source, f"{name}.py", "exec"), module.__dict__)
    return module


def import_seconds(sources: list[str], repeats: int = 15) -> list[float]:
    """Seconds each source takes to import as a module of its own (-X importtime's self
    time: not the standard library it imports), in a fresh interpreter, bytecode cached (as
    an installed envsnap's is); the least of `repeats`, taken in turn."""
    times: list[list[float]] = [[] for _ in sources]
    with tempfile.TemporaryDirectory() as folder:
        for number, source in enumerate(sources):
            Path(folder, f"detector{number}.py").write_text(source)
        subprocess.run([sys.executable, "-m", "compileall", "-q", folder], check=True)
        for _ in range(repeats):
            for number, taken in enumerate(times):
                done = subprocess.run([sys.executable, "-X", "importtime", "-c",
                                       f"import detector{number}"], cwd=folder, check=True,
                                      capture_output=True, text=True)
                line = next(line for line in done.stderr.splitlines()
                            if line.endswith(f" detector{number}"))
                taken.append(int(line.split("|")[0].split(":")[1]) / 1e6)
    return [min(taken) for taken in times]


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


def report_quality(name: str, found: dict[str, Any], detail: bool) -> None:
    print(f"{name}: {found['masked']}/{found['planted']} planted secrets masked "
          f"({found['recall']:.1%}), {len(found['benign_lost'])}/{found['benign']} "
          f"look-alikes changed ({found['false_positive_rate']:.1%})")
    if not detail:
        return
    for channel, (masked, total) in sorted(found["by_channel"].items()):
        print(f"  {channel:14} {masked}/{total}")
    for leak in found["leaked"]:
        print(f"  LEAKED {leak}")
    for lost in found["benign_lost"]:
        print(f"  CHANGED {lost}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=float, default=5.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-capture", action="store_true", help="skip the capture timing")
    parser.add_argument("--baseline", default=BASELINE,
                        help="the commit whose detector to compare with (default: %(default)s)")
    parser.add_argument("--baseline-source", type=Path,
                        help="the baseline detector's source file (instead of --baseline)")
    parser.add_argument("--baseline-tree", type=Path,
                        help="a checkout (the main branch's) to time this tree against, only")
    args = parser.parse_args()
    if args.baseline_tree:
        corpora = [json.loads(path.read_text()) for path in CORPORA]
        for path, corpus in zip(CORPORA, corpora):
            report_quality(f"{path.parent.name}, this tree", quality(current, corpus),
                           detail=False)
        current.emit_digests()
        compare_trees(args.baseline_tree, as_patch(big_patch(corpora[0], args.mb)),
                      corpora[2], args.runs)
        return
    old_source = args.baseline_source.read_text() if args.baseline_source else \
        baseline_source(args.baseline)
    baseline = load_detector(old_source, "baseline_redact")
    for redact in (current, baseline):
        redact.emit_digests()   # as in the agent
    corpora = [json.loads(path.read_text()) for path in CORPORA]
    for path, corpus in zip(CORPORA, corpora):
        where = path.parent.name
        report_quality(f"{where}, this tree", quality(current, corpus), detail=True)
        report_quality(f"{where}, baseline {args.baseline[:9]}", quality(baseline, corpus),
                       detail=False)
    files = big_patch(corpora[0], args.mb)
    patch = as_patch(files)
    megabytes = len(patch.encode()) / 1e6
    now, then = masking_seconds([current, baseline], patch, args.runs)
    seconds, before = statistics.median(now), statistics.median(then)
    print(f"masking: {seconds:.3f} s CPU for a {megabytes:.1f} MB patch "
          f"({seconds / megabytes * 1000:.1f} ms per MB); baseline "
          f"{before / megabytes * 1000:.1f} ms per MB: {seconds / before:.2f}x "
          f"(target: at most 1.2x); least disturbed runs: {min(now) / megabytes * 1000:.1f} "
          f"and {min(then) / megabytes * 1000:.1f} ms per MB, {min(now) / min(then):.2f}x")
    ledger.record(__file__, "masking, CPU per MB", seconds / megabytes * 1000, "ms",
                  f"the detector of {args.baseline[:9]}: {before / megabytes * 1000:.1f} ms")
    ledger.record(__file__, "masking / the detector before", seconds / before, "x",
                  f"the detector of {args.baseline[:9]}, same run", "<= 1.2")
    new_import, old_import = import_seconds([(ROOT / "envsnap" / "agent" / "redact.py")
                                             .read_text(), old_source])
    print(f"import of the detector (its own time): {new_import * 1000:.1f} ms; baseline "
          f"{old_import * 1000:.1f} ms")
    ledger.record(__file__, "import of the detector", new_import * 1000, "ms",
                  f"the detector of {args.baseline[:9]}: {old_import * 1000:.1f} ms")
    if not args.no_capture:
        capture = capture_seconds(files, args.runs)
        print(f"capture local of that patch: {capture:.2f} s; masking is "
              f"{seconds / capture:.1%} of it (target: at most 10%)")
        ledger.record(__file__, "masking / capture of the same patch", seconds / capture * 100,
                      "%", f"envsnap capture local of the patch {capture:.2f} s", "<= 10%")


if __name__ == "__main__":
    main()
