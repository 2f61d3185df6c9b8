"""The nvidia collector: NVML and nvidia-smi parsers on output recorded on a real H200
(tests/data/h200, made by tests/data/record_gpu.py), fakes for what CI cannot have (a
failing NVML query, a hanging nvidia-smi), and this driverless host as it is."""
from __future__ import annotations

import json
import os
import stat
import sys
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any

import pytest
from helpers.paths import DATA
from helpers.smicheck import NOT_IN_SMI, crosscheck

from envsnap.agent import nvidia, nvidia_driver, nvml_reader, runner, smi, util

DATA = DATA / "h200"
H200_BUS = "00000000:00:06.0"
STORY_NVRM = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  590.48.01  Release Build"
              "  (dvs-builder@U22-I3-AF03-09-1)  Mon Dec  8 12:00:00 UTC 2025")
STORY_GCC = "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)"
# Facts only NVML can give; the nvidia-smi fallback leaves them out.
NVML_ONLY = {"architecture", "clock_max_video_mhz", "nvlink_active", "temp_shutdown_c",
             "temp_slowdown_c"}


def load_json(name: str) -> Any:
    return json.loads((DATA / name).read_text())


def text(name: str) -> str:
    return (DATA / name).read_text()


# ---- a pynvml that replays a recorded raw dict ------------------------------------------

class FakeNVMLError(Exception):
    pass


class ReplayNVML:
    """Answers every query from a raw dict recorded by nvml_reader.read_raw on real
    hardware; `fail` makes chosen queries raise, `missing` hides chosen functions."""

    NVMLError = FakeNVMLError

    def __init__(self, raw: dict[str, Any], fail: dict[str, Exception] | None = None,
                 missing: tuple[str, ...] = ()) -> None:
        self.raw, self.fail, self.missing = raw, fail or {}, missing
        self.keys = {(names.split("|")[0], args): key for key, names, args
                     in nvml_reader.SYSTEM_QUERIES + nvml_reader.gpu_queries()}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("NVML_"):
            return name  # the reader passes constants back as they are
        if not name.startswith("nvml") or name in self.missing:
            raise AttributeError(name)
        return lambda *args: self.answer(name, args)

    def answer(self, name: str, args: tuple[Any, ...]) -> Any:
        if name in ("nvmlInit", "nvmlShutdown"):
            return None
        if name == "nvmlDeviceGetCount":
            return self.raw["system"]["device_count"]
        if name == "nvmlDeviceGetHandleByIndex":
            return ("handle", args[0])
        if name == "nvmlDeviceGetTopologyCommonAncestor":
            return self.value(self.raw["pairs"][f"{args[0][1]},{args[1][1]}"],
                              "common_ancestor")
        if args and isinstance(args[0], tuple):
            return self.value(self.raw["gpus"][str(args[0][1])], self.gpu_key(name, args[1:]))
        return self.value(self.raw["system"], self.keys[(name, args)])

    def gpu_key(self, name: str, args: tuple[Any, ...]) -> str:
        links = {"nvmlDeviceGetNvLinkState": "nvlink_state",
                 "nvmlDeviceGetNvLinkRemotePciInfo": "nvlink_remote_pci",
                 "nvmlDeviceGetNvLinkRemoteDeviceType": "nvlink_remote_type"}
        if name in links:
            return f"{links[name]}.{args[0]}"
        return self.keys[(name, args)]

    def value(self, readings: dict[str, Any], key: str) -> Any:
        if key in self.fail:
            raise self.fail[key]
        found = readings.get(key, {"error": "Not Supported"})
        if isinstance(found, dict) and "error" in found:
            raise FakeNVMLError(found["error"])
        return found


