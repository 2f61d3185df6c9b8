"""`envsnap diff` end to end: the real CLI in a subprocess, on snapshots made by real local
captures of real git repositories (an upstream pull, a worker process losing NCCL_PROTO),
and on snapshot files edited to stand for what one machine cannot produce (another host,
a failed collector, a newer schema)."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from conftest import Cli, sleeping_worker, unique_marker
from helpers.diffdata import edit_file
from helpers.folded import joined, paragraph, words
from helpers.gitrepos import PYNCCL, Story, git_env, init
from helpers.paths import ROOT

MARKER = unique_marker("diff-test-worker")


@pytest.fixture
def dcli(cli: Cli) -> Cli:
    """The CLI of this checkout, whatever an installed envsnap points at."""
    cli.env["PYTHONPATH"] = str(ROOT)
    cli.env.pop("NCCL_PROTO", None)
    return cli


def worker(env: dict[str, str]) -> AbstractContextManager[subprocess.Popen[bytes]]:
    return sleeping_worker(MARKER, env)


def capture(cli: Cli, label: str, *args: str) -> Path:
    result = cli("capture", "local", "--label", label, *args)
    assert result.returncode == 0, result.stderr
    return Path(cli.env["ENVSNAP_STORE"]) / f"{label}.yaml"


def verdict_of(stdout: str) -> str:
    """The verdict's paragraph, as one sentence (the text form folds it to 80 columns)."""
    return joined(paragraph(stdout, 1))


# ---- the STORY incident (docs/STORY.md) ------------------------------------------------------

@pytest.fixture
def story_store(dcli: Cli, tmp_path: Path) -> tuple[Cli, Story, int]:
    """good: a clone and a worker with NCCL_PROTO=LL; bad: nine commits pulled, one on the
    NCCL path, and the worker restarted without it (the shell still has it)."""
    story = Story(tmp_path / "git")
    repo = str(story.checkout.path)
    dcli.env["NCCL_PROTO"] = "LL"
    with worker({"NCCL_PROTO": "LL"}):
        capture(dcli, "good", "--repo", repo, "--proc", MARKER)
    story.upstream_moves()
    story.pull()
    with worker({}) as restarted:
        capture(dcli, "bad", "--repo", repo, "--proc", MARKER)
    return dcli, story, restarted.pid


def test_diff_explains_the_pull_and_the_lost_worker_env(story_store: tuple[Cli, Story, int]
                                                         ) -> None:
    cli, story, pid = story_store
    result = cli("diff", "good", "bad")
    assert result.returncode == 1, result.stderr
    verdict = verdict_of(result.stdout)
    repo = story.checkout.path
    assert verdict.startswith(f"code moved: 9 commits pulled into {repo} (pull origin main: "
                              "Fast-forward), 1 on a hot path: ")
    assert f"Fix PCG MoE Error (touches {PYNCCL}: communication)" in verdict
    assert f"NCCL_PROTO=LL missing in worker {pid} (still set in the shell)" in verdict
    assert verdict.endswith("nothing else that affects performance changed.")
    assert f"{PYNCCL}" in result.stdout  # the hot commit's files are listed
    assert result.stdout.rstrip().splitlines()[-1].startswith("unchanged: ")
    assert "\033[" not in result.stdout  # no colour when stdout is not a terminal


def test_diff_json_is_a_versioned_envelope(story_store: tuple[Cli, Story, int]) -> None:
    cli, story, pid = story_store
    result = cli("diff", "good", "bad", "--json")
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert report["envsnap_diff"] == 1 and list(report) == sorted(report)
    assert report["a"]["label"] == "good" and report["b"]["label"] == "bad"
    head, lost = report["findings"][:2]
    assert head["path"] == ["repos", str(story.checkout.path), "head"]
    assert len(head["detail"]["added"]) == 9
    assert [c["subject"] for c in head["detail"]["added"] if c["hot"]] == ["Fix PCG MoE Error"]
    assert lost["kind"] == "removed" and lost["detail"]["pid_after"] == str(pid)
    assert [f["rank"] for f in report["findings"]] == sorted(
        (f["rank"] for f in report["findings"]), reverse=True)


def test_diff_markdown_folds_the_commits(story_store: tuple[Cli, Story, int]) -> None:
    cli, _, _ = story_store
    result = cli("diff", "good", "bad", "--markdown")
    assert result.returncode == 1, result.stderr
    assert result.stdout.startswith("## envsnap diff good")
    assert "| rank | section | path | change | why |" in result.stdout
    assert "<summary>git repos[" in result.stdout and "</details>" in result.stdout


