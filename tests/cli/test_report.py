"""`envsnap report` end to end: the real CLI in a subprocess, on real local captures (a real
git checkout with an upstream pull, a stash and an uncommitted patch, a worker process), on
the recorded H200 capture (real GPU UUIDs), and on files edited to stand for what this
machine cannot produce (a failed collector, a repository under /home/alice)."""
from __future__ import annotations

import io
import json
import os
import re
import stat
import subprocess
import tarfile
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from conftest import Cli, sleeping_worker, unique_marker
from helpers.diffdata import edit_file
from helpers.gitrepos import Story
from helpers.paths import ROOT

H200 = ROOT / "tests" / "data" / "h200" / "snapshot.yaml"
H200_UUID = "GPU-d3208dcb-53e8-24e1-bfd7-b35894626910"
MARKER = unique_marker("report-test-worker")
HF_TOKEN = "hf_" + "Zq8ReportTokenValue0123456789ab"       # built up so no scanner trips on it
GH_TOKEN = "ghp_" + "ReportRemoteToken0123456789abcdefghij"
PASSWORD = "s3cret-remote-passw0rd"


def worker(env: dict[str, str]) -> AbstractContextManager[subprocess.Popen[bytes]]:
    return sleeping_worker(MARKER, env)


def capture(cli: Cli, label: str, *args: str, code: int = 0) -> Path:
    result = cli("capture", "local", "--label", label, *args)
    assert result.returncode == code, result.stderr
    return Path(cli.env["ENVSNAP_STORE"]) / f"{label}.yaml"


def ok(cli: Cli, *args: str) -> str:
    result = cli("report", *args)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture
def story(cli: Cli, tmp_path: Path) -> tuple[Cli, Story]:
    """good: a clone with a worker holding the tuned NCCL env and secrets in the shell and in
    the remote URL; bad: nine commits pulled, one on the NCCL path."""
    story = Story(tmp_path / "git")
    checkout = story.checkout
    checkout.git("remote", "add", "private", f"https://ada:{PASSWORD}@example.com/sglang.git")
    checkout.git("remote", "add", "mirror", f"https://{GH_TOKEN}@github.com/x/sglang.git")
    checkout.write("python/sglang/srt/entrypoints/engine.py", "ENGINE = 2\n")
    checkout.git("stash", "push", "-m", "first try")
    checkout.write("python/sglang/srt/managers/scheduler.py", "SCHED = 2\n")
    cli.env.update(HF_TOKEN=HF_TOKEN, NCCL_PROTO="LL")
    repo = str(checkout.path)
    with worker({"NCCL_PROTO": "LL", "HF_TOKEN": HF_TOKEN}):
        capture(cli, "good", "--repo", repo, "--proc", MARKER)
    story.upstream_moves()
    checkout.git("-c", "pull.rebase=false", "pull", "origin", "main")
    with worker({"NCCL_PROTO": "LL", "HF_TOKEN": HF_TOKEN}):
        capture(cli, "bad", "--repo", repo, "--proc", MARKER)
    return cli, story


# ---- the three formats ------------------------------------------------------------------------

def test_markdown_of_a_real_capture(story: tuple[Cli, Story]) -> None:
    cli, _ = story
    text = ok(cli, "good")
    assert text.startswith("# envsnap report: good\n")
    for heading in ("## Summary", "## Details"):
        assert f"\n{heading}\n" in text
    for fact in ("host", "OS / kernel", "NVIDIA driver", "CUDA", "NCCL", "torch", "python",
                 "GPUs", "env of the shell", "env of the workers", "sitecustomize"):
        assert f"| **{fact}** |" in text
    assert "NCCL_PROTO=LL" in text
    assert "same NCCL/CUDA variables as the shell" in text or "NCCL_PROTO=LL" in text
    assert "<summary>python packages (" in text and "<summary>uncommitted patch in " in text
    assert "<summary>stash@{0} in " in text and "Compared with" not in text