def write_script(folder: Path, name: str, body: str) -> Path:
    path = folder / name
    path.write_text(body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def fake_smi(folder: Path, reject: tuple[str, ...] = ()) -> Path:
    """An nvidia-smi that prints the recorded H200 output for the fields asked for, and
    rejects some fields the way an older nvidia-smi does."""
    body = f"""#!{sys.executable}
import csv, json, sys
data, reject = {str(DATA)!r}, {list(reject)!r}
if sys.argv[1] == "topo":
    sys.stdout.write(open(data + "/smi_topo_m.txt").read())
    sys.exit(0)
wanted = sys.argv[1].split("=", 1)[1].split(",")
for field in wanted:
    if field in reject:
        print('Field "%s" is not a valid field to query.' % field)
        sys.exit(2)
recorded = json.load(open(data + "/smi_query_fields.json"))
for row in csv.reader(open(data + "/smi_query.csv"), skipinitialspace=True):
    cells = dict(zip(recorded, row))
    print(", ".join(cells[field] for field in wanted))
"""
    return write_script(folder, "nvidia-smi", body)


@pytest.fixture
def path_with(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder put first on PATH, for fake programs."""
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", str(folder) + os.pathsep + os.environ.get("PATH", ""))
    return folder


@pytest.fixture
def no_real_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    if nvml_reader.load_nvml()[0] is not None:
        pytest.skip("this host has a usable NVML")
    real = util.which("nvidia-smi")
    if real:
        folders = os.environ["PATH"].split(os.pathsep)
        monkeypatch.setenv("PATH", os.pathsep.join(
            f for f in folders if f != os.path.dirname(real)))


# ---- the recorded H200 -----------------------------------------------------------------

def test_recorded_nvml_idle_parses_to_facts_and_volatile() -> None:
    facts, volatile = nvidia.parse_nvml(load_json("nvml_raw.json"))
    gpu = facts["gpus"][H200_BUS]
    assert (facts["driver"], facts["cuda_driver"], facts["gpu_count"]) == ("580.159.04", "13.0", 1)
    assert facts["userspace_library"]["version"] == "580.159.04"
    assert gpu["index"] == 0 and gpu["name"] == "NVIDIA H200" and gpu["architecture"] == "Hopper"
    assert (gpu["pcie_gen_current"], gpu["pcie_gen_max"], gpu["pcie_width_current"],
            gpu["pcie_width_max"]) == (5, 5, 16, 16)
    assert (gpu["power_limit_w"], gpu["clock_max_sm_mhz"], gpu["clock_app_mem_mhz"]) == \
        (700.0, 1980, 3201)
    assert gpu["ecc_mode_current"] == "Enabled" and gpu["mig_mode_current"] == "Disabled"
    assert gpu["cpu_affinity"] == "0-15" and gpu["numa_node"] is None
    reading = volatile["gpus"][H200_BUS]
    assert reading["clock_event_reasons"] == ["gpu_idle"] and reading["pstate"] == "P0"
    assert reading["fan_pct"] is None  # "Not Supported" on an SXM board: no fan
    assert not set(reading) & set(gpu), "a field is either a fact or volatile, never both"


def test_recorded_nvml_under_load_shows_the_power_cap() -> None:
    _, volatile = nvidia.parse_nvml(load_json("nvml_raw_load.json"))
    reading = volatile["gpus"][H200_BUS]
    assert reading["clock_event_reasons"] == ["sw_power_cap"]
    assert reading["clock_event_reasons_mask"] == "0x4"
    assert reading["power_draw_w"] > 600 and reading["clock_sm_mhz"] < 1980
    assert reading["utilization_gpu_pct"] == 100


def test_recorded_nvml_facts_agree_with_nvidia_smi_q() -> None:
    facts, volatile = nvidia.parse_nvml(load_json("nvml_raw.json"))
    query = smi.parse_query(text("smi_query.csv"), load_json("smi_query_fields.json"))
    report = crosscheck(facts, text("smi_q.xml"), smi.parse_topology(text("smi_topo_m.txt")),
                        query, nvlink_status="")
    assert report["mismatches"] == [] and report["gpus"] == 1
    assert set(report["unchecked"]) <= set(NOT_IN_SMI)
    gpu_xml = ElementTree.fromstring(text("smi_q.xml")).find("gpu")
    assert gpu_xml is not None
    active = sorted(node.tag.replace("clocks_event_reason_", "") for node in
                    gpu_xml.findall("clocks_event_reasons/*") if node.text == "Active")
    assert volatile["gpus"][H200_BUS]["clock_event_reasons"] == active
    assert str(volatile["gpus"][H200_BUS]["pcie_replay_count"]) == \
        gpu_xml.findtext("pci/replay_counter")


def smi_facts(suffix: str = "") -> tuple[dict[str, Any], dict[str, Any]]:
    query = smi.parse_query(text(f"smi_query{suffix}.csv"),
                            load_json(f"smi_query_fields{suffix}.json"))
    return nvidia.parse_smi(query, smi.parse_topology(text("smi_topo_m.txt")))


def test_recorded_nvidia_smi_gives_the_same_facts_as_nvml() -> None:
    from_smi, volatile = smi_facts()
    from_nvml, _ = nvidia.parse_nvml(load_json("nvml_raw.json"))
    nvml_gpu = {k: v for k, v in from_nvml["gpus"][H200_BUS].items() if k not in NVML_ONLY}
    assert from_smi["gpus"] == {H200_BUS: nvml_gpu}
    assert (from_smi["driver"], from_smi["source"]) == ("580.159.04", "nvidia-smi")
    assert volatile["gpus"][H200_BUS]["clock_event_reasons"] == ["gpu_idle"]
    _, loaded = smi_facts("_load")
    assert loaded["gpus"][H200_BUS]["clock_event_reasons"] == ["sw_power_cap"]


def test_our_query_fields_are_all_known_to_a_recent_nvidia_smi() -> None:
    known = text("smi_help_query_gpu.txt")
    unknown = [field for field, _, _ in smi.QUERY_FIELDS if f'"{field}"' not in known]
    assert unknown == []


def test_recorded_topology_of_one_gpu() -> None:
    topo = smi.parse_topology(text("smi_topo_m.txt"))
    assert topo == {"links": {"GPU0": {}},
                    "affinity": {"GPU0": {"cpu": "0-15", "numa": "0", "gpu_numa_id": "N/A"}},
                    "nics": {}}


HGX_TOPO = (
    "\t\x1b[4mGPU0\tGPU1\tGPU2\tGPU3\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
    "GPU0\t X \tNV18\tNV18\tNV18\tPXB\tSYS\t0-55,112-167\t0\t\tN/A\n"
    "GPU1\tNV18\t X \tNV18\tNV18\tSYS\tSYS\t0-55,112-167\t0\t\tN/A\n"
    "GPU2\tNV18\tNV18\t X \tNV18\tSYS\tSYS\t56-111,168-223\t1\t\tN/A\n"
    "GPU3\tNV18\tNV18\tNV18\t X \tSYS\tPXB\t56-111,168-223\t1\t\tN/A\n"
    "NIC0\tPXB\tSYS\tSYS\tSYS\t X \tSYS\t\t\t\t\n"
    "NIC1\tSYS\tSYS\tSYS\tPXB\tSYS\t X \t\t\t\t\n\n"
    "Legend:\n\n  X    = Self\n  NV#  = Connection traversing a bonded set of # NVLinks\n\n"
    "NIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_1\n")


def test_topology_matrix_of_four_gpus_and_nics_keyed_by_bus_id() -> None:
    topo = smi.parse_topology(HGX_TOPO)
    assert topo["links"]["GPU0"] == {"GPU1": "NV18", "GPU2": "NV18", "GPU3": "NV18",
                                     "NIC0": "PXB", "NIC1": "SYS"}
    assert topo["affinity"]["GPU3"] == {"cpu": "56-111,168-223", "numa": "1",
                                        "gpu_numa_id": "N/A"}
    assert topo["nics"] == {"NIC0": "mlx5_0", "NIC1": "mlx5_1"}
    buses = {f"GPU{i}": f"00000000:{0x18 + i:02X}:00.0" for i in range(4)}
    mapped = nvidia.smi_topology(topo, buses)
    assert mapped["00000000:18:00.0"]["mlx5_0"] == "PXB"
    assert mapped["00000000:1B:00.0"]["00000000:18:00.0"] == "NV18"


def nvlinked_gpu(bus: str, remotes: list[tuple[str, int]]) -> dict[str, Any]:
    readings: dict[str, Any] = {"pci": {"busId": bus}}
    for link, (remote, kind) in enumerate(remotes):
        readings[f"nvlink_state.{link}"] = 1
        readings[f"nvlink_remote_pci.{link}"] = {"busId": remote}
        readings[f"nvlink_remote_type.{link}"] = kind
    readings[f"nvlink_state.{len(remotes)}"] = {"error": "Invalid Argument"}
    return readings


def test_nvml_topology_names_pcie_levels_direct_links_and_nvswitch() -> None:
    switch = [("00000000:05:00.0", nvml_reader.NVLINK_SWITCH)] * 18
    raw = {"system": {}, "gpus": {
        "0": nvlinked_gpu("0000:18:00.0", switch), "1": nvlinked_gpu("0000:2a:00.0", switch),
        "2": nvlinked_gpu("0000:3a:00.0", [("00000000:4A:00.0", 0)] * 4),
        "3": nvlinked_gpu("0000:4a:00.0", [("00000000:3A:00.0", 0)] * 4)},
        "pairs": {"0,1": {"common_ancestor": 50}, "2,3": {"common_ancestor": 10},
                  "0,2": {"common_ancestor": 40}, "1,3": {"common_ancestor": {"error": "x"}}}}
    facts, _ = nvidia.parse_nvml(raw)
    topology = facts["topology"]
    assert topology["00000000:18:00.0"]["00000000:2A:00.0"] == "NV18"
    assert topology["00000000:3A:00.0"]["00000000:4A:00.0"] == "NV4"
    assert topology["00000000:3A:00.0"]["00000000:18:00.0"] == "NODE"
    assert topology["00000000:2A:00.0"]["00000000:4A:00.0"] == {"error": "x"}
    assert facts["gpus"]["00000000:18:00.0"]["nvlink_active"] == 18


# ---- pure helpers ----------------------------------------------------------------------

@pytest.mark.parametrize("mask, names", [
    (0, []), (0x1, ["gpu_idle"]), (0x4, ["sw_power_cap"]),
    (0x4 | 0x40 | 0x80, ["sw_power_cap", "hw_thermal_slowdown", "hw_power_brake_slowdown"]),
    (0x1FF & ~0x1, ["applications_clocks_setting", "sw_power_cap", "hw_slowdown",
                    "sync_boost", "sw_thermal_slowdown", "hw_thermal_slowdown",
                    "hw_power_brake_slowdown", "display_clocks_setting"]),
    (0x8 | 0x10000, ["hw_slowdown", "unknown_0x10000"]),
])
def test_clock_event_reasons_decode_to_names(mask: int, names: list[str]) -> None:
    assert nvidia.decode_clock_event_reasons(mask) == names


def test_smi_and_nvml_masks_are_decoded_alike() -> None:
    record = nvidia.finish_record({"clock_event_reasons_mask": 0x24})
    assert record == {"clock_event_reasons_mask": "0x24",
                      "clock_event_reasons": ["sw_power_cap", "sw_thermal_slowdown"]}


@pytest.mark.parametrize("given, normal", [
    ("00000000:19:00.0", "00000000:19:00.0"), ("0000:1b:00.0", "00000000:1B:00.0"),
    ("1b:00.0", "00000000:1B:00.0"), (" 00000001:C1:00.1 ", "00000001:C1:00.1"),
    ("not a bus id", "not a bus id"),
])
def test_bus_ids_are_normalised(given: str, normal: str) -> None:
    assert nvidia.normalize_bus_id(given) == normal


def test_affinity_masks_become_cpu_lists() -> None:
    assert nvidia.bitmask_ranges([0xFFFF]) == "0-15"
    assert nvidia.bitmask_ranges([0xFF, 0xFF << 32]) == "0-7,96-103"
    assert nvidia.bitmask_ranges([0b10101]) == "0,2,4"
    assert nvidia.bitmask_ranges([0]) == ""


def test_cuda_driver_version_code() -> None:
    assert [nvidia.cuda_version_text(c) for c in (13000, 12080, 11040)] == \
        ["13.0", "12.8", "11.4"]


def test_smi_cells() -> None:
    assert smi.convert("[N/A]", "int") is None and smi.convert("[Not Supported]", "int") is None
    assert smi.convert("[Unknown Error]", "int") == {"error": "Unknown Error"}
    assert smi.convert(" 700.00", "float") == 700.0 and smi.convert("16", "int") == 16
    assert smi.convert("0x00000000000001FF", "hex") == 0x1FF
    assert smi.convert("fast", "int") == {"error": "unparsed: fast"}


# ---- reading through a fake pynvml -----------------------------------------------------

def test_reading_a_replayed_h200_gives_back_the_recording() -> None:
    recorded = load_json("nvml_raw.json")
    raw = nvml_reader.read_raw(ReplayNVML(recorded))
    assert dict(raw, library=None) == dict(recorded, library=None)


def test_one_failing_nvml_query_is_recorded_in_place_and_the_rest_go_on() -> None:
    recorded = load_json("nvml_raw.json")
    fake = ReplayNVML(recorded, fail={
        "power_limit": FakeNVMLError("Unknown Error"),
        "clock_event_reasons": TypeError("bad argument"),
        "temperature": FakeNVMLError("Not Supported")}, missing=("nvmlDeviceGetVbiosVersion",))
    raw = nvml_reader.read_raw(fake)
    readings = raw["gpus"]["0"]
    assert readings["power_limit"] == {"error": "Unknown Error"}
    assert readings["clock_event_reasons"] == {"error": "TypeError: bad argument"}
    assert readings["vbios"] == {"error": "not in this pynvml: nvmlDeviceGetVbiosVersion"}
    facts, volatile = nvidia.parse_nvml(raw)
    gpu, reading = facts["gpus"][H200_BUS], volatile["gpus"][H200_BUS]
    assert gpu["power_limit_w"] == {"error": "Unknown Error"}
    assert gpu["power_default_limit_w"] == 700.0 and gpu["name"] == "NVIDIA H200"
    assert reading["clock_event_reasons_mask"] == {"error": "TypeError: bad argument"}
    assert "clock_event_reasons" not in reading and reading["temperature_c"] is None
    assert reading["clock_sm_mhz"] == recorded["gpus"]["0"]["clock_sm"]


def test_a_gpu_whose_handle_fails_keeps_its_place() -> None:
    class LostGpu(ReplayNVML):
        def answer(self, name: str, args: tuple[Any, ...]) -> Any:
            if name == "nvmlDeviceGetHandleByIndex":
                raise FakeNVMLError("GPU is lost")
            return super().answer(name, args)

    facts, _ = nvidia.parse_nvml(nvml_reader.read_raw(LostGpu(load_json("nvml_raw.json"))))
    assert facts["gpus"] == {"index:0": {"index": 0, "error": "GPU is lost"}}


def test_nvml_that_will_not_start_is_an_error_and_falls_back(no_real_driver: None) -> None:
    class Mismatch(ReplayNVML):
        def answer(self, name: str, args: tuple[Any, ...]) -> Any:
            if name == "nvmlInit":
                raise FakeNVMLError("RM has detected an NVML/RM version mismatch.")
            return super().answer(name, args)

    result = nvidia.collect_with(Mismatch(load_json("nvml_raw.json")), {})
    assert result["facts"]["errors"] == {"nvml": "RM has detected an NVML/RM version mismatch."}
    assert result["facts"]["driver"] is None


def test_nvml_through_collect_with_a_fake(no_real_driver: None) -> None:
    result = nvidia.collect_with(ReplayNVML(load_json("nvml_raw_load.json")), {})
    assert result["facts"]["source"] == "nvml" and "errors" not in result["facts"]
    assert result["volatile"]["gpus"][H200_BUS]["clock_event_reasons"] == ["sw_power_cap"]


# ---- this host, and fake nvidia-smi programs --------------------------------------------

def test_a_host_without_any_nvidia_driver_is_a_normal_state(no_real_driver: None) -> None:
    assert nvidia.collect({}) == {"facts": {"driver": None, "present": False,
                                            "reason": "no NVIDIA driver"}, "volatile": {}}
    result = runner.collect_all({"collectors": ["nvidia"]})["nvidia"]
    assert result["error"] is None and result["facts"]["present"] is False


def test_nvidia_smi_fallback_with_recorded_output(no_real_driver: None, path_with: Path) -> None:
    fake_smi(path_with, reject=("clocks_throttle_reasons.active", "inforom.img"))
    result = nvidia.collect({})
    facts = result["facts"]
    assert facts["source"] == "nvidia-smi" and "errors" not in facts
    gpu = facts["gpus"][H200_BUS]
    assert "inforom_image" not in gpu and gpu["pcie_width_max"] == 16
    assert gpu["cpu_affinity"] == "0-15"
    assert result["volatile"]["gpus"][H200_BUS]["clock_event_reasons"] == ["gpu_idle"]


def test_a_hanging_nvidia_smi_is_recorded_not_fatal(no_real_driver: None,
                                                    path_with: Path) -> None:
    write_script(path_with, "nvidia-smi", "#!/bin/sh\nexec sleep 30\n")
    started = time.monotonic()
    results = runner.collect_all({"collectors": ["nvidia", "cuda_nccl"],
                                  "nvidia": {"smi_timeout": 0.5}})
    assert time.monotonic() - started < 10
    facts = results["nvidia"]["facts"]
    assert results["nvidia"]["error"] is None and facts["present"] is True
    assert "timed out after" in facts["errors"]["nvidia-smi"]
    assert results["cuda_nccl"]["error"] is None


def test_a_failing_nvidia_smi_says_why(no_real_driver: None, path_with: Path) -> None:
    write_script(path_with, "nvidia-smi", "#!/bin/sh\necho 'NVIDIA-SMI has failed because it "
                 "couldn'\"'\"'t communicate with the NVIDIA driver.'\nexit 9\n")
    facts = nvidia.collect({})["facts"]
    assert facts["errors"]["nvidia-smi"].startswith("nvidia-smi exit 9: NVIDIA-SMI has failed")


# ---- the kernel module -----------------------------------------------------------------

def test_story_proc_version_lines() -> None:
    parsed = nvidia_driver.parse_proc_version(STORY_NVRM + "\n" + STORY_GCC + "\n")
    assert {k: parsed[k] for k in ("flavor", "version", "build", "build_type", "build_date",
                                   "arch", "gcc")} == {
        "flavor": "open", "version": "590.48.01", "build": "dvs-builder@U22-I3-AF03-09-1",
        "build_type": "Release Build", "build_date": "Mon Dec  8 12:00:00 UTC 2025",
        "arch": "x86_64", "gcc": "12.2.0"}
    assert parsed["gcc_line"] == "gcc version 12.2.0 (Debian 12.2.0-14)"


def test_recorded_h200_proc_version() -> None:
    parsed = nvidia_driver.parse_proc_version(text("proc_driver_nvidia_version.txt"))
    assert (parsed["flavor"], parsed["version"], parsed["build"], parsed["gcc"]) == \
        ("open", "580.159.04", "nixbld@", "15.3.0")
    assert "build_date" not in parsed  # this build left its date out


@pytest.mark.parametrize("line, expected", [
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.129.03  Thu Oct 19 18:56:32 UTC 2023",
     {"flavor": "proprietary", "version": "535.129.03", "arch": "x86_64",
      "build_date": "Thu Oct 19 18:56:32 UTC 2023"}),
    ("NVRM version: NVIDIA UNIX aarch64 Kernel Module  550.54.15  Tue Mar  5 22:15:33 UTC 2024",
     {"flavor": "proprietary", "version": "550.54.15", "arch": "aarch64"}),
])
def test_proprietary_proc_version_lines(line: str, expected: dict[str, str]) -> None:
    parsed = nvidia_driver.parse_nvrm_line(line)
    assert {k: parsed[k] for k in expected} == expected


def test_gcc_line_in_the_newer_format() -> None:
    line = "GCC version:  gcc-12 (Ubuntu 12.3.0-1ubuntu1~22.04) 12.3.0"
    assert nvidia_driver.parse_gcc_line(line)["gcc"] == "12.3.0"


def test_recorded_params() -> None:
    params = nvidia_driver.parse_params(text("proc_driver_nvidia_params.txt"))
    assert params["NvLinkDisable"] == "1" and params["RegistryDwords"] == '""'


MODINFO = """filename:       {path}
version:        590.48.01
license:        Dual MIT/GPL
firmware:       nvidia/590.48.01/gsp_tu10x.bin
alias:          char-major-195-*
srcversion:     ABCDEF0123456789ABCDEF0
vermagic:       6.8.0-49-generic SMP preempt mod_unload modversions
parm:           NvSwitchRegDwords:NvSwitch regkey (charp)
"""


def test_module_file_that_differs_from_the_loaded_module(tmp_path: Path, path_with: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    module = tmp_path / "nvidia.ko.zst"
    module.write_bytes(b"\0" * 100)
    os.utime(module, (1765195200, 1765195200))
    listing = MODINFO.format(path=module)
    write_script(path_with, "modinfo", f"#!/bin/sh\ncat <<'EOF'\n{listing}EOF\n")
    (tmp_path / "proc_version").write_text(STORY_NVRM + "\n" + STORY_GCC + "\n")
    sys_module = tmp_path / "sys" / "module"
    for name, version in (("nvidia", "590.48.01"), ("nvidia_uvm", "590.48.01")):
        (sys_module / name).mkdir(parents=True)
        (sys_module / name / "version").write_text(version + "\n")
    (sys_module / "nvidia" / "srcversion").write_text("0000000000000000000000A\n")
    monkeypatch.setattr(nvidia_driver, "PROC_VERSION", str(tmp_path / "proc_version"))
    monkeypatch.setattr(nvidia_driver, "SYS_MODULE", str(sys_module))
    facts = nvidia_driver.kernel_module_facts(5.0)
    assert facts["loaded"] == {"nvidia": "590.48.01", "nvidia_uvm": "590.48.01"}
    assert facts["file"] == {"path": str(module), "size": 100, "mtime": "2025-12-08T12:00:00Z"}
    assert facts["modinfo"]["license"] == "Dual MIT/GPL"
    assert facts["file_matches_loaded"] is False  # rebuilt on disk since it was loaded
    assert facts["flavor"] == "open" and facts["gcc"] == "12.2.0"


def test_recorded_agent_output_is_what_the_parser_gives() -> None:
    agent = load_json("agent.json")["collectors"]["nvidia"]
    assert agent["error"] is None and agent["seconds"] < 2
    assert agent["facts"]["gpus"][H200_BUS]["name"] == "NVIDIA H200"
    assert agent["facts"]["kernel_module"]["version"] == agent["facts"]["driver"]


# ---- NVML's own start, begun beside pynvml's import (nvml_reader.EarlyStart) ---------------

# A stand-in libnvidia-ml: its start waits in C (up to 5 s) for one byte on the fd
# STAND_IN_FD names, so a start that kept the interpreter lock would leave nobody to write
# it in time, and fail (998). It counts its starts and stops as NVML does.
STAND_IN_NVML_C = """
#include <poll.h>
#include <stdlib.h>
#include <unistd.h>
static int starts, stops;
int nvmlInit_v2(void) {
    char byte;
    struct pollfd wait = {atoi(getenv("STAND_IN_FD")), POLLIN, 0};
    if (poll(&wait, 1, 5000) != 1) return 998;
    if (read(wait.fd, &byte, 1) != 1) return 999;
    starts++;
    return 0;
}
int nvmlShutdown(void) { stops++; return 0; }
int stand_in_starts(void) { return starts; }
int stand_in_stops(void) { return stops; }
"""


@pytest.fixture
def stand_in_nvml(tmp_path: Path) -> Any:
    import ctypes
    import shutil
    import subprocess

    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build a stand-in libnvidia-ml")
    (tmp_path / "nvml.c").write_text(STAND_IN_NVML_C)
    library = tmp_path / "libnvidia-ml-stand-in.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(library), str(tmp_path / "nvml.c")],
                   check=True)
    return ctypes.CDLL(str(library))


def test_nvml_starts_in_a_thread_while_python_runs_on_and_its_count_is_given_back(
        stand_in_nvml: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    read_end, write_end = os.pipe()
    monkeypatch.setenv("STAND_IN_FD", str(read_end))
    try:
        early = nvml_reader.EarlyStart(stand_in_nvml)
        assert stand_in_nvml.stand_in_starts() == 0   # still waiting, in C, on its byte
        os.write(write_end, b"x")   # this thread runs on meanwhile (pynvml's import, in use)
        early.thread.join(10)
        assert early.status == 0, "the start kept the interpreter lock: nobody wrote in time"
        assert (stand_in_nvml.stand_in_starts(), stand_in_nvml.stand_in_stops()) == (1, 0)
        early.end()
        assert stand_in_nvml.stand_in_stops() == 1   # its start given back, once
    finally:
        os.close(read_end)
        os.close(write_end)


def test_an_early_start_that_fails_is_not_stopped(stand_in_nvml: Any,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    read_end, write_end = os.pipe()
    os.close(write_end)   # its byte never comes: the start fails (999), as a driver's would
    monkeypatch.setenv("STAND_IN_FD", str(read_end))
    try:
        early = nvml_reader.EarlyStart(stand_in_nvml)
        early.end()
    finally:
        os.close(read_end)
    assert early.status == 999
    assert (stand_in_nvml.stand_in_starts(), stand_in_nvml.stand_in_stops()) == (0, 0)


def test_a_library_without_the_start_call_leaves_it_to_pynvml() -> None:
    early = nvml_reader.EarlyStart(object())   # no nvmlInit_v2: nothing raised, nothing stopped
    early.end()
    assert early.status is None


def test_a_host_without_the_driver_starts_nothing_early() -> None:
    import ctypes

    try:
        ctypes.CDLL(nvml_reader.LIBRARY)
    except OSError:
        nvml, why, early = nvml_reader.open_nvml(early=True)
        assert (nvml, early) == (None, None) and why is not None
        assert why.startswith(nvml_reader.LIBRARY + " not loadable: ")
        assert nvml_reader.load_nvml() == (None, why)
    else:
        pytest.skip("this host has libnvidia-ml")
