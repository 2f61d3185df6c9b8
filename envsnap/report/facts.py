"""The summary of one snapshot: the facts a bug report needs, one line each.

docs/STORY.md lists what an engineer checked by hand, one command at a time; each row here is
one of those answers. A section whose collector failed says "not captured: <error>", never
an empty cell, so a reader can tell "not recorded" from "absent".
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Union

from envsnap.diff import rules
from envsnap.diff.findings import short
from envsnap.diff.partial import why_unknown
from envsnap.snapshot import customize as customize_words
from envsnap.snapshot import document as snapshot
from envsnap.snapshot.document import collector_error
from envsnap.text import plural

if TYPE_CHECKING:
    from envsnap.snapshot.records import (
        CudaNccl,
        CustomizeFile,
        Env,
        Git,
        Gpu,
        Nvidia,
        Process,
        PythonEnv,
        Repo,
        Snapshot,
        System,
        TorchBuild,
        VersionSource,
    )

KEY_ENV_PREFIXES = ("NCCL_", "CUDA_")
# Assignments in sitecustomize: os.environ["X"] = ..., os.environ.setdefault("X", ...)
ENV_ASSIGNED = re.compile(r"""environ(?:\.setdefault\(\s*|\s*\[\s*)"""
                          r"""['"]([A-Za-z_][A-Za-z0-9_]*)['"]""")


@dataclass(frozen=True)
class Fact:
    """One row of the summary: what it is, and its value in one line."""

    name: str
    value: str


class RowValue(Exception):
    """The whole value of a row whose facts are missing: "not captured: <error>" when a
    collector failed, or a normal absence ("none (no NVIDIA driver)")."""


class FactsReader:
    """One snapshot's sections, each its facts or the reason it is missing (RowValue): a
    reader of the document's records.Facts for a report's rows."""

    def __init__(self, document: Snapshot) -> None:
        self.document = document
        self.meta = snapshot.meta(document)

    def captured(self, name: str) -> None:
        error = collector_error(self.document, name)
        if error:   # an imported snapshot's missing section is one its paste did not state
            raise RowValue(f"unknown: {error}" if snapshot.is_partial(self.document)
                           else not_captured(error))

    def known(self, section: Mapping[str, object], key: str) -> None:
        """An imported snapshot that lacks `key` does not know it: say so, never "none"."""
        if key not in section and snapshot.is_partial(self.document):
            raise RowValue(self.unknown())

    def unknown(self) -> str:
        return f"unknown: {why_unknown(self.document)}"

    def gpus_present(self) -> bool:
        """Whether the host has an NVIDIA driver. A paste that names the driver or a GPU says
        so without saying "present"; one that names neither does not know."""
        nvidia = self.nvidia()
        if "present" in nvidia or not snapshot.is_partial(self.document):
            return bool(nvidia.get("present"))
        if nvidia.get("driver") or nvidia.get("gpus"):
            return True
        raise RowValue(self.unknown())

    def stated(self, records: Mapping[str, Gpu], *keys: str) -> None:
        """An imported snapshot whose GPUs carry none of `keys`: the paste did not say."""
        if snapshot.is_partial(self.document) and not any(
                gpu.get(key) is not None for gpu in records.values() for key in keys):
            raise RowValue(self.unknown())

    def system(self) -> System:
        self.captured("system")
        return snapshot.system(self.document)

    def nvidia(self) -> Nvidia:
        self.captured("nvidia")
        return snapshot.nvidia(self.document)

    def cuda_nccl(self) -> CudaNccl:
        self.captured("cuda_nccl")
        return snapshot.cuda_nccl(self.document)

    def python_env(self) -> PythonEnv:
        self.captured("python_env")
        return snapshot.python_env(self.document)

    def env(self) -> Env:
        self.captured("env")
        return snapshot.env(self.document)

    def git(self) -> Git:
        self.captured("git")
        return snapshot.git(self.document)


def not_captured(error: object) -> str:
    return f"not captured: {error}"


def version_of(value: VersionSource | TorchBuild | None) -> str:
    if value is None:
        return "none"
    return str(value.get("version") or f"none ({value.get('reason') or 'not found'})")


# ---- host and software ------------------------------------------------------------------------

def host(f: FactsReader) -> str:
    meta = f.meta
    unstated = "not stated" if snapshot.is_partial(f.document) else "?"
    try:
        name = f.system().get("hostname") or unstated
    except RowValue as exc:
        name = unstated if snapshot.is_partial(f.document) else f"? (system {exc})"
    return f"{name} (as {meta.get('host', '?')}), captured {meta.get('captured_at', '?')}"


def os_kernel(f: FactsReader) -> str:
    system = f.system()
    release = system.get("os_release", {}).get("PRETTY_NAME") or "unknown OS"
    kernel = system.get("kernel", {})
    return f"{release}; kernel {kernel.get('release', '?')} {kernel.get('machine', '')}".strip()


def cpu(f: FactsReader) -> str:
    info = f.system().get("cpu", {})
    sockets = info.get("sockets")
    text = f"{sockets} x {info.get('model', '?')}" if sockets else str(info.get("model", "?"))
    text += f", {info.get('physical_cores', '?')} cores / {info.get('logical_cpus', '?')} threads"
    governors = f.system().get("governors", {})
    if governors:
        text += "; governor " + ", ".join(f"{g} ({n})" for g, n in sorted(governors.items()))
    return text


def driver(f: FactsReader) -> str:
    nvidia = f.nvidia()
    if not f.gpus_present():
        return f"none ({nvidia.get('reason') or 'no NVIDIA driver'})"
    module = nvidia.get("kernel_module") or {}    # null: no module found
    text = str(nvidia.get("driver") or "?")
    if nvidia.get("source"):    # a paste says what the driver is, not how it was read
        text += f" (read through {nvidia['source']})"
    if module.get("version"):
        text += (f"; {module.get('flavor', '?')} kernel module {module['version']}, built with "
                 f"GCC {module.get('gcc') or '?'}")
    if module.get("file_matches_loaded") is False:
        text += "; the module file on disk is not the one loaded (rebuilt since boot)"
    return text


def cuda(f: FactsReader) -> str:
    api, kit = outcome(lambda: driver_api(f)), outcome(lambda: toolkit(f))
    if isinstance(api, RowValue) and isinstance(kit, RowValue) and str(api) == str(kit):
        raise api    # one reason for the row, not once for each part
    # a collector that failed names itself; a paste silent on the driver's API names that
    api_name = "nvidia" if collector_error(f.document, "nvidia") else "driver API"
    return f"{labelled(api, api_name)}; {labelled(kit, 'toolkit')}"


def outcome(read: Callable[[], str]) -> str | RowValue:
    try:
        return read()
    except RowValue as exc:
        return exc


def labelled(value: str | RowValue, name: str) -> str:
    return f"{name} {value}" if isinstance(value, RowValue) else value


def driver_api(f: FactsReader) -> str:
    f.known(f.nvidia(), "cuda_driver")
    return f"driver API {f.nvidia().get('cuda_driver') or 'none'}"


def toolkit(f: FactsReader) -> str:
    f.known(f.cuda_nccl(), "cuda_toolkit")
    return f"toolkit {version_of(f.cuda_nccl().get('cuda_toolkit'))}"


def nccl(f: FactsReader) -> str:
    info = f.cuda_nccl().get("nccl", {})
    f.known(f.cuda_nccl(), "nccl")
    parts = [f"torch loads {version_of(info.get('torch'))}"] if "torch" in info or \
        not snapshot.is_partial(f.document) else []
    parts += [f"wheel {name} {version_of(v)}" for name, v in sorted(info.get("wheels",
                                                                             {}).items())]
    libraries = info.get("libraries", {})
    used = torch_library(info.get("torch"), libraries)
    others = [f"{version_of(v)} at {path}" for path, v in sorted(libraries.items()) if path != used]
    if others:
        parts.append("other libnccl: " + ", ".join(others))
    return "; ".join(parts)


def torch_library(used: VersionSource | None,
                  libraries: dict[str, VersionSource]) -> str | None:
    """The path of the libnccl torch loads. The agent records torch's entry as a copy of that
    library's entry in `libraries` (keyed by path), so the path is looked up, never cut out
    of the `source` text ("ncclGetVersion:<path>"), which is there for a person to read."""
    if used is None:
        return None
    return next((path for path, entry in libraries.items() if entry == used), None)


def torch(f: FactsReader) -> str:
    info = f.cuda_nccl().get("torch")
    if info is None or not info.get("version"):
        return version_of(info or {})
    if info.get("hip"):             # a ROCm build: its CUDA is none, its HIP is the fact
        return f"{info['version']} (built for ROCm {info['hip']})"
    if not info.get("cuda") and snapshot.is_partial(f.document):
        return f"{info['version']} (the CUDA it was built for not stated)"
    return f"{info['version']} (built for CUDA {info.get('cuda') or 'none'})"


def python(f: FactsReader) -> str:
    env = f.python_env()
    interpreter = env.get("interpreter", {})
    # a paste states the version, rarely the interpreter's path
    where = interpreter.get("executable", "" if snapshot.is_partial(f.document) else "?")
    text = (f"{where} {interpreter.get('version', '?')}".strip()
            + (" (venv)" if interpreter.get("venv") else ""))
    editable = env.get("editable", {})
    if editable:
        text += "; editable: " + ", ".join(f"{n} -> {p}" for n, p in sorted(editable.items()))
    return text


def sitecustomize(f: FactsReader) -> str:
    """The files that run at python's start, then what never runs and why (the story)."""
    f.known(f.python_env(), "customize")
    customize = f.python_env().get("customize", {})
    shown = [customize_text(name, info) for name, info in sorted(customize.items()) if info]
    return "; ".join(shown + customize_words.story(f.document)) or "none"


def customize_text(name: str, info: CustomizeFile) -> str:
    if info.get("error"):
        return f"{name} at {info.get('path')}: {info['error']}"
    sha = str(info.get("sha256") or "?")[:12]
    where = customize_words.linked(info.get("path"), info.get("real_path"))
    text = f"{name} present: {where}, sha256 {sha}" + \
        (", imported" if info.get("imported") else "")
    assigned = sorted(set(ENV_ASSIGNED.findall(info.get("content") or "")))
    return text + (f"; sets {', '.join(assigned)}" if assigned else "")


# ---- GPUs ---------------------------------------------------------------------------------------

def gpu_records(f: FactsReader) -> dict[str, Gpu]:
    nvidia = f.nvidia()
    if not f.gpus_present():
        raise RowValue(f"none ({nvidia.get('reason') or 'no NVIDIA driver'})")
    return nvidia.get("gpus", {})


def by_index(gpus: dict[str, Gpu]) -> list[tuple[str, Gpu]]:
    return sorted(gpus.items(), key=lambda item: (item[1].get("index", 0), item[0]))


def gpus(f: FactsReader) -> str:
    records = gpu_records(f)
    names = Counter(str(g.get("name") or "?") for g in records.values() if not g.get("error"))
    # a paste may count more GPUs than it names (a matrix's header, its rows cut): the
    # others are there, their names unknown
    count = f.nvidia().get("gpu_count")
    if isinstance(count, int) and count > len(records):
        names["?"] += count - len(records)
    text = "; ".join(f"{count} x {name}" for name, count in names.items()) or "none"
    failed = [f"GPU {g.get('index')} {not_captured(g['error'])}" for _, g in by_index(records)
              if g.get("error")]
    # as text: a reading may be {"error": why}, which no set holds
    memory = {str(g.get("memory_total_mib")) for g in records.values() if not g.get("error")}
    if len(memory) == 1 and "None" not in memory:
        text += f", {memory.pop()} MiB each"
    return "; ".join([text] + failed)


def tally(records: dict[str, Gpu], show: Callable[[Gpu], str]) -> str:
    """One value when every GPU agrees, else each value with the GPUs that have it."""
    groups: dict[str, list[str]] = {}
    readable = [gpu for _, gpu in by_index(records) if not gpu.get("error")]
    for gpu in readable:
        groups.setdefault(show(gpu), []).append(str(gpu.get("index")))
    if len(groups) <= 1:  # a GPU that could not be read is not counted in "all"
        value = next(iter(groups), "-")
        return f"{value} on all {len(readable)}" if len(readable) > 1 else value
    return "; ".join(f"{value} on GPU {','.join(ids)}" for value, ids in groups.items())


def pcie(f: FactsReader) -> str:
    def link(g: Gpu) -> str:
        current = f"Gen{g.get('pcie_gen_current')} x{g.get('pcie_width_current')}"
        top = f"Gen{g.get('pcie_gen_max')} x{g.get('pcie_width_max')}"
        below = rules.below(g.get("pcie_gen_current"), g.get("pcie_gen_max")) or \
            rules.below(g.get("pcie_width_current"), g.get("pcie_width_max"))
        return f"{current} (max {top}{', BELOW MAX' if below else ''})"
    records = gpu_records(f)
    f.stated(records, "pcie_gen_current", "pcie_width_current")
    return tally(records, link)


SETTINGS = (("persistence", "persistence_mode", ""), ("ECC", "ecc_mode_current", ""),
            ("MIG", "mig_mode_current", ""), ("power limit", "power_limit_w", " W"),
            ("default power limit", "power_default_limit_w", " W"),
            ("compute", "compute_mode", ""))


def gpu_settings(f: FactsReader) -> str:
    records = gpu_records(f)
    f.stated(records, *(key for _, key, _ in SETTINGS))
    # a paste leaves some settings out: those are not shown, never shown as "None"
    shown = [(name, key, unit) for name, key, unit in SETTINGS
             if not snapshot.is_partial(f.document)
             or any(g.get(key) is not None for g in records.values())]
    return tally(records, lambda g: ", ".join(
        f"{name} {g.get(key)}{unit if g.get(key) is not None else ''}"
        for name, key, unit in shown))


def topology(f: FactsReader) -> str:
    records = gpu_records(f)
    if len(records) > 1:
        f.known(f.nvidia(), "topology")
    links = f.nvidia().get("topology", {})
    seen = Counter(link for bus, peers in links.items() if bus in records
                   for peer, link in peers.items() if peer in records)
    if not seen:
        return "one GPU" if len(records) <= 1 else "not recorded"
    nvlink = sorted(str(link) for link in seen if str(link).startswith("NV"))
    pci = sorted(str(link) for link in seen if not str(link).startswith("NV"))
    text = f"NVLink between GPUs ({', '.join(nvlink)})" if nvlink else "no NVLink"
    return text + (f"; over PCIe: {'/'.join(pci)}" if pci else "")


# ---- code and environment --------------------------------------------------------------------

def repos(f: FactsReader) -> list[Fact]:
    found = f.git().get("repos", {})
    if not found:
        return [Fact("repos", "none recorded (capture with --repo PATH)")]
    return [Fact(f"repo {path}", repo_text(repo)) for path, repo in sorted(found.items())]


def repo_text(repo: Repo) -> str:
    error = snapshot.repo_error(repo)
    if error is not None:
        return not_captured(error)
    head = str(repo.get("head") or "?")
    subject = next((c.get("subject") for c in repo.get("history", []) if c.get("sha") == head),
                   None)
    where = repo.get("branch") or "detached HEAD"
    upstream = f" tracking {repo['upstream']}" if repo.get("upstream") else ""
    text = f"HEAD {short(head)}" + (f" \"{subject}\"" if subject else "") + \
        f" on {where}{upstream}; {rules.work_text(repo.get('uncommitted'))}"
    in_progress = repo.get("in_progress")
    if in_progress is not None:
        text += f"; {rules.in_progress_text(in_progress)}"
    text += f"; {plural(len(repo.get('stashes', {})), 'stash', 'es')}"
    reflog = repo.get("reflog", [])
    return text + (f"; last move: {reflog[0].get('message')}" if reflog else "")


def key_env(env: dict[str, str | None]) -> dict[str, str]:
    return {name: str(value) for name, value in sorted(env.items())
            if name.startswith(KEY_ENV_PREFIXES) and rules.is_perf_var(name)}


def env_text(env: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in env.items()) or "no NCCL/CUDA variables set"


def shell_env(f: FactsReader) -> str:
    return env_text(key_env(f.env().get("shell", {})))


def workers(f: FactsReader) -> str:
    env = f.env()
    patterns = env.get("proc_patterns", [])
    processes = env.get("processes", {})
    served = sum(1 for info in processes.values() if info.get("role") == "server")
    if not patterns and not served:
        return "none recorded (capture with --proc PATTERN)"
    if not processes:
        return f"no process matched {', '.join(patterns)}"
    shell = key_env(env.get("shell", {}))
    groups: dict[str, list[str]] = {}
    for pid, info in sorted(processes.items(), key=lambda item: int(item[0])
                            if item[0].isdigit() else 0):
        groups.setdefault(worker_env_text(info, shell), []).append(pid)
    head = plural(len(processes), 'process', 'es')
    if patterns:
        head += f" matching {', '.join(patterns)}"
    if served:   # a `bench --serve` server and its children (bench/run.py)
        head += f", {served} started by bench --serve" if patterns else \
            " started by bench --serve"
    return head + ": " + "; ".join(f"pid {', '.join(pids)}: {text}"
                                   for text, pids in groups.items())


def worker_env_text(info: Process, shell: dict[str, str]) -> str:
    env = info.get("env")
    if env is None:
        return not_captured("no env")
    if "error" in env:    # an environ envsnap could not read (another user's process)
        return not_captured(env["error"])
    own = key_env(env)
    if own == shell:
        return "same NCCL/CUDA variables as the shell"
    missing = [name for name in shell if name not in own]
    text = env_text(own)
    return text + (f" (lacks {', '.join(missing)} of the shell)" if missing else "")


def rocm(f: FactsReader) -> list[Fact]:
    """AMD's stack where a paste states it (a row of its own only then: a capture does not
    record it, and an NVIDIA host has none to show)."""
    info = f.cuda_nccl().get("rocm")
    if not info:
        return []
    stated = (("ROCm", info.get("version")), ("HIP runtime", info.get("hip_runtime")),
              ("MIOpen", info.get("miopen")), ("driver", info.get("driver")))
    parts = [f"{label} {value}" for label, value in stated if value]
    names = Counter(info.get("gpus", {}).values())
    parts += [f"{count} x {name}" for name, count in names.items()]
    return [Fact("ROCm", "; ".join(parts) or "stated, without versions")]


Row = Callable[[FactsReader], Union[str, list[Fact]]]
ROWS: list[tuple[str, Row]] = [
    ("host", host), ("OS / kernel", os_kernel), ("CPU", cpu), ("NVIDIA driver", driver),
    ("CUDA", cuda), ("NCCL", nccl), ("torch", torch), ("ROCm", rocm), ("python", python),
    ("GPUs", gpus),
    ("PCIe link", pcie), ("GPU settings", gpu_settings), ("GPU topology", topology),
    ("repos", repos), ("env of the shell", shell_env), ("env of the workers", workers),
    ("sitecustomize", sitecustomize),
]


def summary(document: Snapshot) -> list[Fact]:
    facts = FactsReader(document)
    rows: list[Fact] = []
    for name, read in ROWS:
        try:
            value = read(facts)
        except RowValue as exc:
            value = str(exc)
        rows += value if isinstance(value, list) else [Fact(name, value)]
    return rows