def test_vs_shows_the_diff_findings_and_exits_0(story: tuple[Cli, Story]) -> None:
    cli, _ = story
    text = ok(cli, "bad", "--vs", "good")
    section = text.split("## Compared with good\n", 1)[1]
    assert section.lstrip().startswith("### envsnap diff good")
    assert "code moved: 9 commits pulled into " in section
    assert "Fix PCG MoE Error" in section and "| rank | section | path | change | why |" in section


def test_json_is_a_versioned_envelope(story: tuple[Cli, Story]) -> None:
    cli, _ = story
    report = json.loads(ok(cli, "bad", "--vs", "good", "--format", "json"))
    assert report["envsnap_report"] == 1 and report["label"] == "bad" and report["masked"]
    assert list(report) == sorted(report)
    facts = {row["fact"]: row["value"] for row in report["summary"]}
    assert "NCCL_PROTO=LL" in facts["env of the shell"]
    assert report["diff"]["envsnap_diff"] == 1
    assert report["diff"]["findings"][0]["path"][-1] == "head"
    assert any(part["title"].startswith("python packages") for part in report["details"])


def test_nccl_row_lists_only_the_libraries_torch_does_not_load(cli: Cli) -> None:
    # The recorded H200: torch loads the wheel's libnccl; ldconfig also finds the system one.
    report = json.loads(ok(cli, str(H200), "--format", "json"))
    facts = {row["fact"]: row["value"] for row in report["summary"]}
    assert facts["NCCL"] == ("torch loads 2.28.9; wheel nvidia-nccl-cu13 2.28.9; other libnccl: "
                             "2.28.3 at /usr/lib/x86_64-linux-gnu/libnccl.so.2.28.3")


def test_html_is_one_self_contained_file(story: tuple[Cli, Story], tmp_path: Path) -> None:
    cli, _ = story
    out = tmp_path / "issue.html"
    result = cli("report", "bad", "--vs", "good", "-o", str(out))  # format from the suffix
    assert result.returncode == 0, result.stderr
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert "<style>" in page and "Fix PCG MoE Error" in page
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page, re.IGNORECASE)
    assert not re.search(r"<(script|link|img|iframe)\b|@import|url\(", page, re.IGNORECASE)


def test_html_escapes_what_it_shows(cli: Cli) -> None:
    cli.env["NCCL_DEBUG"] = "<script>alert(1)</script>"
    capture(cli, "one")
    page = ok(cli, "one", "--format", "html")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>" not in page


# ---- masking ------------------------------------------------------------------------------------

def test_gpu_uuids_are_masked_unless_no_mask(cli: Cli) -> None:
    for form in ("md", "html", "json"):
        shown = ok(cli, str(H200), "--format", form)
        assert "d3208dcb" not in shown and "GPU-" in shown, form
        assert ("GPU-&lt;masked&gt;" if form == "html" else "GPU-<masked>") in shown
    assert H200_UUID in ok(cli, str(H200), "--no-mask")


def test_home_paths_are_masked_unless_no_mask(cli: Cli, tmp_path: Path) -> None:
    def move_home(document: dict) -> None:
        repos = document["facts"]["git"]["repos"]
        repos["/home/alice/sglang"] = repos.pop("/tmp/repo")
        document["facts"]["python_env"]["interpreter"]["executable"] = "/root/ml-env/bin/python3"
    moved = edit_file(H200, move_home, tmp_path / "alice.yaml")
    shown = ok(cli, str(moved))
    assert "/home/alice" not in shown and "/root/" not in shown
    assert "| **repo ~/sglang** |" in shown and "~/ml-env/bin/python3" in shown
    kept = ok(cli, str(moved), "--no-mask")
    assert "/home/alice/sglang" in kept and "/root/ml-env/bin/python3" in kept


def secrets_in(text: str) -> list[str]:
    return [s for s in (HF_TOKEN, GH_TOKEN, PASSWORD) if s in text]


