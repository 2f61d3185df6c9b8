"""Every input is read only so far: a gzip that unpacks to a gigabyte is unpacked as a
stream and stopped at the cap (a paste refused in one line, a rotated log cut with a note),
in bounded memory and little time; a reader of nested data (TOML, YAML, JSON, INI) nested
thousands deep answers in one line and a documented exit code, never an internal error;
one member of a `diff --fleet` folder that cannot be read is named and the rest compared."""
from __future__ import annotations

import gzip
import json
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import Cli

from envsnap.errors import ExitCode

DATA = Path(__file__).resolve().parent.parent / "data"
COLLECT_ENV = DATA / "h200" / "collect_env.txt"
UNPACKED_MIB = 1024          # what the small .gz unpacks to
MOST_MEMORY_MIB = 400        # what reading it may take: the 64 MiB cap and the interpreter

# The envsnap command as a child of a python of its own, which prints the largest resident
# set of its waited-for descendants (the agent envsnap starts included) after the output.
MEASURED = """\
import resource, subprocess, sys
done = subprocess.run([sys.executable, "-m", "envsnap", *sys.argv[1:]])
print("maxrss_kib", resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, done.returncode)
"""


def zeros_gz(path: Path, head: bytes = b"", mib: int = UNPACKED_MIB) -> Path:
    """A gzip file of about 1 MB that unpacks to `head` and `mib` MiB of zeros: one member
    packed once and repeated (gzip reads concatenated members as one stream)."""
    member = gzip.compress(b"\0" * (1 << 20), compresslevel=9)
    path.write_bytes(gzip.compress(head) + member * mib)
    return path


