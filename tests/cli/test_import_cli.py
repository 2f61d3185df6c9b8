"""`envsnap import`: pasted outputs of a real H200 (tests/data/h200, h200-evidence) read into
one partial snapshot; a malformed, truncated or mixed file names its line, exits 4 and
stores nothing; secrets in a paste are masked before anything is stored."""
from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import pytest
from conftest import Cli
from helpers.folded import words

from envsnap.errors import ExitCode
from envsnap.snapshot.store import Store

DATA = Path(__file__).resolve().parent.parent / "data"
H200 = DATA / "h200"
EVIDENCE = DATA / "h200-evidence"


def stored(cli: Cli, label: str) -> dict:
    return Store(cli.env["ENVSNAP_STORE"]).load(label)


def test_import_makes_one_partial_snapshot_of_several_files(cli: Cli) -> None:
    files = [H200 / "collect_env.txt", H200 / "smi_q.xml", H200 / "smi_topo_m.txt"]
    result = cli("import", *map(str, files), "--label", "theirs")
    assert result.returncode == 0, result.stderr
    assert "saved theirs" in result.stdout
    document = stored(cli, "theirs")
    imported = document["meta"]["imported"]
    assert imported["partial"] is True
    assert imported["sources"]["collect_env.txt"] == {
        "sha256": hashlib.sha256(files[0].read_bytes()).hexdigest(),
        "tool": "torch collect_env", "format": "CPU block, Python platform, XPU line, "
        "ROCm lines", "version": "2.11.0+cu130", "lines": 111}
    assert imported["sources"]["smi_q.xml"]["tool"] == "nvidia-smi -q -x"
    # the GPU collect_env names GPU 0 took its bus id from the XML of the same host
    gpu = document["facts"]["nvidia"]["gpus"]["00000000:00:06.0"]
    assert gpu["name"] == "NVIDIA H200" and gpu["cpu_affinity"] == "0-15"
    # what no file carries is unknown, not empty
    for section in ("env", "git"):
        assert document["facts"][section] == {}
        assert document["meta"]["collectors"][section]["error"] == (
            "not in a torch collect_env or nvidia-smi -q -x or nvidia-smi topo -m output")
    assert document["meta"]["collectors"]["nvidia"]["error"] is None


def test_every_format_is_told_apart_by_content(cli: Cli, tmp_path: Path) -> None:
    inspect = tmp_path / "inspect-output"          # no telling suffix, gunzipped
    inspect.write_bytes(gzip.decompress((EVIDENCE / "pip_inspect.json.gz").read_bytes()))
    names = ["pip_list.txt", "pip_list.json", "pip_freeze.txt", "smi.txt", "smi_q.txt"]
    for number, path in enumerate([EVIDENCE / name for name in names] + [inspect]):
        result = cli("import", str(path), "--label", f"one-{number}")
        assert result.returncode == 0, result.stderr
    tools = [next(iter(stored(cli, f"one-{n}")["meta"]["imported"]["sources"].values()))
             ["tool"] for n in range(6)]
    assert tools == ["pip list", "pip list", "pip freeze", "nvidia-smi", "nvidia-smi -q",
                     "pip inspect"]


def cut(path: Path, keep: int) -> str:
    return "".join(path.read_text().splitlines(keepends=True)[:keep])


# Read as far as each goes, or around the line that breaks it: a warning names the line
READ_PAST = {
    # a collect_env that stops before its libraries
    "truncated-collect-env": (lambda: cut(H200 / "collect_env.txt", 30),
                              ": line 30: truncated collect_env output"),
    "bad-pip-list": (lambda: cut(EVIDENCE / "pip_list.txt", 20) + "torch\n" +
                     cut(EVIDENCE / "pip_list.txt", 30)[1000:],
                     ":21: passed over 'torch' (cannot read 'torch' as a"),
    "truncated-smi-table": (lambda: cut(EVIDENCE / "smi.txt", 10),
                            ": line 10: truncated nvidia-smi table: it ends inside the GPU "
                            "table: read as far as it goes"),
}


@pytest.mark.parametrize("case", sorted(READ_PAST))
def test_a_cut_or_broken_report_is_read_around_the_line_it_names(cli: Cli, tmp_path: Path,
                                                                 case: str) -> None:
    text, expected = READ_PAST[case]
    bad = tmp_path / f"{case}.txt"
    bad.write_text(text())
    result = cli("import", str(bad), "--label", "read")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"warning: {bad}{expected}" in result.stderr, result.stderr
    assert stored(cli, "read")["meta"]["imported"]["complete"] == []


def test_a_collect_env_with_a_pip_list_under_it_reads_both(cli: Cli, tmp_path: Path) -> None:
    mixed = tmp_path / "mixed.txt"
    mixed.write_text((H200 / "collect_env.txt").read_text().split("Versions of")[0] +
                     (EVIDENCE / "pip_list.txt").read_text())
    result = cli("import", str(mixed), "--label", "both")
    assert result.returncode == 0, result.stderr
    document = stored(cli, "both")
    assert [s["tool"] for s in document["meta"]["imported"]["sources"].values()] == [
        "torch collect_env", "pip list"]
    assert document["facts"]["nvidia"]["driver"] == "580.159.04"
    assert document["meta"]["imported"]["complete"] == ["python_env.packages"]


