"""`envsnap report LABEL --format collect-env`: a snapshot as torch's collect_env prints it
(the layout of the real H200 recording, tests/data/h200/collect_env.txt), and the round
trip: `envsnap import` of that output gives the same facts."""
from __future__ import annotations

import importlib.util
import platform
import re
import subprocess
from pathlib import Path
from typing import Any

from conftest import Cli
from helpers.imported import H200, agent_collectors, mismatches, save_capture

from envsnap.snapshot.store import Store

RECORDED = (H200 / "collect_env.txt").read_text()


def keys(text: str) -> list[str]:
    """The `Key:` lines outside the CPU and library blocks, in order."""
    outside = text.split("\nCPU:\n")[0]
    return [m.group(1) for line in outside.splitlines()
            if (m := re.match(r"([A-Za-z][^:/]*?):", line)) and not line.startswith("GPU ")]


def pip_lines(text: str) -> set[str]:
    return {re.sub(r"[-_.]+", "-", line.split("==")[0]).lower() for line in text.splitlines()
            if line.startswith("[pip3]")}


def test_a_capture_printed_as_collect_env_has_its_layout_and_facts(cli: Cli) -> None:
    save_capture(cli.env["ENVSNAP_STORE"], H200, "mine")
    result = cli("report", "mine", "--format", "collect-env")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert keys(out) == keys(RECORDED)
    assert pip_lines(out) == pip_lines(RECORDED)         # the script's own filter, 31 lines
    for line in ("PyTorch version: 2.11.0+cu130", "CUDA used to build PyTorch: 13.0",
                 "Nvidia driver version: 580.159.04", "CUDA runtime version: 13.0.88",
                 "GPU models and configuration: GPU 0: NVIDIA H200",
                 "OS: Ubuntu 24.04.3 LTS (x86_64)", "[pip3] torch==2.11.0",
                 "[pip3] nvidia-nccl-cu13==2.28.9",
                 "Python version: 3.12.3 (main, Aug 31 2026, 10:18:26) [GCC 13.3.0] "
                 "(64-bit runtime)"):
        assert line + "\n" in out, line
    # what envsnap does not record, printed as the script prints what it cannot read
    assert "GCC version: Could not collect\n" in out
    assert "Is CUDA available: True\n" in out   # torch built with CUDA, NVML sees a GPU


def test_round_trip_import_of_the_printed_output_gives_the_same_facts(cli: Cli,
                                                                      tmp_path: Path) -> None:
    save_capture(cli.env["ENVSNAP_STORE"], H200, "mine")
    printed = tmp_path / "printed.txt"
    assert cli("report", "mine", "--format", "collect-env", "-o", str(printed)).returncode == 0
    assert cli("import", str(printed), "--label", "back").returncode == 0
    store = Store(cli.env["ENVSNAP_STORE"])
    agent = agent_collectors(H200)
    compared, wrong = mismatches(store.load("back")["facts"], agent)
    assert wrong == [] and compared >= 60, (compared, wrong)
    # and an imported paste printed and read again is the paste's facts, every one
    assert cli("import", str(H200 / "collect_env.txt"), "--label", "paste").returncode == 0
    again = tmp_path / "again.txt"
    assert cli("report", "paste", "--format", "collect-env", "-o", str(again)).returncode == 0
    assert cli("import", str(again), "--label", "paste-again").returncode == 0
    assert store.load("paste-again")["facts"] == store.load("paste")["facts"]


def test_collect_env_shows_one_snapshot(cli: Cli) -> None:
    save_capture(cli.env["ENVSNAP_STORE"], H200, "mine")
    result = cli("report", "mine", "--vs", "mine", "--format", "collect-env")
    assert result.returncode == 2 and "without --vs" in result.stderr


CHECK_ENV_KEYS = ["Python", "CUDA available", "GPU 0", "GPU 0 Compute Capability",
                  "CUDA_HOME", "NVCC", "CUDA Driver Version", "PyTorch"]


def test_a_capture_printed_as_sglang_check_env_and_read_back(cli: Cli, tmp_path: Path) -> None:
    save_capture(cli.env["ENVSNAP_STORE"], H200, "mine")
    printed = tmp_path / "check_env.txt"
    result = cli("report", "mine", "--format", "check-env", "-o", str(printed))
    assert result.returncode == 0, result.stderr
    text = printed.read_text()
    keys = [line.split(":")[0] for line in text.splitlines()]
    assert keys[:8] == CHECK_ENV_KEYS and keys[8] == "sglang"   # the script's order
    for line in ("GPU 0: NVIDIA H200", "NVCC: Cuda compilation tools, release 13.0, V13.0.88",
                 "CUDA Driver Version: 580.159.04", "PyTorch: 2.11.0+cu130",
                 "sglang: Module Not Found", "triton: 3.6.0", "ulimit soft: 20000",
                 "NVIDIA Topology: ", "GPU0\t X \t0-15\t0\t\tN/A"):
        assert line + "\n" in text, line
    assert cli("import", str(printed), "--label", "back").returncode == 0
    back = Store(cli.env["ENVSNAP_STORE"]).load("back")
    assert back["meta"]["imported"]["sources"]["check_env.txt"]["tool"] == "SGLang check_env"
    compared, wrong = mismatches(back["facts"], agent_collectors(H200))
    assert wrong == [] and compared >= 20, (compared, wrong)


