"""The secret corpus (tests/data/secrets/corpus.json, made by make_corpus.py) through the CLI.

A host carries every planted secret in every channel the agent reads: a repository's
uncommitted patch, untracked files, a stash, commit subjects, reflog messages and remote
URLs; a running worker's environment and arguments; the interpreter's sitecustomize and a
startup .pth; the capturing shell's environment (local: sshd starts a clean one); a --repo
that fails (an error message); a benchmark whose command line and output hold them. Then
capture, bench, report (md, html, json, masked and --no-mask) and --bundle run, and every
byte they wrote (the store, the reports, each member of the bundles, the home with its
agent cache, the remote login's home) is searched for every planted value: none may show.
The benign look-alikes (SHAs, digests, UUIDs, versions, package names, paths) must survive
in the snapshots: at most 1% changed.
"""
from __future__ import annotations

import html
import io
import json
import re
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from conftest import Cli, unique_marker
from helpers.gitrepos import git_env
from helpers.paths import DATA
from helpers.pythons import site_packages, venv_with_own_sitecustomize

CORPUS = json.loads((DATA / "secrets" / "corpus.json").read_text())
CHANNELS = CORPUS["channels"]
PLANTED = [entry["value"] for entry in CORPUS["planted"]]
METRIC = r"value: (\d+)"


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, env=git_env(repo.parent), check=True,
                   capture_output=True)


def write(root: Path, files: dict[str, str]) -> None:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)


def build_repo(repo: Path) -> Path:
    """Committed placeholders; a stash; commits with secrets in their subjects; reflog
    messages; remotes; then the tracked files changed and untracked files beside them."""
    repo.mkdir()
    git(repo, "init", "-q")
    write(repo, {path: "placeholder\n" for path in [*CHANNELS["tracked"], *CHANNELS["stash"]]})
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "placeholders")
    write(repo, CHANNELS["stash"])
    git(repo, "stash", "push", "-q", "-m", "wip settings")
    for subject in CHANNELS["subjects"]:
        git(repo, "commit", "-q", "--allow-empty", "-m", subject)
    for message in CHANNELS["reflog"]:
        git(repo, "update-ref", "-m", message, "HEAD", "HEAD")
    for name, url in CHANNELS["remotes"].items():
        git(repo, "remote", "add", name, url)
    write(repo, CHANNELS["tracked"])
    write(repo, CHANNELS["untracked"])
    return repo


def make_venv(folder: Path) -> str:
    """An interpreter whose sitecustomize.py and startup .pth hold secrets."""
    python = venv_with_own_sitecustomize(folder)
    site = site_packages(python)
    (site / "sitecustomize.py").write_text(CHANNELS["sitecustomize"])
    (site / "zz_settings.pth").write_text(CHANNELS["pth"])
    return str(python)


