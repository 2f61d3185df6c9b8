"""capture / list / show through the real CLI: locally and over a real sshd."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import Cli, unique_marker
from helpers.secretrepo import SECRET, make_repo
from helpers.sshd import Sshd

from envsnap.hosts import payload

WORKER_TAG = unique_marker("test-worker")


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def store_text(cli: Cli) -> str:
    return "".join(p.read_text() for p in Path(cli.env["ENVSNAP_STORE"]).rglob("*.yaml"))


def test_capture_local_then_list_and_show(cli: Cli) -> None:
    result = cli("capture", "local", "--label", "here")
    assert result.returncode == 0, result.stderr
    path = Path(cli.env["ENVSNAP_STORE"]) / "here.yaml"
    document = load(path)
    assert document["schema"] == 1
    assert document["meta"]["label"] == "here"
    assert set(document["facts"]) >= {"system", "nvidia", "cuda_nccl", "python_env", "env", "git"}
    assert all(info["error"] is None for info in document["meta"]["collectors"].values())
    assert document["digests"].keys() == document["facts"].keys()

    listed = cli("list")
    assert listed.returncode == 0 and "here" in listed.stdout
    shown = cli("show", "here", "--json")
    assert json.loads(shown.stdout)["meta"]["label"] == "here"
    assert yaml.safe_load(cli("show", str(path), "--yaml").stdout)["meta"]["label"] == "here"


def test_no_nvidia_driver_is_a_normal_state(cli: Cli) -> None:
    assert cli("capture", "local", "--label", "cpu").returncode == 0
    nvidia = load(Path(cli.env["ENVSNAP_STORE"]) / "cpu.yaml")["facts"]["nvidia"]
    assert nvidia["present"] is False


def test_capture_over_ssh_with_repo_and_worker(ssh_cli: Cli, sshd: Sshd, tmp_path: Path) -> None:
    head = make_repo(tmp_path / "sglang")
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)",
                               WORKER_TAG],
                              env={"NCCL_PROTO": "LL", "HF_TOKEN": SECRET, "PATH": "/usr/bin"})
    try:
        result = ssh_cli("capture", sshd.addresses[0], "--label", "good", "--repo",
                         str(tmp_path / "sglang"), "--proc", WORKER_TAG)
    finally:
        worker.kill()
    assert result.returncode == 0, result.stderr
    document = load(Path(ssh_cli.env["ENVSNAP_STORE"]) / "good.yaml")
    assert document["meta"]["address"] == sshd.addresses[0]
    repo = document["facts"]["git"]["repos"][str(tmp_path / "sglang")]
    assert repo["head"] == head
    processes = document["facts"]["env"]["processes"]
    assert processes[str(worker.pid)]["env"]["NCCL_PROTO"] == "LL"
    assert SECRET not in store_text(ssh_cli)


def test_second_capture_reuses_the_cached_agent(ssh_cli: Cli, sshd: Sshd) -> None:
    assert ssh_cli("capture", sshd.addresses[1], "--label", "one").returncode == 0
    cached = list((sshd.host_home / ".cache" / "envsnap").glob("agent-*"))
    stamps = {path: path.stat().st_mtime_ns for path in cached if path.is_dir()}
    assert stamps, "the agent should be unpacked in the remote user's cache"
    assert ssh_cli("capture", sshd.addresses[1], "--label", "two").returncode == 0
    assert {path: path.stat().st_mtime_ns for path in stamps} == stamps


def test_the_agent_records_its_own_start_up_and_masking(ssh_cli: Cli, sshd: Sshd) -> None:
    """Beside each collector's seconds: what the agent itself cost on the host."""
    assert ssh_cli("capture", sshd.addresses[2], "--label", "costs").returncode == 0
    path = Path(ssh_cli.env["ENVSNAP_STORE"]) / "costs.yaml"
    agent = load(path)["meta"]["agent"]
    # at least the interpreter's own start and the collectors' imports: never nothing
    assert 0.001 < agent["startup_seconds"] < 30
    assert 0 <= agent["masking_seconds"] < 30
    shown = yaml.safe_load(ssh_cli("show", str(path), "--yaml").stdout)["meta"]["agent"]
    assert shown["startup_seconds"] == agent["startup_seconds"]