def first_line(argv: list[str]) -> str | None:
    """What collect_env's run_and_parse_first_match sees: the program's first line."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        return None
    return done.stdout.splitlines()[0] if done.returncode == 0 and done.stdout else None


def collect_env_says(argv: list[str], pattern: str) -> str:
    """run_and_parse_first_match of collect_env, or what it prints when that finds nothing."""
    line = first_line(argv)
    match = re.search(pattern, line) if line else None
    return match.group(1).strip() if match else "Could not collect"


def cpuinfo_first_block() -> dict[str, str]:
    block = Path("/proc/cpuinfo").read_text().strip().split("\n\n")[0]
    return {key.strip(): value.strip() for key, _, value in
            (line.partition(":") for line in block.splitlines())}


def lscpu_list(cpus: set[int]) -> str:
    """util-linux's own list form, written out here apart from the report's."""
    parts: list[str] = []
    run: list[int] = []
    for cpu in sorted(cpus) + [None]:
        if run and (cpu is None or cpu != run[-1] + 1):
            parts.append(str(run[0]) if len(run) == 1 else ",".join(map(str, run))
                         if len(run) == 2 else f"{run[0]}-{run[-1]}")
            run = []
        if cpu is not None:
            run.append(cpu)
    return ",".join(parts)


def test_a_local_capture_states_what_collect_env_reads_from_the_host(cli: Cli) -> None:
    assert cli("capture", "local", "--label", "here").returncode == 0
    result = cli("report", "here", "--format", "collect-env")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    expected_gcc = collect_env_says(["gcc", "--version"], r"gcc (.*)")
    expected_cmake = collect_env_says(["cmake", "--version"], r"cmake (.*)")
    glibc = subprocess.run(["getconf", "GNU_LIBC_VERSION"], capture_output=True, text=True)
    cpu = cpuinfo_first_block()
    online: set[int] = set()
    for part in Path("/sys/devices/system/cpu/online").read_text().strip().split(","):
        low, _, high = part.partition("-")
        online.update(range(int(low), int(high or low) + 1))
    expected = [f"GCC version: {expected_gcc}", f"CMake version: {expected_cmake}",
                f"Libc version: {glibc.stdout.strip().replace(' ', '-')}",
                f"{'Vendor ID:':<41}{cpu['vendor_id']}", f"{'Model name:':<41}{cpu['model name']}",
                f"{'CPU family:':<41}{cpu['cpu family']}", f"{'Model:':<41}{cpu['model']}",
                f"{'Stepping:':<41}{cpu['stepping']}", f"{'BogoMIPS:':<41}{cpu['bogomips']}",
                f"{'Flags:':<41}{cpu['flags']}",
                f"{'Address sizes:':<41}{cpu['address sizes']}",
                f"{'CPU(s):':<41}{len(cpu_lines_of_cpuinfo())}",
                f"{'On-line CPU(s) list:':<41}{lscpu_list(online)}",
                f"{'Byte Order:':<41}Little Endian",
                f"Python platform: {platform.platform()}"]
    for line in expected:
        assert line + "\n" in out, (line, out)
    if importlib.util.find_spec("torch") is None:
        assert "Is CUDA available: N/A\n" in out   # no torch: the script prints N/A too
    vulnerabilities = Path("/sys/devices/system/cpu/vulnerabilities")
    for path in sorted(vulnerabilities.iterdir()) if vulnerabilities.is_dir() else []:
        name = path.name.replace("_", " ").capitalize()
        word = path.read_text().strip()
        if word.startswith("Mitigation: "):   # lscpu's own rewording
            word = "Mitigation; " + word.split(": ", 1)[1].replace(":", "")
        assert f"{'Vulnerability ' + name + ':':<41}{word}\n" in out
    cache = Path("/sys/devices/system/cpu/cpu0/cache/index0")
    if cache.is_dir():
        assert re.search(r"^L1d cache: +\d+(\.\d)? [KMG]iB \(\d+ instances?\)$", out, re.M)


def cpu_lines_of_cpuinfo() -> list[str]:
    return [line for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("processor")]


def cudnn_block(text: str) -> list[str]:
    lines = text.splitlines()
    at = next(n for n, line in enumerate(lines) if line.startswith("cuDNN version:"))
    end = next(n for n in range(at + 1, len(lines)) if not lines[n].startswith("/"))
    return lines[at:end]


def test_the_cudnn_libraries_a_capture_records_print_as_collect_env_printed_them(
        cli: Cli) -> None:
    """The H200's loader cache named eight libcudnn files, as the script printed them: a
    capture recording those prints the same block, line for line."""
    printed = cudnn_block(RECORDED)

    def with_libraries(collectors: dict[str, Any]) -> None:
        collectors["cuda_nccl"]["facts"]["cudnn"]["libraries"] = {
            path: path.rsplit(".so.", 1)[1] for path in reversed(printed[1:])}
    save_capture(cli.env["ENVSNAP_STORE"], H200, "mine", with_libraries)
    out = cli("report", "mine", "--format", "collect-env").stdout
    assert printed[0] == "cuDNN version: Probably one of the following:"
    assert cudnn_block(out) == printed

    def one(collectors: dict[str, Any]) -> None:
        collectors["cuda_nccl"]["facts"]["cudnn"]["libraries"] = {printed[1]: "9.14.0"}
    save_capture(cli.env["ENVSNAP_STORE"], H200, "one", one)
    out = cli("report", "one", "--format", "collect-env").stdout
    assert cudnn_block(out) == [f"cuDNN version: {printed[1]}"]
