"""A secrets corpus (tests/data/secrets*/corpus.json) put on a host and through every output.

`run_everything` puts each channel where the agent reads it: a repository's uncommitted
patch, untracked files, a stash, commit subjects, reflog messages and remote URLs; running
workers' environment and arguments (and clients such as curl or wandb, by their argv[0]);
the interpreter's sitecustomize and a startup .pth; the capturing shell's environment
(local: sshd starts a clean one); a --repo that fails (an error message); a benchmark whose
command line and output hold them. Then capture, bench, report (md, html, json, masked and
--no-mask) and --bundle run. `planted_found` searches every byte they wrote (the store, the
reports, each member of the bundles, the home with its agent cache and crash logs, the
remote login's home), `benign_lost` the look-alikes that did not survive in the snapshots.
"""
from __future__ import annotations

import html
import io
import json
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import Cli, unique_marker

from helpers.gitrepos import git_env
from helpers.pythons import site_packages, venv_with_own_sitecustomize

METRIC = r"value: (\d+)"
SLEEP = "import time; time.sleep(300)"


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, env=git_env(repo.parent), check=True,
                   capture_output=True)


def write(root: Path, files: dict[str, str]) -> None:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)


def build_repo(repo: Path, channels: dict[str, Any]) -> Path:
    """Committed placeholders; a stash; commits with secrets in their subjects; reflog
    messages; remotes; then the tracked files changed and untracked files beside them."""
    repo.mkdir()
    git(repo, "init", "-q")
    write(repo, {path: "placeholder\n" for path in [*channels["tracked"], *channels["stash"]]})
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "placeholders")
    write(repo, channels["stash"])
    git(repo, "stash", "push", "-q", "-m", "wip settings")
    for subject in channels["subjects"]:
        git(repo, "commit", "-q", "--allow-empty", "-m", subject)
    for message in channels["reflog"]:
        git(repo, "update-ref", "-m", message, "HEAD", "HEAD")
    for name, url in channels["remotes"].items():
        git(repo, "remote", "add", name, url)
    write(repo, channels["tracked"])
    write(repo, channels["untracked"])
    return repo


def make_venv(folder: Path, channels: dict[str, Any]) -> str:
    """An interpreter whose sitecustomize.py and startup .pth hold secrets."""
    python = venv_with_own_sitecustomize(folder)   # one that runs, on Debian's python too
    site = site_packages(python)
    (site / "sitecustomize.py").write_text(channels["sitecustomize"])
    (site / "zz_settings.pth").write_text(channels["pth"])
    return str(python)


@contextmanager
def workers(marker: str, channels: dict[str, Any]) -> Iterator[None]:
    """A stand-in inference worker with secrets in its environment and arguments; and one
    process per client command line (`curl -u ...`), named by its argv[0] as the real
    client would be: a python that sleeps, its arguments after `-c CODE MARKER`."""
    argvs = [([sys.executable], channels["worker_argv"])] + \
        [([argv[0]], argv[1:]) for argv in channels.get("commands", [])]
    with ExitStack() as stack:
        for (name,), rest in argvs:
            proc = subprocess.Popen([name, "-c", SLEEP, marker, *rest], executable=sys.executable,
                                    env={"PATH": "/usr/bin:/bin", **channels["worker_env"]})
            stack.callback(proc.wait)
            stack.callback(proc.kill)
        yield


def written_texts(roots: list[Path]) -> Iterator[tuple[str, str]]:
    """(where, text) for every file under `roots`, tar members one by one, YAML and JSON
    also as parsed (a long string may be folded over lines), HTML also unescaped."""
    for root in roots:
        for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
            data = path.read_bytes()
            yield str(path), data.decode("utf-8", "replace")
            if path.name.endswith((".tar.gz", ".tgz", ".tar")):
                with tarfile.open(fileobj=io.BytesIO(data)) as tar:
                    for member in tar.getmembers():
                        extracted = tar.extractfile(member)
                        if extracted is not None:
                            yield from variants(f"{path}:{member.name}", member.name,
                                                extracted.read().decode("utf-8", "replace"))
            else:
                yield from variants(str(path), path.name, data.decode("utf-8", "replace"))