def measured(cli: Cli, *args: str) -> tuple[subprocess.CompletedProcess[str], float, float]:
    """`envsnap ARGS` as a process: its result, its peak memory in MiB and its seconds."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", MEASURED, *args], cwd=cli.cwd, env=cli.env,
                          capture_output=True, text=True, timeout=300)
    seconds = time.monotonic() - started
    head, _, last = done.stdout.rstrip("\n").rpartition("\n")
    word, peak, code = last.split()
    assert word == "maxrss_kib", done.stdout
    return (subprocess.CompletedProcess(args, int(code), head, done.stderr), int(peak) / 1024,
            seconds)


def test_a_small_gz_that_unpacks_to_a_gigabyte_is_refused_at_the_cap(cli: Cli) -> None:
    packed = zeros_gz(cli.cwd / "collect_env.txt.gz", COLLECT_ENV.read_bytes())
    assert packed.stat().st_size < 2 << 20
    for args in (("import", str(packed), "--label", "theirs"),
                 ("diff", str(packed), str(COLLECT_ENV))):
        result, peak_mib, seconds = measured(cli, *args)
        assert peak_mib < MOST_MEMORY_MIB, (args[0], peak_mib)
        assert seconds < 30, (args[0], seconds)
        assert result.returncode == ExitCode.USAGE, result.stderr
        assert result.stderr == (f"envsnap: error: {packed}: over 64 MiB unpacked: not a "
                                 "pasted output\n")
    assert not (cli.cwd / "store" / "theirs.yaml").exists()


def test_a_rotated_log_that_unpacks_to_a_gigabyte_is_cut_with_a_note(cli: Cli) -> None:
    logs = cli.cwd / "root" / "var" / "log"
    logs.mkdir(parents=True)
    minute_ago = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(time.time() - 60))
    (logs / "dpkg.log").write_text(f"{minute_ago} upgrade libnccl2:amd64 2.18.3-1 2.21.5-1\n")
    rotated = zeros_gz(logs / "dpkg.log.1.gz")
    result, peak_mib, seconds = measured(cli, "timeline", "local", "--log-root",
                                         str(cli.cwd / "root"), "--since", "1h", "--json")
    assert peak_mib < MOST_MEMORY_MIB, peak_mib
    assert seconds < 30, seconds
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert any("libnccl2" in event["what"] for event in found["events"])   # dpkg.log read
    assert f"dpkg: {rotated}: over 64 MiB unpacked: only its first 64 MiB read" in \
        found["unreadable"]


def test_a_fifo_where_a_log_should_be_is_named_not_waited_on(cli: Cli) -> None:
    logs = cli.cwd / "root" / "var" / "log"
    (logs / "apt").mkdir(parents=True)
    os.mkfifo(logs / "dpkg.log")
    os.mkfifo(logs / "apt" / "history.log")
    result = cli("timeline", "local", "--log-root", str(cli.cwd / "root"), "--since", "1h",
                 "--json", timeout=60)
    assert result.returncode == 0, result.stderr
    unreadable = json.loads(result.stdout)["unreadable"]
    assert f"dpkg: {logs}/dpkg.log: not a regular file" in unreadable
    assert f"apt: {logs}/apt/history.log: not a regular file" in unreadable


def test_a_paste_given_through_a_pipe_is_still_read(cli: Cli) -> None:
    """As `envsnap import <(ssh gpu1 python -m torch.utils.collect_env)` gives it."""
    fifo = cli.cwd / "paste"
    os.mkfifo(fifo)
    writer = threading.Thread(target=fifo.write_bytes, args=(COLLECT_ENV.read_bytes(),))
    writer.start()
    result = cli("import", str(fifo), "--label", "theirs", timeout=60)
    writer.join()
    assert result.returncode == 0, result.stderr


DEPTH = 5000
LIST = "[" * DEPTH + "1" + "]" * DEPTH
TABLE = "{a = " * DEPTH + "1" + "}" * DEPTH
DEEP_INVENTORIES = {
    "inv.toml": f'[all.hosts.gpu1]\nansible_host = "10.0.0.1"\nx = {TABLE}\n',
    "inv.yaml": f"all:\n  hosts:\n    gpu1:\n      x: {LIST}\n",
    "inv.json": '{"all": {"hosts": {"gpu1": {"x": ' + LIST + "}}}}",
    "ansible.json": '{"_meta": {"hostvars": {"gpu1": {"x": ' + LIST + '}}}, '
                    '"all": {"children": ["ungrouped"]}, "ungrouped": {"hosts": ["gpu1"]}}',
}


@pytest.mark.parametrize("name", sorted(DEEP_INVENTORIES))
def test_an_inventory_nested_thousands_deep_is_one_line(cli: Cli, name: str) -> None:
    (cli.cwd / name).write_text(DEEP_INVENTORIES[name])
    result = cli("capture", "gpu1", "--inventory", name, "--label", "run1")
    assert result.returncode == ExitCode.USAGE, result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith(f"envsnap: error: {name}: ")
    assert "nested too deeply" in result.stderr


def test_an_ini_value_nested_thousands_deep_is_text_as_ansible_reads_it(cli: Cli) -> None:
    (cli.cwd / "inv.ini").write_text(f"[gpu]\nlocal ansible_connection=local x={LIST}\n")
    result = cli("capture", "local", "--inventory", "inv.ini", "--label", "run1")
    assert result.returncode == 0, result.stderr


DEEP_JSON_PASTES = {
    "pip_inspect.json": '{"version": "1", "pip_version": "24.0", "installed": ' + LIST + "}",
    "pip_list.json": '[{"name": "torch", "version": ' + LIST + "}]",
}


@pytest.mark.parametrize("name", sorted(DEEP_JSON_PASTES))
def test_a_json_paste_nested_thousands_deep_is_one_line_and_exit_4(cli: Cli, name: str) -> None:
    (cli.cwd / name).write_text(DEEP_JSON_PASTES[name])
    for args in (("import", name, "--label", "theirs"), ("diff", name, str(COLLECT_ENV))):
        result = cli(*args)
        assert result.returncode == ExitCode.INVALID, result.stderr
        assert result.stderr == (f"envsnap: error: {name}:1: cannot read it as JSON (nested "
                                 "too deeply)\n")


def test_an_xml_paste_nested_thousands_deep_is_read(cli: Cli) -> None:
    (cli.cwd / "smi_q.xml").write_text(
        '<?xml version="1.0" ?>\n<nvidia_smi_log><driver_version>580.1</driver_version>'
        + "<a>" * DEPTH + "</a>" * DEPTH + "</nvidia_smi_log>")
    result = cli("import", "smi_q.xml", "--label", "theirs")
    assert result.returncode == 0, result.stderr


# Each file given to envsnap read no further than its cap: /dev/zero never ends, and a
# reader that reads it whole runs out of memory (here, of the limit it is run under).
ENDLESS = {
    "inventory": (("capture", "local", "--inventory", "/dev/zero", "--label", "run1"),
                  ExitCode.USAGE, "cannot read inventory /dev/zero: over 64 MiB: not an "
                                  "inventory"),
    "playbook": (("play", "/dev/zero"), ExitCode.INVALID,
                 "/dev/zero: not a playbook: larger than 64 MiB"),
    "extra vars": (("play", "pb.yml", "-e", "@/dev/zero"), ExitCode.USAGE,
                   "-e @/dev/zero: larger than 64 MiB"),
    "limit file": (("capture", "local", "--limit", "@/dev/zero", "--label", "run1"),
                   ExitCode.USAGE, "--limit @/dev/zero: not a regular file (a limit starting "
                                   "with '@' is a file of host names, one a line)"),
}


def limited_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


@pytest.mark.parametrize("what", sorted(ENDLESS))
def test_a_file_that_never_ends_is_read_only_to_its_cap(cli: Cli, what: str) -> None:
    args, code, line = ENDLESS[what]
    (cli.cwd / "pb.yml").write_text("- hosts: local\n  tasks: []\n")
    result = subprocess.run([sys.executable, "-m", "envsnap", *args], cwd=cli.cwd, env=cli.env,
                            capture_output=True, text=True, timeout=120,
                            preexec_fn=limited_memory)
    assert (result.returncode, result.stderr) == (code, f"envsnap: error: {line}\n")


def test_a_fifo_or_a_folder_in_a_fleet_folder_is_named_and_the_rest_compared(cli: Cli) -> None:
    assert cli("import", str(COLLECT_ENV), "--label", "one").returncode == 0
    folder = cli.cwd / "fleet"
    folder.mkdir()
    for host in ("n1", "n2"):
        text = (cli.cwd / "store" / "one.yaml").read_text()
        (folder / f"{host}.yaml").write_text(text.replace("host: imported", f"host: {host}"))
    os.mkfifo(folder / "n3.yaml")
    (folder / "n4.yaml").mkdir()
    result = cli("diff", "--fleet", str(folder), timeout=60)
    assert result.returncode == ExitCode.INVALID, result.stderr
    assert result.stdout.startswith("fleet of 2 snapshots: every compared fact agrees "
                                    "(2 snapshots unreadable)")
    assert result.stderr == (
        f"envsnap: error: {folder}/n3.yaml: a FIFO, not a snapshot file (left out of the "
        "fleet)\n"
        f"envsnap: error: {folder}/n4.yaml: a folder, not a snapshot file (left out of the "
        "fleet)\n")