def test_no_secret_in_any_report_or_bundle_member(story: tuple[Cli, Story],
                                                  tmp_path: Path) -> None:
    cli, _ = story
    # a benchmark that prints the token: the agent masks its output before returning it
    bench = cli("bench", "local", "--cmd", f"echo using {HF_TOKEN}; echo 'value: 5'",
                "--metric", r"value: (\d+)", "--repeat", "1", "--sample-interval", "0",
                "--label", "benched")
    assert bench.returncode == 0, bench.stderr
    raw = (Path(cli.env["ENVSNAP_STORE"]) / "benched.yaml").read_text()
    assert HF_TOKEN not in raw and "using <secret:" in raw
    for args in (("bad", "--vs", "good"), ("benched", "--vs", "good")):
        for form in ("md", "html", "json"):
            for mask in ((), ("--no-mask",)):
                assert secrets_in(ok(cli, *args, "--format", form, *mask)) == [], (args, form)
        bundle = tmp_path / f"{args[0]}.tar.gz"
        ok(cli, *args, "--bundle", str(bundle), "--no-mask")
        with tarfile.open(bundle) as tar:
            for member in tar.getmembers():
                data = tar.extractfile(member).read().decode()  # type: ignore[union-attr]
                assert secrets_in(data) == [], member.name
    assert re.search(r"HF_TOKEN=<secret:[0-9a-f]{8}>", ok(cli, "bad"))


# ---- bad input: a snapshot with failed collectors -----------------------------------------------

def test_failed_collectors_are_shown_as_not_captured(cli: Cli, tmp_path: Path) -> None:
    good = capture(cli, "one", "--repo", str(tmp_path / "no-such-repo"), code=3)

    def fail(document: dict) -> None:
        for name in ("nvidia", "env"):
            document["meta"]["collectors"][name]["error"] = "timed out after 20s"
            document["facts"][name] = {}
    failed = edit_file(good, fail, tmp_path / "failed.yaml")
    text = ok(cli, str(failed))
    assert "**Not captured** (these facts are missing, not absent):" in text
    assert "- env: timed out after 20s" in text and "- nvidia: timed out after 20s" in text
    for fact in ("NVIDIA driver", "GPUs", "PCIe link", "env of the shell",
                 "env of the workers"):
        assert f"| **{fact}** | not captured: timed out after 20s |" in text, fact
    assert "| **CUDA** | nvidia not captured: timed out after 20s; toolkit " in text
    assert "not captured: no such directory: " in text  # the repo that was never there
    report = json.loads(ok(cli, str(failed), "--format", "json"))
    titles = {part["title"]: part["lines"] for part in report["details"]}
    assert titles["GPUs"] == ["not captured: timed out after 20s"]
    assert "not captured: timed out after 20s" in ok(cli, str(failed), "--format",
                                                     "html")


# ---- the bundle ------------------------------------------------------------------------------

def members_of(path: Path) -> dict[str, bytes]:
    with tarfile.open(path) as tar:
        return {m.name: tar.extractfile(m).read()  # type: ignore[union-attr]
                for m in tar.getmembers()}


def test_bundle_holds_report_snapshots_and_bench_in_order(cli: Cli, tmp_path: Path) -> None:
    examples = ROOT / "snapshots" / "examples"
    bad, good = str(examples / "story-bad.yaml"), str(examples / "story-good.yaml")
    first, second = tmp_path / "one.tar.gz", tmp_path / "two.tar.gz"
    result = cli("report", bad, "--vs", good, "--bundle", str(first))
    assert result.returncode == 0 and result.stdout.startswith(f"saved {first}: report.md")
    root = "envsnap-report-story-bad/"
    members = members_of(first)
    charts = ["charts/runs.svg"] + [f"charts/telemetry-story-{side}-GPU{index}.svg"
                                    for side in ("good", "bad") for index in range(8)]
    assert list(members) == [root + name for name in (
        "report.md", "report.html", "snapshots/story-bad.yaml", "snapshots/story-good.yaml",
        "bench/story-bad.json", "bench/story-good.json", *charts)]
    assert members[root + "report.md"].decode() == ok(cli, bad, "--vs", good)
    bench = json.loads(members[root + "bench/story-bad.json"])
    assert bench["values"] == [59.8, 61.0, 60.2, 59.4, 60.7] and bench["runs"][0]["samples"]
    for name in ("story-bad", "story-good"):
        text = members[f"{root}snapshots/{name}.yaml"].decode()
        assert "GPU-<masked>" in text and "/root/" not in text
    cli("report", bad, "--vs", good, "--bundle", str(second))
    assert first.read_bytes() == second.read_bytes()  # deterministic


