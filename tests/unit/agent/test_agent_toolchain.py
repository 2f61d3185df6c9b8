"""The compilers, CMake and libc (agent/toolchain.py) and lscpu's facts (agent/lscpu.py) as
collect_env and lscpu word them, read by real programs and the host's own files."""
from __future__ import annotations

import os
import shutil
import stat
import time
from pathlib import Path

import pytest

from envsnap.agent import lscpu, toolchain


def program(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_each_tool_is_read_as_collect_env_reads_it_and_a_hung_one_is_cut_off(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sleep = shutil.which("sleep")
    program(tmp_path, "gcc", f"exec {sleep} 30")
    program(tmp_path, "clang", "echo 'Ubuntu clang version 18.1.3 (1ubuntu1)'; "
                               "echo 'Target: x86_64-pc-linux-gnu'")
    program(tmp_path, "cmake", f"echo 'cmake version 3.28.3'; exec >&-; exec {sleep} 30")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    started = time.monotonic()
    assert toolchain.collect_tools(0.5) == {"gcc": None, "clang": "18.1.3 (1ubuntu1)",
                                            "cmake": None}
    assert 0.5 <= time.monotonic() - started < 5   # both cut off at the timeout


def test_a_host_without_the_tools_runs_nothing(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert toolchain.collect_tools(1.0) == {"gcc": None, "clang": None, "cmake": None}


def test_an_answer_is_kept_until_the_program_changes(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir, home = tmp_path / "bin", tmp_path / "home"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("HOME", str(home))
    program(bin_dir, "gcc", f": > {tmp_path}/ran; echo 'gcc (Ubuntu 13.3.0) 13.3.0'")
    assert toolchain.collect_tools(5.0)["gcc"] == "(Ubuntu 13.3.0) 13.3.0"
    (tmp_path / "ran").unlink()
    assert toolchain.collect_tools(5.0)["gcc"] == "(Ubuntu 13.3.0) 13.3.0"
    assert not (tmp_path / "ran").exists()          # read back, not run
    cache = home / ".cache" / "envsnap" / "tools.json"
    assert cache.stat().st_mode & 0o777 == 0o600
    program(bin_dir, "gcc", "echo 'gcc (Ubuntu 14.2.0-4ubuntu2) 14.2.0'")   # an upgrade
    assert toolchain.collect_tools(5.0)["gcc"] == "(Ubuntu 14.2.0-4ubuntu2) 14.2.0"
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text("{}")
    cache.unlink()
    cache.symlink_to(elsewhere)                     # replaced by the next write, not followed
    program(bin_dir, "gcc", "echo 'gcc (GCC) 15.1.0'")
    assert toolchain.collect_tools(5.0)["gcc"] == "(GCC) 15.1.0"
    assert elsewhere.read_text() == "{}" and not cache.is_symlink()


def test_libc_is_what_glibc_says_of_itself() -> None:
    answer = os.confstr("CS_GNU_LIBC_VERSION")
    assert toolchain.libc_version() == (answer.replace(" ", "-") if answer else None)


@pytest.mark.parametrize("text, cpus", [("0-1", {0, 1}), ("0,1", {0, 1}),
                                        ("0-3,8,10-11", {0, 1, 2, 3, 8, 10, 11}),
                                        ("", set()), (None, set()), ("x-2", set())])
def test_a_cpu_list_is_the_set_it_names(text: str | None, cpus: set[int]) -> None:
    assert lscpu.cpu_set(text) == cpus


@pytest.mark.parametrize("size, text", [(768 << 10, "768 KiB"), (32 << 20, "32 MiB"),
                                        (1536 << 10, "1.5 MiB"), (512, "512 B"),
                                        ((1 << 20) - 1, "1024 KiB")])   # as util-linux rounds
def test_sizes_are_worded_as_util_linux_words_them(size: int, text: str) -> None:
    assert lscpu.human_size(size) == text


def test_the_first_processor_and_the_kernel_files_give_lscpu_fields() -> None:
    block = {"vendor_id": "GenuineIntel", "cpu family": "6", "model": "207",
             "stepping": "2", "bogomips": "4200.00", "flags": "fpu lm avx2",
             "address sizes": "46 bits physical, 57 bits virtual"}
    facts = lscpu.lscpu_facts(block, "x86_64", None)
    assert (facts["vendor_id"], facts["family"], facts["model_id"], facts["stepping"],
            facts["op_modes"], facts["caches"]) == ("GenuineIntel", "6", "207", "2",
                                                   "32-bit, 64-bit", {})
    assert "bogomips" not in facts and lscpu.bogomips(block) == "4200.00"   # a reading
    assert lscpu.vulnerability_name("spec_store_bypass") == "Spec store bypass"
