"""The Ansible collection envsnap.gpu under the real ansible-core, over the test sshd: 8
loopback addresses are 8 hosts. The collection is built by `envsnap ansible`,
packed by `ansible-galaxy collection build` and installed by `ansible-galaxy collection
install`, as a user would; then two playbook runs (ansible-playbook starts slowly) feed every
test: the guide's example playbook (docs/guide/fleets.md) over the fleet, and a playbook of
gates and bad input."""
from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import ROOT, Cli, sleeping_worker, unique_marker
from helpers.secretrepo import make_repo
from helpers.sshd import Sshd, start_sshd

# one worker runs them all: the module's fleet (an sshd, a collection, a play) is built once
pytestmark = [pytest.mark.ssh, pytest.mark.xdist_group("ansible_collection")]

VENV_BIN = Path(sys.executable).parent   # where pip put ansible-playbook and ansible-galaxy
EXAMPLE = ROOT / "envsnap" / "ansible" / "examples" / "fleet.yml"
HOSTS = [f"n{number}" for number in range(1, 9)]
OUTLIER = "n5"
PLANTED = "NCCL_P2P_DISABLE"
SECRET = "hf_ansibleCollectionTestSecret0123456789"
WORKER_TAG = unique_marker("ansible-worker")
PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable

# What the playbook of gates and bad input does, host by host; each host writes what its
# tasks returned to OUT/<host>.json on the controller.
CHECKS = """
- hosts: n1,n2,n5
  gather_facts: false
  environment: "{{ job_environment | default({}) }}"
  tasks:
    - name: the gate of drift from a known-good snapshot
      envsnap.gpu.envsnap_assert: {baseline: fleet1/n1}
      register: baseline_gate
      ignore_errors: true
    - name: a baseline gate that finds several facts drifted, records among them
      envsnap.gpu.envsnap_assert: {baseline: fleet1/n1, repos: [], procs: []}
      register: many_drifted
      ignore_errors: true
      when: inventory_hostname == "n5"
    - name: a driver this host does not have
      envsnap.gpu.envsnap_assert: {driver: "550.54", clocks_not_throttled: true}
      register: driver_gate
      ignore_errors: true
      when: inventory_hostname == "n2"
    - {envsnap.gpu.envsnap_capture: {label: "../up"}, register: bad_label, ignore_errors: true,
       when: inventory_hostname == "n1"}
    - {envsnap.gpu.envsnap_capture: {label: fleet1}, register: taken, ignore_errors: true,
       when: inventory_hostname == "n1"}
    - {envsnap.gpu.envsnap_capture: {labl: x}, register: unknown_option,
       ignore_errors: true, when: inventory_hostname == "n1"}
    - {envsnap.gpu.envsnap_capture: {label: p, procs: ["(a+)+$"]}, register: bad_pattern,
       ignore_errors: true, when: inventory_hostname == "n1"}
    - {envsnap.gpu.envsnap_capture: {label: t, collector_timeout: soon}, register: bad_timeout,
       ignore_errors: true, when: inventory_hostname == "n1"}
    - {envsnap.gpu.envsnap_capture: {label: np, python: /nowhere/python3}, register: no_python,
       ignore_errors: true, when: inventory_hostname == "n1"}
    - {envsnap.gpu.envsnap_capture: {label: venv, python: "{{ venv_python }}"},
       register: venv, when: inventory_hostname == "n1"}
    - {envsnap.gpu.envsnap_assert: {}, register: no_gate, ignore_errors: true,
       when: inventory_hostname == "n1"}
    - {envsnap.gpu.envsnap_assert: {baseline: nowhere}, register: missing_baseline,
       ignore_errors: true, when: inventory_hostname == "n1"}
    - {envsnap.gpu.envsnap_capture: {label: lie1, python: "{{ liar_python }}"},
       environment: {AGENT_SAYS: not_an_object}, register: output_not_an_object,
       ignore_errors: true, when: inventory_hostname == "n1"}
    - {envsnap.gpu.envsnap_capture: {label: lie2, python: "{{ liar_python }}"},
       environment: {AGENT_SAYS: wrong_type}, register: output_of_wrong_type,
       ignore_errors: true, when: inventory_hostname == "n1"}
    - {envsnap.gpu.envsnap_assert: {driver: "1", python: "{{ liar_python }}"},
       environment: {AGENT_SAYS: not_an_object}, register: assert_not_an_object,
       ignore_errors: true, when: inventory_hostname == "n1"}
    - {envsnap.gpu.envsnap_capture: {label: lie3, python: "{{ liar_python }}"},
       environment: {AGENT_SAYS: too_big}, register: output_too_big,
       ignore_errors: true, when: inventory_hostname == "n1"}
    - name: what each task returned, for the test
      delegate_to: localhost
      ansible.builtin.copy:
        dest: "{{ out }}/{{ inventory_hostname }}.json"
        content: "{{ dict(names | zip(names | map('extract', vars))) | to_json }}"
      vars:
        names: [baseline_gate, many_drifted, driver_gate, bad_label, taken, unknown_option,
                bad_pattern, bad_timeout, no_python, venv, no_gate, missing_baseline,
                output_not_an_object, output_of_wrong_type, assert_not_an_object, output_too_big]
"""