def variants(where: str, name: str, text: str) -> Iterator[tuple[str, str]]:
    yield where, text
    if name.endswith((".yaml", ".yml", ".json")):
        try:
            yield where + " (parsed)", json.dumps(yaml.safe_load(text), ensure_ascii=False)
        except yaml.YAMLError:
            pass
    if name.endswith(".html"):
        yield where + " (unescaped)", html.unescape(text)


def planted_found(roots: list[Path], planted: list[str]) -> list[str]:
    return sorted({f"{where}: {value[:12]}..." for where, text in written_texts(roots)
                   for value in planted if value in text})


def strings(value: Any) -> Iterator[str]:
    """Every string in a parsed document, keys too."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from strings(key)
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def benign_lost(snapshots: list[Path], corpus: dict[str, Any], over_ssh: bool) -> list[str]:
    shown = "\n".join(text for path in snapshots
                      for text in strings(yaml.safe_load(path.read_text())))
    return [f"{entry['channel']}/{entry['kind']}: {entry['value']}"
            for entry in corpus["benign"]
            if entry["value"] not in shown and not (over_ssh and entry["channel"] == "shell_env")]


def ok(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert result.returncode == 0, result.stderr
    return result


@dataclass
class Ran:
    roots: list[Path]   # every folder written to
    host: str
    python: str         # the interpreter with the sitecustomize and .pth
    repo: Path
    marker: str         # the workers' --proc marker


def run_everything(request: pytest.FixtureRequest, cli: Cli, tmp_path: Path,
                   channels: dict[str, Any], over_ssh: bool) -> Ran:
    """Every channel on the host (local, or the test sshd), every command and output."""
    roots = [Path(cli.env["ENVSNAP_STORE"]), Path(cli.env["HOME"]), tmp_path / "out"]
    host = "local"
    if over_ssh:
        sshd = request.getfixturevalue("sshd")
        sshd.write_home(Path(cli.env["HOME"]))
        host = sshd.addresses[0]
        roots.append(sshd.host_home)
    else:
        cli.env.update(channels["shell_env"])
    (tmp_path / "out").mkdir()
    repo = build_repo(tmp_path / "repo", channels)
    python = make_venv(tmp_path / "venv", channels)
    (tmp_path / "bench_output.sh").write_text(f"cat <<'EOF'\n{channels['bench_output']}EOF\n")
    marker = unique_marker("secrets")
    common = ["--repo", str(repo), "--python", python, "--proc", marker]
    with workers(marker, channels):
        ok(cli("capture", host, "--label", "planted", *common))
        ok(cli("bench", host, "--cmd", channels["bench_cmd"], "--metric", METRIC, "--repeat",
               "1", "--sample-interval", "0", "--cwd", str(tmp_path), "--label", "benched",
               *common))
    # a repository that cannot be read: its error message names a secret-shaped path
    broken = cli("capture", host, "--label", "broken", "--python", python,
                 "--repo", str(tmp_path / channels["missing_repo"]))
    assert broken.returncode == 3 and "no-such-repo-<secret:" in broken.stderr
    out = tmp_path / "out"
    for label, vs in (("planted", ()), ("benched", ("--vs", "planted"))):
        for form in ("md", "html", "json"):
            for mask in ((), ("--no-mask",)):
                name = f"{label}{'-raw' if mask else ''}.{form}"
                ok(cli("report", label, *vs, "--format", form, "-o", str(out / name), *mask))
        ok(cli("report", label, *vs, "--bundle", str(out / f"{label}.tar.gz")))
        ok(cli("report", label, *vs, "--bundle", str(out / f"{label}-raw.tar.gz"), "--no-mask"))
    return Ran(roots, host, python, repo, marker)
