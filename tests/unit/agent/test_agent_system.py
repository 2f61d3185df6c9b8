from __future__ import annotations

import json
import resource

from envsnap.agent import system

OS_RELEASE = '''PRETTY_NAME="Ubuntu 22.04.4 LTS"
NAME="Ubuntu"
VERSION_ID="22.04"
# a comment
ID=ubuntu
BROKEN="unbalanced
'''

CPUINFO_X86 = "\n\n".join(
    f"processor\t: {cpu}\nvendor_id\t: AuthenticAMD\n"
    "model name\t: AMD EPYC 9654 96-Core Processor\n"
    f"physical id\t: {cpu // 4}\ncore id\t\t: {cpu % 2}\ncpu cores\t: 2"
    for cpu in range(8)) + "\n"

CPUINFO_ARM = """processor\t: 0
BogoMIPS\t: 50.00
CPU implementer\t: 0x41

processor\t: 1
BogoMIPS\t: 50.00
CPU implementer\t: 0x41
"""

MEMINFO = """MemTotal:       263921152 kB
MemFree:        100000000 kB
MemAvailable:   200000000 kB
HugePages_Total:       4
Hugepagesize:       2048 kB
"""

NODE_MEMINFO = """Node 1 MemTotal:       131960576 kB
Node 1 MemFree:        50000000 kB
"""


def test_parse_os_release_unquotes_and_skips_comments() -> None:
    fields = system.parse_os_release(OS_RELEASE)
    assert fields["PRETTY_NAME"] == "Ubuntu 22.04.4 LTS"
    assert fields["VERSION_ID"] == "22.04"
    assert fields["ID"] == "ubuntu"
    assert fields["BROKEN"] == '"unbalanced'  # kept raw rather than lost
    assert not any(key.startswith("#") for key in fields)


def test_parse_cpuinfo_counts_sockets_and_cores() -> None:
    cpu = system.parse_cpuinfo(CPUINFO_X86)
    assert cpu == {"model": "AMD EPYC 9654 96-Core Processor", "logical_cpus": 8,
                   "sockets": 2, "physical_cores": 4}


def test_parse_cpuinfo_without_topology_says_none() -> None:
    cpu = system.parse_cpuinfo(CPUINFO_ARM)
    assert cpu == {"model": None, "logical_cpus": 2, "sockets": None, "physical_cores": None}


def test_parse_meminfo_system_and_numa_node_formats() -> None:
    assert system.parse_meminfo(MEMINFO)["MemAvailable"] == 200000000
    assert system.parse_meminfo(MEMINFO)["HugePages_Total"] == 4
    assert system.parse_meminfo(NODE_MEMINFO) == {"MemTotal": 131960576, "MemFree": 50000000}
    facts = system.memory_facts(system.parse_meminfo(MEMINFO))
    assert facts["total_kib"] == 263921152 and "MemAvailable" not in facts


def test_count_values_summarises_governors() -> None:
    values = ["performance"] * 3 + ["powersave", None]
    assert system.count_values(values) == {"performance": 3, "powersave": 1, "unreadable": 1}


def test_iommu_params_stop_at_init_arguments() -> None:
    cmdline = "BOOT_IMAGE=/vmlinuz intel_iommu=on iommu=pt amd_iommu -- iommu=init-arg"
    assert system.iommu_params(cmdline) == {"intel_iommu": "on", "iommu": "pt",
                                            "amd_iommu": True}


def test_parse_bracketed_picks_active_choice() -> None:
    assert system.parse_bracketed("always [madvise] never") == "madvise"
    assert system.parse_bracketed("never") == "never"
    assert system.parse_bracketed(None) is None


def test_uptime_and_loadavg_parsing() -> None:
    assert system.parse_uptime("12345.67 98765.43\n") == 12345.67
    assert system.parse_uptime("") is None
    assert system.parse_loadavg("0.50 1.25 2.00 1/900 4242\n") == {"1m": 0.5, "5m": 1.25,
                                                                  "15m": 2.0}
    assert system.parse_loadavg("garbage") is None


def test_rlimit_infinity_reads_unlimited() -> None:
    assert system.rlimit_pair((1024, resource.RLIM_INFINITY)) == {"soft": 1024,
                                                                  "hard": "unlimited"}


def test_collect_on_this_host() -> None:
    result = system.collect({})
    json.dumps(result)  # must be serialisable as is
    facts, volatile = result["facts"], result["volatile"]
    with open("/proc/sys/kernel/random/boot_id") as handle:
        assert facts["boot_id"] == handle.read().strip()
    assert facts["hostname"] and facts["kernel"]["release"]
    assert facts["cpu"]["logical_cpus"] >= 1
    assert facts["memory"]["total_kib"] > 0
    assert set(facts["limits"]) == {"nofile", "memlock"}
    assert all(node.isdigit() for node in facts["numa"])
    # a node's memory moves on VMs that hot-plug it (seen on the lent H200): a reading
    assert set(volatile["numa_mem_total_kib"]) == set(facts["numa"])
    assert "mem_total_kib" not in json.dumps(facts["numa"])
    assert volatile["uptime_seconds"] > 0 and volatile["mem_available_kib"] > 0
    # Readings that move by themselves stay out of the diffed facts.
    assert "uptime_seconds" not in json.dumps(facts)


def test_os_release_values_read_as_shlex_reads_them() -> None:
    """shell_value spares shlex's import for the usual forms: every short value of quotes,
    backslashes, blanks and words reads as shlex.split's words joined by a space."""
    import itertools
    import shlex

    def by_shlex(raw: str) -> str:
        try:
            return " ".join(shlex.split(raw))
        except ValueError:
            return raw

    for size in range(5):
        for chars in itertools.product("a\"' \\#$\t", repeat=size):
            raw = "".join(chars)
            assert system.shell_value(raw) == by_shlex(raw), raw
    debian = "Debian GNU/Linux 12 (bookworm)"
    assert system.shell_value(f'"{debian}"') == debian