def test_section_filter(story_store: tuple[Cli, Story, int]) -> None:
    cli, _, _ = story_store
    only_env = json.loads(cli("diff", "good", "bad", "--json", "--section", "env").stdout)
    assert {f["section"] for f in only_env["findings"]} == {"env"}
    bad = cli("diff", "good", "bad", "--section", "gpus")
    assert bad.returncode == 2 and "unknown section gpus" in bad.stderr


# ---- no drift, bad inputs ----------------------------------------------------------------

def test_self_diff_is_clean(dcli: Cli) -> None:
    path = capture(dcli, "one")
    for other in ("one", str(path)):
        result = dcli("diff", "one", other)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "no drift" in verdict_of(result.stdout)


def modules_a_diff_loads(cli: Cli) -> set[str]:
    """The modules a real process has loaded once `envsnap diff` of two example snapshots
    (a pull, a patch, a worker's env: most of the diff's code runs) has printed."""
    examples = ROOT / "snapshots" / "examples"
    probe = ("import sys\nfrom envsnap.cli import main as cli\n"
             f"code = cli.main(['diff', {str(examples / 'story-good.yaml')!r}, "
             f"{str(examples / 'story-bad.yaml')!r}])\n"
             "sys.stderr.write(' '.join(sorted(sys.modules)))\n"
             "sys.exit(code)")
    result = subprocess.run([sys.executable, "-c", probe], env=cli.env, capture_output=True,
                            text=True)
    assert result.returncode == 1, result.stderr
    return set(result.stderr.split())


def test_diff_loads_no_capture_bench_or_ssh_code(dcli: Cli) -> None:
    # Building the parser happens for every command: a default read from capture, bench or
    # bisect once made `envsnap diff` import them all, tripling its start-up time.
    loaded = modules_a_diff_loads(dcli)
    assert "envsnap.diff.compare" in loaded
    heavy = {"envsnap.hosts.capture", "envsnap.hosts.transport", "envsnap.hosts.payload",
             "envsnap.bench.run", "envsnap.bisect.run", "envsnap.report.build",
             "envsnap.playbook.run", "fabric", "paramiko", "concurrent.futures"}
    assert loaded & heavy == set()


def test_diff_loads_no_dataclasses(dcli: Cli) -> None:
    # dataclasses imports inspect (and with it ast, dis, tokenize): about 9 ms, and each
    # class built another half; the diff's records are NamedTuples, so start-up stays near
    # python's own load of the two files (bench/bench_diff.py).
    loaded = modules_a_diff_loads(dcli)
    assert "envsnap.diff.render_text" in loaded
    assert loaded & {"dataclasses", "inspect"} == set()


def test_unknown_label_is_a_usage_error(dcli: Cli) -> None:
    capture(dcli, "one")
    result = dcli("diff", "one", "nope")
    assert result.returncode == 2
    assert "no snapshot labelled 'nope'" in result.stderr and result.stdout == ""


@pytest.mark.parametrize("content, message", [
    ("hello: world\n", "not an envsnap snapshot"),
    ("schema: 1\nfacts: [unclosed\n", "corrupt snapshot"),
    ("schema: 99\nmeta: {}\nfacts: {}\n", "snapshot schema 99 is newer than this envsnap"),
])
def test_invalid_snapshots_exit_4(dcli: Cli, tmp_path: Path, content: str, message: str) -> None:
    good = capture(dcli, "one")
    before = good.read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text(content)
    result = dcli("diff", "one", str(bad))
    assert result.returncode == 4 and message in result.stderr
    assert good.read_text() == before and bad.read_text() == content  # nothing touched


def test_a_snapshot_edited_by_hand_is_still_compared(dcli: Cli, tmp_path: Path) -> None:
    # Someone redacts a snapshot in an editor before attaching it: its digests go stale.
    good = capture(dcli, "one")
    text = good.read_text()
    hostname = re.search(r"^    hostname: (.+)$", text, re.M)
    assert hostname is not None
    edited = tmp_path / "edited.yaml"
    edited.write_text(text.replace(hostname.group(0), "    hostname: redacted-host"))
    result = dcli("diff", "one", str(edited))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "redacted-host" in result.stdout
    assert "system differs although both recorded digests match" in words(result.stdout)


def test_one_change_on_eight_gpus_is_one_finding(dcli: Cli, tmp_path: Path) -> None:
    good = ROOT / "snapshots" / "examples" / "story-good.yaml"

    def narrow_links(document: dict) -> None:
        for record in document["facts"]["nvidia"]["gpus"].values():
            record["pcie_width_current"] = 8
    bad = edit_file(good, narrow_links, tmp_path / "narrow.yaml")
    result = dcli("diff", str(good), str(bad), "--json")
    assert result.returncode == 1, result.stderr
    (finding,) = json.loads(result.stdout)["findings"]
    assert finding["where"] == "gpus[0-7 (all 8)].pcie_width_current"
    assert len(finding["detail"]["gpus"]) == 8 and finding["after"] == 8
    assert finding["why"].startswith("GPUs 0-7 (all 8) PCIe link Gen5 x8")