BAD = {
    "truncated-xml": (lambda: cut(H200 / "smi_q.xml", 200), ":201: cannot read it as "
                      "nvidia-smi XML"),
    "truncated-json": (lambda: (EVIDENCE / "pip_list.json").read_text()[:5000],
                       "cannot read it as JSON"),
    "nothing-known": (lambda: "hello\nworld\n", ":1: not an output envsnap reads"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_file_names_its_line_exits_4_and_stores_nothing(cli: Cli, tmp_path: Path,
                                                              case: str) -> None:
    text, expected = BAD[case]
    bad = tmp_path / f"{case}.txt"
    bad.write_text(text())
    good = EVIDENCE / "smi_q.txt"
    result = cli("import", str(good), str(bad), "--label", "never")
    assert result.returncode == 4, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1 and expected in result.stderr, result.stderr
    assert str(bad) in result.stderr
    store = Path(cli.env["ENVSNAP_STORE"])
    assert not store.exists() or list(store.iterdir()) == []


def test_a_secret_in_a_paste_is_masked_before_it_is_stored(cli: Cli, tmp_path: Path) -> None:
    token = "ghp_" + "Zq8Lr2Vn5Tx7Yw1Kd4Hs6Jf9Pm3Bc0Ga2Ne"
    paste = tmp_path / "collect_env.txt"
    paste.write_text((H200 / "collect_env.txt").read_text().replace(
        "OS: Ubuntu 24.04.3 LTS (x86_64)", f"OS: Ubuntu 24.04.3 LTS token={token} (x86_64)"))
    assert cli("import", str(paste), "--label", "masked").returncode == 0
    text = (Path(cli.env["ENVSNAP_STORE"]) / "masked.yaml").read_text()
    assert token not in text and token[:12] not in text
    pretty = stored(cli, "masked")["facts"]["system"]["os_release"]["PRETTY_NAME"]
    assert pretty.startswith("Ubuntu 24.04.3 LTS token=<secret:")


def test_an_existing_label_is_refused(cli: Cli) -> None:
    assert cli("import", str(EVIDENCE / "smi.txt"), "--label", "x").returncode == 0
    again = cli("import", str(EVIDENCE / "smi_q.txt"), "--label", "x")
    assert again.returncode == 2 and "already exists" in again.stderr
    assert json.dumps(stored(cli, "x")["meta"]["imported"]["sources"]).count("smi.txt") == 1


def test_show_says_unknown_where_a_paste_says_nothing(cli: Cli) -> None:
    assert cli("import", str(EVIDENCE / "pip_list.json"), "--label", "pips").returncode == 0
    shown = cli("show", "pips").stdout
    assert "sitecustomize       unknown: not in a pip list output" in shown
    assert "CUDA                unknown: not in a pip list output\n" in shown
    assert "NCCL                wheel nvidia-nccl-cu13 2.28.9\n" in shown


def test_show_of_a_pasted_collect_env_names_its_driver_and_gpus(cli: Cli) -> None:
    """The H200's own collect_env, as recorded: the paste states the driver and the GPU
    and is silent on the PCIe link and the driver's CUDA API."""
    h200 = EVIDENCE.parent / "h200"
    assert cli("import", str(h200 / "collect_env.txt"), "--label", "theirs").returncode == 0
    shown = words(cli("show", "theirs").stdout)
    assert "NVIDIA driver 580.159.04 CUDA" in shown
    assert "GPUs 1 x NVIDIA H200 PCIe link unknown: not in a torch collect_env output" in shown
    assert "driver API unknown: not in a torch collect_env output; toolkit 13.0.88" in shown
    assert "host not stated (as imported)" in shown
    assert "none" not in shown.replace("none recorded", ""), shown


def test_show_of_a_pasted_smi_table_shows_only_what_it_states(cli: Cli) -> None:
    assert cli("import", str(EVIDENCE.parent / "h200" / "smi.txt"), "--label", "t").returncode == 0
    shown = words(cli("show", "t").stdout)
    assert "NVIDIA driver 580.159.04 CUDA driver API 13.0; toolkit unknown" in shown
    assert "PCIe link unknown: not in a nvidia-smi output" in shown
    assert "None" not in shown and "GenNone" not in shown, shown


def test_nothing_acts_on_a_host_from_an_imported_snapshot(cli: Cli) -> None:
    assert cli("import", str(EVIDENCE / "pip_list.json"), "--label", "theirs").returncode == 0
    restore = cli("restore", "theirs", "--check")
    assert restore.returncode == 2, restore.stdout + restore.stderr
    assert "theirs was imported from pasted outputs: it is partial and foreign, and restore " \
           "needs a capture of the host" in restore.stderr
    explain = cli("explain", "theirs", "theirs", "--cmd", "true", "--metric", "x=(\\d+)")
    assert explain.returncode == 2 and "explain needs a capture" in explain.stderr


def test_an_imported_snapshot_stays_foreign_at_every_gate(cli: Cli, tmp_path: Path) -> None:
    """Stored signed, yet a paste is whoever pasted it: a play that would take it as
    `snapshot` shows the review and refuses, as for any stranger's snapshot."""
    assert cli("import", str(H200 / "collect_env.txt"), "--label", "theirs").returncode == 0
    playbook = tmp_path / "show.yml"
    playbook.write_text("- hosts: all\n  tasks:\n    - debug: {msg: '{{ snapshot.label }}'}\n")
    refused = cli("play", str(playbook), "-e", "snapshot=theirs", "-l", "local")
    assert refused.returncode == ExitCode.DECLINED, refused.stdout + refused.stderr
    assert "snapshot theirs is foreign (imported from pasted outputs)" in refused.stdout
    assert "ok: [local]" not in refused.stdout
