"""The example playbook envsnap/ansible/examples/watch.yml under the real ansible-core: it
installs `envsnap watch` on every host of an inventory through `envsnap watch --install`
(cron here: no user systemd runs in the tests), changes nothing the second time, and
watch_state=absent removes it. The hosts are local ones (ansible_connection=local), each
with its own home, store and crontab."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT
from helpers.schedulers import write_fake_crontab
from helpers.sshd import home_env

VENV_BIN = Path(sys.executable).parent   # where pip put ansible-playbook and envsnap
PLAYBOOK = ROOT / "envsnap" / "ansible" / "examples" / "watch.yml"
HOSTS = ("w1", "w2")


def write_inventory(root: Path, tools: Path) -> Path:
    """Two local hosts; each installs with its own HOME, store and crontab (host vars)."""
    lines = ["[gpu]", *(f"{host} ansible_connection=local" for host in HOSTS),
             "[gpu:vars]", f"ansible_python_interpreter={sys.executable}"]
    (root / "hosts.ini").write_text("\n".join(lines) + "\n")
    (root / "group_vars").mkdir()
    (root / "group_vars" / "gpu.yml").write_text(yaml.safe_dump(
        {"procs": ["sglang.launch_server"], "repos": [str(root / "sglang")],
         "envsnap_program": str(VENV_BIN / "envsnap")}))
    (root / "host_vars").mkdir()
    for host in HOSTS:
        home = root / host
        home.mkdir()
        (root / "host_vars" / f"{host}.yml").write_text(yaml.safe_dump({
            "watch_store": str(home / "store"),
            "watch_environment": {**home_env(home), "PYTHONPATH": str(ROOT),
                                  "PATH": f"{tools}:{VENV_BIN}:/usr/bin:/bin",
                                  "CRONTAB_FILE": str(home / "crontab.txt")}}))
    return root / "hosts.ini"


def changed(output: str) -> dict[str, int]:
    """Each host's changed= in the play's recap."""
    return {host: int(count) for host, count in
            re.findall(r"^(\w+)\s+: ok=\d+\s+changed=(\d+)", output, re.MULTILINE)}


def test_the_watch_playbook_installs_once_and_removes(tmp_path: Path) -> None:
    assert (VENV_BIN / "ansible-playbook").exists(), \
        "ansible-core is missing: install the test extra (bash tests/run.sh does)"
    tools = tmp_path / "tools"
    tools.mkdir()
    write_fake_crontab(tools)
    inventory = write_inventory(tmp_path, tools)
    env = {"PATH": f"{VENV_BIN}:/usr/bin:/bin", "HOME": str(tmp_path),
           "ANSIBLE_NOCOLOR": "1", "ANSIBLE_RETRY_FILES_ENABLED": "0",
           "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp")}

    def play(*extra: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", str(inventory),
                               str(PLAYBOOK), "-e", "watch_scheduler=cron", *extra],
                              env=env, cwd=tmp_path, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        return done

    def table(host: str) -> str:
        path = tmp_path / host / "crontab.txt"
        return path.read_text() if path.exists() else ""

    (tmp_path / "w2" / "crontab.txt").write_text("0 3 * * * /usr/bin/backup\n")
    first = play()
    assert changed(first.stdout) == {"w1": 1, "w2": 1}, first.stdout
    for host in HOSTS:
        ours = [line for line in table(host).splitlines() if "# envsnap-watch:local" in line]
        assert len(ours) == 3, table(host)
        assert ours[1].startswith("@reboot cd ") and \
            f"{VENV_BIN / 'envsnap'} watch local --every 10m --proc sglang.launch_server " \
            f"--repo {tmp_path / 'sglang'} --store {tmp_path / host / 'store'}" in ours[1]
    installed = {host: table(host) for host in HOSTS}

    second = play()
    assert changed(second.stdout) == {"w1": 0, "w2": 0}, second.stdout
    assert {host: table(host) for host in HOSTS} == installed

    removed = play("-e", "watch_state=absent")
    assert changed(removed.stdout) == {"w1": 1, "w2": 1}, removed.stdout
    assert (table("w1"), table("w2")) == ("", "0 3 * * * /usr/bin/backup\n")
    assert changed(play("-e", "watch_state=absent").stdout) == {"w1": 0, "w2": 0}


@pytest.mark.parametrize("state", ["present", "absent"])
def test_the_playbook_parses(state: str) -> None:
    """ansible-playbook --syntax-check reads it as a user's would be read."""
    done = subprocess.run([str(VENV_BIN / "ansible-playbook"), "--syntax-check", "-i",
                           "localhost,", str(PLAYBOOK), "-e", f"watch_state={state}"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