def test_truncated_snapshot_exits_4(dcli: Cli, tmp_path: Path) -> None:
    good = capture(dcli, "one")
    text = good.read_text()
    cut = tmp_path / "cut.yaml"
    cut.write_text(text[:len(text) // 3])
    result = dcli("diff", "one", str(cut))
    assert result.returncode == 4, result.stdout
    assert str(cut) in result.stderr


def test_two_hosts_are_compared_and_the_verdict_says_so_first(dcli: Cli, tmp_path: Path
                                                              ) -> None:
    good = capture(dcli, "one")
    other = edit_file(good, lambda d: d["facts"]["system"].update(hostname="node-b",
                                                                  boot_id="other"),
                      tmp_path / "other.yaml")
    result = dcli("diff", "one", str(other))
    assert result.returncode == 1
    assert verdict_of(result.stdout).startswith("different hosts: one is ")
    assert f"{other} is node-b" in verdict_of(result.stdout)


def test_failed_collector_is_not_captured_not_removed(dcli: Cli, tmp_path: Path) -> None:
    good = capture(dcli, "one")

    def fail(document: dict) -> None:
        document["meta"]["collectors"]["python_env"]["error"] = "timed out after 20s"
        document["facts"]["python_env"] = {}
    failed = edit_file(good, fail, tmp_path / "failed.yaml")
    for args in (("one", str(failed)), (str(failed), "one")):
        result = dcli("diff", *args, "--json")
        assert result.returncode == 1
        findings = json.loads(result.stdout)["findings"]
        assert [(f["section"], f["kind"]) for f in findings] == [("python_env", "not_captured")]
        assert "python_env not captured in" in findings[0]["why"]
        assert "timed out after 20s" in findings[0]["why"]


# ---- patches: binary, not UTF-8, large -----------------------------------------------------

@pytest.fixture
def repo(tmp_path: Path) -> Path:
    home = tmp_path / "githome"
    home.mkdir()
    checkout = init(tmp_path / "work", git_env(home))
    checkout.commit("base", {"model.bin": bytes(range(256)) * 8, "latin.txt": "caf\xe9\n",
                             "kernel.py": "X = 1\n"})
    return checkout.path


def test_binary_and_non_utf8_patches_are_never_dumped(dcli: Cli, repo: Path) -> None:
    capture(dcli, "good", "--repo", str(repo))
    (repo / "model.bin").write_bytes(bytes(reversed(range(256))) * 8)
    (repo / "latin.txt").write_bytes("na\xefve caf\xe9\n".encode("latin-1"))
    capture(dcli, "bad", "--repo", str(repo))
    stored = (Path(dcli.env["ENVSNAP_STORE"]) / "bad.yaml").read_text()
    assert "base64" in stored  # the patch is not UTF-8: kept as base64 in the snapshot
    for args in ((), ("--all",), ("--json", "--all"), ("--markdown", "--all")):
        result = dcli("diff", "good", "bad", *args)
        assert result.returncode == 1, result.stderr
        assert "binary" in result.stdout
        assert "GIT binary patch\n" not in result.stdout and "literal 2048" not in result.stdout
        assert '"base64"' not in result.stdout


def test_a_megabyte_patch_is_summarised_unless_all(dcli: Cli, repo: Path) -> None:
    capture(dcli, "good", "--repo", str(repo))
    (repo / "kernel.py").write_text("".join(f"X_{i} = {i}  # tuned\n" for i in range(60_000)))
    capture(dcli, "bad", "--repo", str(repo))
    short = dcli("diff", "good", "bad")
    assert short.returncode == 1 and len(short.stdout) < 5_000
    # lines are folded at 80 columns, where depends on the checkout's path: read as words
    assert re.search(r"clean -> patch 1\.\d MB sha256 [0-9a-f]{12} \(1 file\)",
                     " ".join(short.stdout.split()))
    assert "kernel.py" in short.stdout
    assert "truncated" in short.stdout  # capped at capture: the summary says so
    as_json = dcli("diff", "good", "bad", "--json")
    assert len(as_json.stdout) < 20_000
    patch = json.loads(as_json.stdout)["findings"][0]["after"]["patch"]
    assert patch["files"] == ["kernel.py"] and "text" not in patch
    full = dcli("diff", "good", "bad", "--all")
    assert len(full.stdout) > 1_000_000 and "X_59000 = 59000" not in short.stdout
    markdown = dcli("diff", "good", "bad", "--markdown", "--all")
    assert "<details>" in markdown.stdout and len(markdown.stdout) > 1_000_000