def test_bundled_snapshots_still_diff(cli: Cli, tmp_path: Path) -> None:
    examples = ROOT / "snapshots" / "examples"
    bundle = tmp_path / "b.tar.gz"
    ok(cli, str(examples / "story-bad.yaml"), "--vs", str(examples / "story-good.yaml"),
       "--bundle", str(bundle))
    with tarfile.open(bundle) as tar:
        # filter= only where tarfile has it (3.11.4+, 3.12): Debian 12's 3.11.2 has not
        if hasattr(tarfile, "data_filter"):
            tar.extractall(tmp_path / "x", filter="data")
        else:
            tar.extractall(tmp_path / "x")
    folder = tmp_path / "x" / "envsnap-report-story-bad" / "snapshots"
    result = cli("diff", str(folder / "story-good.yaml"), str(folder / "story-bad.yaml"))
    assert result.returncode == 1, result.stderr
    assert "9 commits pulled into ~/sglang" in result.stdout and "0be30d4" in result.stdout


def test_bad_bundle_name_and_unwritable_output(cli: Cli, tmp_path: Path) -> None:
    capture(cli, "one")
    result = cli("report", "one", "--bundle", str(tmp_path / "x.zip"))
    assert result.returncode == 2 and "name it FILE.tar.gz" in result.stderr
    result = cli("report", "one", "-o", str(tmp_path / "missing" / "r.md"))
    assert result.returncode == 2 and "cannot write" in result.stderr
    assert cli("report", "nope").returncode == 2


def test_output_to_a_device_or_pipe_is_written_there_not_replaced(cli_process: Cli,
                                                                  tmp_path: Path) -> None:
    """-o /dev/stdout (or a FIFO, a device) is written in place: a write beside it and a
    rename, as for a file, would put a regular file where the device was. A process of its
    own: its /dev/stdout is the pipe the test reads."""
    cli = cli_process
    result = cli("report", str(H200), "-o", "/dev/stdout")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("# envsnap report") and Path("/dev/stdout").exists()
    fifo = tmp_path / "pipe.md"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE, text=True)
    result = cli("report", str(H200), "-o", str(fifo))
    received, _ = reader.communicate(timeout=60)
    assert result.returncode == 0, result.stderr
    assert received.startswith("# envsnap report") and stat.S_ISFIFO(fifo.stat().st_mode)


def test_a_report_never_overwrites_a_snapshot(cli: Cli) -> None:
    snapshot = capture(cli, "one")
    before = snapshot.read_bytes()
    for form in ("md", "json"):
        result = cli("report", "one", "--format", form, "-o", str(snapshot))
        assert result.returncode == 2, result.stderr
        assert result.stderr == (f"envsnap: error: {snapshot} holds a snapshot: write the "
                                 "report elsewhere\n")
    assert snapshot.read_bytes() == before
    again = cli("report", "one", "--format", "json", "-o", "one.json")
    assert again.returncode == 0 and cli("report", "one", "-o", "one.json").returncode == 0


def test_tar_members_are_plain_files_owned_by_nobody(cli: Cli, tmp_path: Path) -> None:
    capture(cli, "one")
    bundle = tmp_path / "one.tar.gz"
    ok(cli, "one", "--bundle", str(bundle))
    with tarfile.open(bundle) as tar:
        infos = tar.getmembers()
    assert [i.name.split("/", 1)[1] for i in infos] == ["report.md", "report.html",
                                                        "snapshots/one.yaml"]
    assert all(i.isfile() and i.uid == 0 and i.uname == "" and i.mode == 0o644 for i in infos)
    assert io.BytesIO(bundle.read_bytes()).read(2) == b"\x1f\x8b"