@contextmanager
def worker(marker: str) -> Iterator[None]:
    """A stand-in inference worker with secrets in its environment and arguments."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", marker,
                             *CHANNELS["worker_argv"]],
                            env={"PATH": "/usr/bin:/bin", **CHANNELS["worker_env"]})
    try:
        yield
    finally:
        proc.kill()
        proc.wait()


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


def planted_found(roots: list[Path]) -> list[str]:
    return sorted({f"{where}: {value[:12]}..." for where, text in written_texts(roots)
                   for value in PLANTED if value in text})


def benign_lost(snapshots: list[Path], over_ssh: bool) -> list[str]:
    shown = "\n".join(json.dumps(yaml.safe_load(path.read_text()), ensure_ascii=False)
                      for path in snapshots)
    return [f"{entry['channel']}/{entry['kind']}: {entry['value']}"
            for entry in CORPUS["benign"]
            if entry["value"] not in shown and not (over_ssh and entry["channel"] == "shell_env")]


def ok(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert result.returncode == 0, result.stderr
    return result


def test_the_corpus_is_big_enough() -> None:
    kinds = {entry["kind"] for entry in CORPUS["planted"]}
    assert len(PLANTED) >= 150 and len(set(PLANTED)) == len(PLANTED)
    assert len(CORPUS["benign"]) >= 300
    assert len({entry["channel"] for entry in CORPUS["planted"]}) >= 14
    assert {"github_classic", "gitlab", "huggingface", "openai", "anthropic", "aws_access_key",
            "aws_secret_key", "google_api", "stripe_live", "slack_bot", "jwt",
            "pem_private_key", "password", "high_entropy"} <= kinds


@pytest.mark.parametrize("over_ssh", [False, True], ids=["local", "ssh"])
def test_no_planted_secret_is_written_anywhere(request: pytest.FixtureRequest, cli: Cli,
                                               tmp_path: Path, over_ssh: bool) -> None:
    roots = [Path(cli.env["ENVSNAP_STORE"]), Path(cli.env["HOME"]), tmp_path / "out"]
    host = "local"
    if over_ssh:
        sshd = request.getfixturevalue("sshd")
        sshd.write_home(Path(cli.env["HOME"]))
        host = sshd.addresses[0]
        roots.append(sshd.host_home)
    else:
        cli.env.update(CHANNELS["shell_env"])
    (tmp_path / "out").mkdir()
    repo = build_repo(tmp_path / "repo")
    python = make_venv(tmp_path / "venv")
    (tmp_path / "bench_output.sh").write_text(f"cat <<'EOF'\n{CHANNELS['bench_output']}EOF\n")
    marker = unique_marker("secrets")
    common = ["--repo", str(repo), "--python", python, "--proc", marker]
    with worker(marker):
        ok(cli("capture", host, "--label", "planted", *common))
        ok(cli("bench", host, "--cmd", CHANNELS["bench_cmd"], "--metric", METRIC, "--repeat",
               "1", "--sample-interval", "0", "--cwd", str(tmp_path), "--label", "benched",
               *common))
    # a repository that cannot be read: its error message names a secret-shaped path
    broken = cli("capture", host, "--label", "broken", "--python", python,
                 "--repo", str(tmp_path / CHANNELS["missing_repo"]))
    assert broken.returncode == 3 and "no-such-repo-<secret:" in broken.stderr
    store = Path(cli.env["ENVSNAP_STORE"])
    assert (store / "broken.yaml").exists()
    snapshot = yaml.safe_load((store / "planted.yaml").read_text())
    repo_facts = snapshot["facts"]["git"]["repos"][str(repo)]
    assert repo_facts["uncommitted"]["patch"]["redacted"] and repo_facts["stashes"]
    assert any(info["cmdline"][3] == marker
               for info in snapshot["facts"]["env"]["processes"].values())
    assert "<secret:" in snapshot["facts"]["python_env"]["customize"]["sitecustomize"]["content"]
    out = tmp_path / "out"
    for label, vs in (("planted", ()), ("benched", ("--vs", "planted"))):
        for form in ("md", "html", "json"):
            for mask in ((), ("--no-mask",)):
                name = f"{label}{'-raw' if mask else ''}.{form}"
                ok(cli("report", label, *vs, "--format", form, "-o", str(out / name), *mask))
        ok(cli("report", label, *vs, "--bundle", str(out / f"{label}.tar.gz")))
        ok(cli("report", label, *vs, "--bundle", str(out / f"{label}-raw.tar.gz"), "--no-mask"))
    assert planted_found(roots) == []
    lost = benign_lost([store / "planted.yaml", store / "benched.yaml"], over_ssh)
    assert len(lost) <= 0.01 * len(CORPUS["benign"]), lost
    # the marker keeps a diff useful: the same secret, the same short keyed hash
    again = cli("capture", host, "--label", "again", "--python", python)
    shell = yaml.safe_load((store / "again.yaml").read_text())["facts"]["env"]["shell"]
    first = snapshot["facts"]["env"]["shell"]
    assert again.returncode == 0 and shell["HF_TOKEN"] == first["HF_TOKEN"]


def test_a_changed_secret_shows_as_changed_without_being_shown(cli: Cli) -> None:
    """Equal secrets, equal markers (a short hash keyed by this user's key); a new value, a
    new marker: `diff` says HF_TOKEN changed, and neither value is written or shown."""
    old, new = "hf_" + "Ab1" * 12, "hf_" + "Cd2" * 12
    for label, token in (("before", old), ("same", old), ("after", new)):
        cli.env["HF_TOKEN"] = token
        ok(cli("capture", "local", "--label", label))
    store = Path(cli.env["ENVSNAP_STORE"])
    markers = {label: yaml.safe_load((store / f"{label}.yaml").read_text())
               ["facts"]["env"]["shell"]["HF_TOKEN"] for label in ("before", "same", "after")}
    assert markers["before"] == markers["same"] != markers["after"]
    assert all(re.fullmatch(r"<secret:[0-9a-f]{8}>", marker) for marker in markers.values())
    changed = cli("diff", "before", "after")
    assert changed.returncode == 1 and "HF_TOKEN" in changed.stdout
    assert old not in changed.stdout + changed.stderr and new not in changed.stdout
    text = "".join(path.read_text() for path in store.glob("*.yaml"))
    assert old not in text and new not in text