def test_secrets_never_reach_the_disk(cli: Cli, tmp_path: Path) -> None:
    make_repo(tmp_path / "repo")
    cli.env.update(HF_TOKEN=SECRET, MY_API_KEY="plain-value-123", NCCL_DEBUG="INFO")
    result = cli("capture", "local", "--label", "s", "--repo", str(tmp_path / "repo"))
    assert result.returncode == 0, result.stderr
    text = store_text(cli)
    assert SECRET not in text and "plain-value-123" not in text
    shell = load(Path(cli.env["ENVSNAP_STORE"]) / "s.yaml")["facts"]["env"]["shell"]
    assert shell["NCCL_DEBUG"] == "INFO" and shell["HF_TOKEN"].startswith("<secret:")


def test_fleet_keeps_every_snapshot_when_one_host_fails(ssh_cli: Cli, sshd: Sshd,
                                                       tmp_path: Path) -> None:
    inventory = {"all": {"children": {"gpu": {"hosts": {
        f"node{n}": {"ansible_host": address} for n, address in enumerate(sshd.addresses[:3])},
        "vars": {"procs": ["nothing-matches-this"]}}},
        "hosts": {"dead": {"ansible_host": "127.0.0.1", "ansible_port": 1}}}}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    # No cached agent: the three captures of one machine upload and unpack it at once.
    shutil.rmtree(sshd.host_home / payload.agent_dir(payload.build_payload()[1]),
                  ignore_errors=True)
    result = ssh_cli("capture", "gpu", "dead", "--inventory", str(tmp_path / "hosts.yml"),
                     "--label", "run1", "--forks", "4")
    assert result.returncode == 3
    store = Path(ssh_cli.env["ENVSNAP_STORE"])
    assert sorted(p.name for p in (store / "run1").iterdir()) == [
        "node0.yaml", "node1.yaml", "node2.yaml"]
    assert "dead: unreachable" in result.stderr
    assert "1 of 4 hosts failed" in result.stderr


NOT_UTF8 = "/tmp/\udcff"   # what Python makes of the argv byte 0xff; subprocess sends 0xff


@pytest.mark.parametrize("option", ["--repo", "--proc", "--hot-path", "--python"])
def test_an_option_that_is_not_utf8_is_refused_before_the_capture(cli: Cli, option: str) -> None:
    # It went into the agent's JSON config or the snapshot's YAML, and failed there.
    result = cli("capture", "local", option, NOT_UTF8, "--label", "x")
    assert result.returncode == 2
    assert result.stderr.endswith(f"envsnap: error: argument {option}: "
                                  "'/tmp/\\udcff' is not UTF-8 text\n")
    assert not (cli.cwd / "store").exists()


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and int((entry / "stat").read_text().rsplit(")", 1)[1]
                                            .split()[1]) == pid:
                found.append(int(entry.name))
        except (OSError, IndexError):  # it exited while we looked
            continue
    return found


@pytest.mark.parametrize("over_ssh", [False, True], ids=["local", "ssh"])
def test_envsnap_own_processes_are_never_workers(request: pytest.FixtureRequest,
                                                 cli_process: Cli, tmp_path: Path,
                                                 over_ssh: bool) -> None:
    """The controller (whose command line holds the pattern; over loopback SSH it is no
    parent of the agent), another envsnap command running on the host and the shell that
    started it are envsnap's, never workers; only the real worker is."""
    host = "local"
    if over_ssh:
        sshd = request.getfixturevalue("sshd")
        sshd.write_home(Path(cli_process.env["HOME"]))
        host = sshd.addresses[0]
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", WORKER_TAG])
    # envsnap bench of a sleeping benchmark, started by a shell; its --metric names the tag
    other = subprocess.Popen(
        ["sh", "-c", f"{sys.executable} -m envsnap bench local --cmd 'sleep 60' --metric "
                     f"'{WORKER_TAG}([0-9]+)' --repeat 1 --sample-interval 0 --label other; true"],
        env=cli_process.env, cwd=tmp_path, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while not children_of(other.pid):   # the shell has started envsnap
            time.sleep(0.01)
        result = cli_process("capture", host, "--label", "own", "--proc", WORKER_TAG,
                             "--proc", "bench local")
    finally:
        worker.kill()
        os.killpg(other.pid, signal.SIGKILL)
        other.wait()
    assert result.returncode == 0, result.stderr
    processes = load(Path(cli_process.env["ENVSNAP_STORE"]) / "own.yaml")["facts"]["env"][
        "processes"]
    assert {pid: p["matched"] for pid, p in processes.items()} == {
        str(worker.pid): f"pattern {WORKER_TAG}"}