# A host's python that runs the module as ever, then puts AGENT_SAYS's lie in place of the
# agent's output in the module's result: what a broken or hostile host could send back.
LIAR = """#!{python}
import json, os, subprocess, sys
LIES = {{"not_an_object": "[1, 2]", "too_big": " " * (5 << 20),
         "wrong_type": json.dumps({{"collectors": {{"system": {{"facts": {{"hostname": 5}}}}}}}})}}
done = subprocess.run([{python!r}, *sys.argv[1:]], stdout=subprocess.PIPE)
result = json.loads(done.stdout)
if "agent_output" in result:
    result["agent_output"] = LIES[os.environ["AGENT_SAYS"]]
sys.stdout.write(json.dumps(result))
sys.exit(done.returncode)
"""


@dataclass
class Fleet:
    root: Path
    env: dict[str, str]
    store: Path
    repo: Path
    example: subprocess.CompletedProcess[str]
    checks: subprocess.CompletedProcess[str]
    fleet_diff: subprocess.CompletedProcess[str]
    results: dict[str, dict[str, Any]]


def run(args: list[str], env: dict[str, str], cwd: Path,
        timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def envsnap(fleet_env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run([sys.executable, "-m", "envsnap", *args], fleet_env, cwd)


def write_inventory(root: Path, daemon: Sshd) -> Path:
    lines = ["[gpu]"] + [f"{name} ansible_host={address}"
                         for name, address in zip(HOSTS, daemon.addresses)]
    lines += ["[gpu:vars]", f"ansible_port={daemon.port}", "ansible_user=root",
              f"ansible_python_interpreter={PYTHON}"]
    (root / "inv.ini").write_text("\n".join(lines) + "\n")
    # What to record, as inventory vars that both envsnap and the playbook read: on a
    # command line, the worker's tag would make ansible-playbook a "worker" too.
    (root / "group_vars").mkdir()
    (root / "group_vars" / "gpu.yml").write_text(yaml.safe_dump(
        {"repos": [str(root / "sglang")], "procs": [WORKER_TAG]}))
    (root / "host_vars").mkdir()
    # the planted outlier: one host's jobs run with an NCCL variable the others lack
    (root / "host_vars" / f"{OUTLIER}.yml").write_text(
        f"job_environment: {{{PLANTED}: '1'}}\n")
    return root / "inv.ini"


def install_collection(env: dict[str, str], root: Path) -> Path:
    """envsnap writes the collection; ansible-galaxy packs and installs it."""
    built = envsnap(env, root, "ansible", str(root / "build"))
    assert built.returncode == 0, built.stderr
    source = Path(built.stdout.strip())
    packed = run([str(VENV_BIN / "ansible-galaxy"), "collection", "build", str(source),
                  "--output-path", str(root / "dist")], env, root)
    assert packed.returncode == 0, packed.stdout + packed.stderr
    (tarball,) = (root / "dist").glob("envsnap-gpu-*.tar.gz")
    installed = run([str(VENV_BIN / "ansible-galaxy"), "collection", "install", str(tarball),
                     "-p", str(root / "collections")], env, root)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return root / "collections"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    assert (VENV_BIN / "ansible-playbook").exists(), \
        "ansible-core is missing: install the test extra (bash tests/run.sh does)"
    root = tmp_path_factory.mktemp("ansible")
    daemon = start_sshd(root / "sshd", aliases=len(HOSTS))
    home = root / "home"
    env = daemon.write_home(home)
    env.update(ENVSNAP_STORE=str(root / "store"), PYTHONPATH=str(ROOT),
               PATH=f"{VENV_BIN}:{env.get('PATH', '/usr/bin:/bin')}", ANSIBLE_NOCOLOR="1",
               # Ansible's ssh is OpenSSH's client, which finds ~ in passwd, not $HOME
               ANSIBLE_SSH_COMMON_ARGS=f"-F {home / '.ssh' / 'config'}",
               ANSIBLE_FORKS=str(len(HOSTS)), ANSIBLE_RETRY_FILES_ENABLED="0")
    env["ANSIBLE_COLLECTIONS_PATH"] = str(install_collection(env, root))
    inventory = write_inventory(root, daemon)
    repo = root / "sglang"
    make_repo(repo)
    playbook = [str(VENV_BIN / "ansible-playbook"), "-i", str(inventory)]
    try:
        with sleeping_worker(WORKER_TAG, {"NCCL_PROTO": "LL", "HF_TOKEN": SECRET}):
            direct = envsnap(env, root, "capture", "n1", "--inventory", str(inventory),
                             "--label", "direct")
            assert direct.returncode == 0, direct.stdout + direct.stderr
            example = run([*playbook, str(EXAMPLE), "-e", "envsnap_label=fleet1"], env, root)
            (root / "checks.yml").write_text(CHECKS)
            (root / "out").mkdir()
            liar = root / "liar-python"
            liar.write_text(LIAR.format(python=PYTHON))
            liar.chmod(0o755)
            # a cap of 4 MiB on what a host sends back: a capture here is well under 1 MiB
            checks = run([*playbook, "checks.yml", "-e", f"out={root / 'out'}",
                          "-e", f"venv_python={sys.executable}", "-e", f"liar_python={liar}"],
                         {**env, "ENVSNAP_MAX_AGENT_OUTPUT_MB": "4"}, root)
        fleet_diff = envsnap(env, root, "diff", "--fleet", str(root / "store" / "fleet1"),
                             "--json")
        results = {path.stem: json.loads(path.read_text())
                   for path in (root / "out").glob("*.json")}
        yield Fleet(root, env, root / "store", repo, example, checks, fleet_diff, results)
    finally:
        daemon.stop()


def load(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(path.read_text())
    return document


def test_the_example_playbook_stores_every_host_as_envsnap_capture_would(fleet: Fleet) -> None:
    assert fleet.example.returncode == 0, fleet.example.stdout + fleet.example.stderr
    stored = sorted(path.stem for path in (fleet.store / "fleet1").glob("*.yaml"))
    assert stored == HOSTS
    signed = envsnap(fleet.env, fleet.root, "show", "fleet1/n1", "--json")
    assert signed.returncode == 0, signed.stderr
    assert json.loads(signed.stdout)["meta"]["label"] == "fleet1/n1"
    every_file = "".join(path.read_text() for path in fleet.store.rglob("*.yaml"))
    assert SECRET not in every_file and SECRET not in fleet.example.stdout


# What differs between two captures of one host whichever way the agent travels, named; no
# fact is among them (what a transport could change, the agent's environment and process
# table, came out equal), so the facts are compared whole.
MOMENT = {"captured_at", "signature"}      # when it ran, and the signature over all of it
AGENT_RUN = {"pid", "masking_seconds"}     # meta.agent: the agent's process, its masking time
# meta.agent: the start-up of the agent's own process; Ansible's module runs inside
# Ansible's (AnsiballZ), whose start-up is not the agent's to record
AGENT_START = "startup_seconds"
TIMINGS = "seconds"                        # meta.collectors.*: how long each collector took


def comparable(document: dict[str, Any]) -> dict[str, Any]:
    """The document less its label (chosen by the test), the readings of the moment
    (volatile: load, free memory, uptime) and the keys above."""
    kept = json.loads(json.dumps(document))
    meta = kept["meta"]
    for key in MOMENT | {"label"}:
        meta.pop(key)
    for key in AGENT_RUN:
        meta["agent"].pop(key)
    meta["agent"].pop(AGENT_START, None)
    for collector in meta["collectors"].values():
        collector.pop(TIMINGS)
    kept.pop("volatile")
    return kept


def differing(left: Any, right: Any, where: str = "") -> list[str]:
    """The paths where two documents differ, each with both values (a failure names them)."""
    if isinstance(left, dict) and isinstance(right, dict):
        return [found for key in sorted(set(left) | set(right), key=str)
                for found in differing(left.get(key), right.get(key), f"{where}.{key}")]
    return [] if left == right else [f"{where}: {left!r} != {right!r}"]


def test_the_modules_snapshot_equals_envsnap_captures(fleet: Fleet) -> None:
    direct = load(fleet.store / "direct.yaml")
    module = load(fleet.store / "fleet1" / "n1.yaml")
    assert differing(comparable(module), comparable(direct)) == []
    # the options travelled: the repo and the worker's environment (its secret masked alike)
    assert module["facts"]["git"]["repos"][str(fleet.repo)]["head"]
    workers = module["facts"]["env"]["processes"]
    assert [worker["env"]["NCCL_PROTO"] for worker in workers.values()] == ["LL"]
    assert (module["meta"]["host"], module["meta"]["address"]) == ("n1", "127.0.0.1")


def test_diff_fleet_finds_the_planted_outlier_and_nothing_else(fleet: Fleet) -> None:
    assert fleet.fleet_diff.returncode == 1, fleet.fleet_diff.stderr
    report = json.loads(fleet.fleet_diff.stdout)
    assert report["hosts"] == HOSTS and report["not_captured"] == []
    (found,) = report["disagreements"]
    assert (found["section"], found["path"]) == ("env", ["shell", PLANTED])
    assert [other["hosts"] for other in found["others"]] == [[OUTLIER]]
    assert found["others"][0]["value"] == "1" and found["majority_count"] == len(HOSTS) - 1


def test_the_python_option_picks_the_interpreter_that_runs_the_agent(fleet: Fleet) -> None:
    assert task(fleet, "n1", "venv")["label"] == "venv/n1"   # a play of three hosts
    document = load(fleet.store / "venv" / "n1.yaml")
    assert document["meta"]["agent"]["python"] == sys.executable
    assert document["meta"]["config"]["python"] == sys.executable
    # the snapshot is returned as a fact too, as it was stored (signature included)
    assert task(fleet, "n1", "venv")["ansible_facts"]["envsnap_snapshot"] == document
    assert load(fleet.store / "direct.yaml")["meta"]["agent"]["python"] == PYTHON


def task(fleet: Fleet, host: str, name: str) -> dict[str, Any]:
    assert fleet.checks.returncode == 0, fleet.checks.stdout + fleet.checks.stderr
    result: dict[str, Any] = fleet.results[host][name]
    return result


def test_assert_passes_a_good_host_and_names_the_gate_a_bad_one_fails(fleet: Fleet) -> None:
    for good in ("n1", "n2"):
        assert not task(fleet, good, "baseline_gate").get("failed"), fleet.results[good]
        assert task(fleet, good, "baseline_gate")["msg"] == f"{good}: every gate passed"
    drifted = task(fleet, OUTLIER, "baseline_gate")
    assert drifted["failed"]
    assert drifted["failures"] == ["baseline: 1 fact drifted from 'fleet1/n1'"]
    assert drifted["drifted"] == [f"env shell.{PLANTED}: (absent) -> 1"]
    assert drifted["msg"].splitlines() == [
        f"envsnap_assert: 1 gate failed on {OUTLIER}", "baseline: 1 fact drifted from 'fleet1/n1'",
        f"  env shell.{PLANTED}: (absent) -> 1"]
    no_driver = task(fleet, "n2", "driver_gate")
    assert no_driver["failed"] and [line.split(":")[0] for line in no_driver["failures"]] == \
        ["driver", "clocks_not_throttled"]
    assert no_driver["failures"][0] == "driver: 550.54 required, no NVIDIA driver found"


def test_a_failed_gate_prints_one_short_line_per_drifted_fact(fleet: Fleet) -> None:
    """Records among the facts (the repo and the worker left out of the capture): each is
    the diff's summary of it, on a line of its own in ansible-playbook's output, no repr."""
    result = task(fleet, OUTLIER, "many_drifted")
    facts = result["drifted"]
    assert result["failures"] == [f"baseline: {len(facts)} facts drifted from 'fleet1/n1'"]
    assert f"env shell.{PLANTED}: (absent) -> 1" in facts
    for record in ("git repos[", "env processes["):
        assert [fact for fact in facts if fact.startswith(record)
                and fact.endswith("} -> (absent)")], facts
    assert all(len(fact) <= 100 and "{'" not in fact for fact in facts), facts
    printed = [line.strip() for line in fleet.checks.stdout.splitlines()]
    shown = printed.index(result["failures"][0])
    assert printed[shown - 1].endswith(f"envsnap_assert: 1 gate failed on {OUTLIER}")
    assert printed[shown + 1:shown + 1 + len(facts)] == facts


def test_ansible_doc_reads_what_each_module_returns(fleet: Fleet) -> None:
    """The installed collection's documentation as ansible-doc parses it (a YAML slip there
    is "Missing documentation" to a user)."""
    modules = ["envsnap.gpu.envsnap_assert", "envsnap.gpu.envsnap_capture"]
    shown = run([str(VENV_BIN / "ansible-doc"), "--json", *modules], fleet.env, fleet.root)
    assert shown.returncode == 0, shown.stderr
    docs = json.loads(shown.stdout)
    assert sorted(docs["envsnap.gpu.envsnap_assert"]["return"]) == ["drifted", "failures"]
    assert "baseline" in docs["envsnap.gpu.envsnap_assert"]["doc"]["options"]


@pytest.mark.parametrize(("name", "message"), [
    ("bad_label", "invalid label '../up': use letters, digits"),
    ("taken", "snapshot 'fleet1/n1' already exists in "),
    ("unknown_option", "envsnap_capture: unsupported option(s) labl (known: collector_timeout, "),
    ("bad_pattern", "procs: pattern '(a+)+$' refused: "),
    ("bad_timeout", "collector_timeout must be a number above 0, not 'soon'"),
    ("no_python", "python not found on the host ('/nowhere/python3'): set the python "),
    ("no_gate", "envsnap_assert: no gate given (one or more of driver, nccl, "),
    ("missing_baseline", "no snapshot labelled 'nowhere' in "),
    ("output_not_an_object", "n1: the agent's output is refused: the document: expected a "
                             "mapping, got a list; nothing saved"),
    ("output_of_wrong_type", "n1: the agent's output: facts.system.hostname: expected a "
                             "string or null, got an integer (refused: nothing saved)"),
    ("assert_not_an_object", "n1: the agent's output is refused: the document: expected a "
                             "mapping, got a list; nothing saved"),
    ("output_too_big", "n1: the host printed more than 4 MiB, refused unread (a snapshot is "
                       "a few MB; ENVSNAP_MAX_AGENT_OUTPUT_MB raises the cap)"),
])
def test_bad_input_fails_the_task_with_one_clear_line(fleet: Fleet, name: str,
                                                      message: str) -> None:
    result = task(fleet, "n1", name)
    assert result["failed"] and result["msg"].startswith(message), result
    assert "\n" not in result["msg"] and "Traceback" not in result["msg"]
    assert "Unexpected failure" not in result["msg"]   # not an exception Ansible caught
    assert not list(fleet.store.glob("lie*"))   # nothing saved of what a host lied


def test_a_build_replaces_its_own_earlier_build_but_nothing_else(cli: Cli) -> None:
    first = cli("ansible", "out")
    assert first.returncode == 0, first.stderr
    built = Path(first.stdout.strip())
    assert (built / "plugins" / "module_utils" / "envsnap_agent" / "runner.py").is_file()
    assert "@VERSION@" not in (built / "galaxy.yml").read_text()
    (built / "stale.txt").write_text("from the earlier build\n")
    assert cli("ansible", "out").returncode == 0
    assert not (built / "stale.txt").exists()

    mine = cli.cwd / "mine" / "ansible_collections" / "envsnap" / "gpu"
    mine.mkdir(parents=True)
    (mine / "notes.txt").write_text("my own work\n")
    refused = cli("ansible", "mine")
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.strip().splitlines() == [
        f"envsnap: error: {mine} exists and is no collection envsnap built: move it away or "
        "pick another DEST"]
    assert (mine / "notes.txt").read_text() == "my own work\n"


H200 = ROOT / "tests" / "data" / "h200" / "snapshot.yaml"   # recorded on a real H200


def gates(document: dict[str, Any], **asked: Any) -> list[str]:
    from envsnap.ansible.controller import AgentRun, AssertRequest, gate_failures

    request = AssertRequest(driver=asked.get("driver"), nccl=asked.get("nccl"),
                            clocks_not_throttled=asked.get("clocks", False), baseline=None,
                            baseline_name=None, agent=AgentRun({}, None, {}))
    return [failure.line for failure in gate_failures(request, document)]


def test_the_gates_read_a_real_h200_snapshot() -> None:
    """The hosts of the tests have no GPU; the gates' reading of one is checked on the
    snapshot recorded on an H200 (driver 580.159.04, PyTorch's NCCL 2.28.9, idle clocks)."""
    h200 = load(H200)
    assert gates(h200, driver="580", nccl="2.28", clocks=True) == []
    assert gates(h200, driver="580.159.04", nccl="2.28.9") == []
    assert gates(h200, driver="580.15", nccl="2.27") == [
        "driver: 580.15 required, found 580.159.04",
        "nccl: 2.27 required, found 2.28.9 (torch)"]
    (gpu,) = h200["volatile"]["nvidia"]["gpus"]
    h200["volatile"]["nvidia"]["gpus"][gpu]["clock_event_reasons"] = ["gpu_idle", "sw_power_cap"]
    assert gates(h200, clocks=True) == [f"clocks_not_throttled: GPU {gpu} sw_power_cap"]
    del h200["facts"]["cuda_nccl"]["nccl"]["torch"]   # then every NCCL found must match
    assert gates(h200, nccl="2.28.9") == [
        "nccl: 2.28.9 required, found 2.28.3 (/usr/lib/x86_64-linux-gnu/libnccl.so.2.28.3)"]


def test_a_baseline_gate_names_its_first_ten_facts_and_counts_the_rest() -> None:
    from envsnap.ansible.controller import AgentRun, AssertRequest, failed_message, gate_failures

    good = load(H200)
    now = json.loads(json.dumps(good))
    now["facts"]["env"]["shell"].update({f"NCCL_TEST_{n:02}": str(n) for n in range(11)})
    now["facts"]["nvidia"]["driver"] = "570.124.06"
    request = AssertRequest(driver="580", nccl=None, clocks_not_throttled=False, baseline=good,
                            baseline_name="good", agent=AgentRun({}, None, {}))
    failures = gate_failures(request, now)
    assert [failure.line for failure in failures] == [
        "driver: 580 required, found 570.124.06",
        "baseline: 12 facts drifted from 'good' (the first 10 below; envsnap diff names every "
        "one)"]
    assert len(failures[1].facts) == 10 and "env shell.NCCL_TEST_00: (absent) -> 0" in \
        failures[1].facts
    lines = failed_message("n5", failures).splitlines()
    assert lines[0] == "envsnap_assert: 2 gates failed on n5" and len(lines) == 13
