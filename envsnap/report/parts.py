"""The long parts of a report, each folded away under a title: GPUs, topology, packages,
patches, git history, environment, sitecustomize, benchmark runs.

Each part is a title and lines; a failed collector gives a part that says so instead of an
empty one. Patches are shown as text with binary hunks elided, capped unless full.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from envsnap.bench import run as bench
from envsnap.diff import patch_summary
from envsnap.diff.findings import human_bytes, short
from envsnap.report.facts import FactsReader, RowValue, by_index, gpu_records, not_captured
from envsnap.snapshot import document as snapshot
from envsnap.snapshot.spec import is_object
from envsnap.text import plural

if TYPE_CHECKING:
    from envsnap.snapshot.records import Blob, Gpu, Repo, Snapshot

PATCH_LINES = 400      # lines of one patch shown unless full (the bundle has it whole)
REFLOG_SHOWN = 20
HISTORY_SHOWN = 15


@dataclass(frozen=True)
class Part:
    """A collapsible part: a title and its lines; code parts keep diff syntax."""

    title: str
    lines: list[str]
    code: bool = False


def table(rows: list[list[str]]) -> list[str]:
    """Columns padded to their widest cell, for a monospaced block."""
    if not rows:
        return []
    widths = [max(len(row[i]) for row in rows if i < len(row)) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]


# ---- hardware --------------------------------------------------------------------------------

GPU_COLUMNS: list[tuple[str, Callable[[Gpu], object]]] = [
    ("idx", lambda g: g.get("index")), ("name", lambda g: g.get("name")),
    ("uuid", lambda g: g.get("uuid")),
    ("pcie now/max", lambda g: f"Gen{g.get('pcie_gen_current')}/{g.get('pcie_gen_max')} "
                               f"x{g.get('pcie_width_current')}/{g.get('pcie_width_max')}"),
    ("persist", lambda g: g.get("persistence_mode")), ("ecc", lambda g: g.get("ecc_mode_current")),
    ("mig", lambda g: g.get("mig_mode_current")), ("power W", lambda g: g.get("power_limit_w")),
    ("max SM MHz", lambda g: g.get("clock_max_sm_mhz")), ("numa", lambda g: g.get("numa_node")),
    ("vbios", lambda g: g.get("vbios")),
]


def gpu_part(f: FactsReader) -> Part:
    records = gpu_records(f)
    rows: list[list[str]] = [["bus"] + [name for name, _ in GPU_COLUMNS]]
    for bus, gpu in by_index(records):
        if gpu.get("error"):
            rows.append([bus, str(gpu.get("index")), not_captured(gpu["error"])])
            continue
        rows.append([bus] + [str(read(gpu)) for _, read in GPU_COLUMNS])
    return Part(f"GPUs ({len(records)})", table(rows))


def topology_part(f: FactsReader) -> Part:
    """The matrix `nvidia-smi topo -m` prints, from the links recorded by bus id."""
    records = gpu_records(f)
    links = f.nvidia().get("topology", {})
    order = [bus for bus, _ in by_index(records)]
    names = {bus: f"GPU{records[bus].get('index')}" for bus in order}
    extra = sorted({peer for bus in order for peer in links.get(bus, {}) if peer not in names})
    columns = order + extra
    rows = [[""] + [str(names.get(c, c)) for c in columns] + ["CPU affinity", "NUMA"]]
    for bus in order:
        peers = links.get(bus, {})
        rows.append([names[bus]] + ["X" if c == bus else str(peers.get(c, "-")) for c in columns]
                    + [str(records[bus].get("cpu_affinity")), str(records[bus].get("numa_node"))])
    legend = ["", "X self; NV# NVLink; PIX/PXB one or more PCIe bridges; PHB host bridge;",
              "NODE within a NUMA node; SYS across NUMA nodes (SMP interconnect)"]
    return Part("GPU topology", table(rows) + legend if links else ["not recorded"])


def kernel_module_part(f: FactsReader) -> Part:
    module = f.nvidia().get("kernel_module")
    if module is None:     # no NVIDIA kernel module found
        return Part("NVIDIA kernel module", ["not recorded"])
    lines = [line for line in (module.get("nvrm_line"), module.get("gcc_line")) if line]
    lines += [f"loaded: {name} {version}" for name, version in module.get("loaded", {}).items()]
    lines += [f"{name}: {value}" for name, value in module.get("params", {}).items()]
    return Part("NVIDIA kernel module", lines or ["not recorded"])


# ---- python, code, environment -------------------------------------------------------------

def packages_part(f: FactsReader) -> Part:
    env = f.python_env()
    if "packages" not in env and snapshot.is_partial(f.document):
        return Part("python packages", [f.unknown()])      # a paste that lists none
    packages = env.get("packages", {})
    editable, urls = env.get("editable", {}), env.get("direct_urls", {})
    shadowed = env.get("shadowed", {})
    rows = []
    for name, version in sorted(packages.items()):
        # a direct_url.json is free-form (schema.py): only a mapping has a url to show
        note = f"editable: {editable[name]}" if name in editable else \
            f"from {urls[name].get('url')}" if is_object(urls.get(name)) else ""
        if name in shadowed:
            note += f" (shadows {plural(len(shadowed[name]) - 1, 'other copy', ' copies')})"
        rows.append([name, str(version), note.strip()])
    return Part(f"python packages ({len(packages)})", table(rows) or ["none"])


def patch_lines(blob: Blob, full: bool) -> list[str]:
    lines = patch_summary.shown_text(blob).splitlines()
    if full or len(lines) <= PATCH_LINES:
        return lines
    return lines[:PATCH_LINES] + [f"... {len(lines) - PATCH_LINES} more lines "
                                  "(the bundle's snapshot holds the whole patch)"]


def blob_title(what: str, blob: Blob) -> str:
    info = patch_summary.summary(blob)
    flags = [flag for flag in ("binary", "truncated", "redacted") if info.get(flag)]
    return (f"{what}: {plural(len(info['files']), 'file')}, {human_bytes(info['bytes'])}, "
            f"sha256 {str(info['sha256'])[:12]}" + (f" ({', '.join(flags)})" if flags else ""))


def repo_parts(path: str, repo: Repo, full: bool) -> list[Part]:
    error = snapshot.repo_error(repo)
    if error is not None:
        return [Part(f"git {path}", [not_captured(error)])]
    found = [history_part(path, repo)]
    work = repo.get("uncommitted") or {}    # null: no work tree to record
    patch = work.get("patch")
    if patch_summary.is_blob(patch) and patch.get("bytes"):
        found.append(Part(blob_title(f"uncommitted patch in {path}", patch),
                          patch_lines(patch, full), code=True))
    untracked = work.get("untracked", {})
    if untracked:
        found.append(Part(f"untracked files in {path} ({work.get('untracked_count')})",
                          [f"{name}  {human_bytes(size)}" for name, size in
                           sorted(snapshot.untracked_sizes(repo).items())]))
    for ref, stash in repo.get("stashes", {}).items():
        stashed = stash.get("patch")
        if patch_summary.is_blob(stashed):
            found.append(Part(blob_title(f"{ref} in {path} ({stash.get('message')})", stashed),
                              patch_lines(stashed, full), code=True))
    return found


def history_part(path: str, repo: Repo) -> Part:
    reflog = repo.get("reflog", [])
    lines = [f"{e.get('selector')}  {short(e.get('new'))}  {e.get('message')}"
             for e in reflog[:REFLOG_SHOWN]]
    if len(reflog) > REFLOG_SHOWN:
        lines.append(f"... {len(reflog) - REFLOG_SHOWN} more reflog entries")
    history = repo.get("history", [])
    lines += ["", "recent commits:"] + [f"{short(c.get('sha'))}  {c.get('subject')}"
                                        for c in history[:HISTORY_SHOWN]]
    remotes = repo.get("remotes", {})
    lines += ["", "remotes:"] + [f"{name}  {url}" for name, url in sorted(remotes.items())]
    return Part(f"git {path}: reflog and history", lines)


def env_part(f: FactsReader) -> Part:
    env = f.env()
    lines = ["shell:"] + [f"  {k}={v}" for k, v in sorted(env.get("shell", {}).items())]
    for pid, info in env.get("processes", {}).items():
        command = " ".join(info.get("cmdline", []))
        lines += ["", f"process {pid}: {command} ({info.get('matched', '')})"]
        own = info.get("env", {})
        if "error" in own:    # an environ envsnap could not read (another user's process)
            lines.append(f"  {not_captured(own['error'])}")
        else:
            lines += [f"  {k}={v}" for k, v in sorted(own.items())]
    return Part("environment (shell and workers)", lines)


def customize_parts(f: FactsReader) -> list[Part]:
    customize = f.python_env().get("customize", {})
    return [Part(f"{name}.py ({info.get('path')})", content.splitlines())
            for name, info in sorted(customize.items())
            if info is not None and (content := info.get("content")) is not None]


def bench_part(document: Snapshot) -> list[Part]:
    record = snapshot.bench(document)
    if record is None or not record.get("runs"):
        return []
    return [Part(f"benchmark runs ({len(record['runs'])})", bench.format_record(record))]


# ---- all of them ----------------------------------------------------------------------------

def guarded(title: str, make: Callable[[], Part | list[Part]]) -> list[Part]:
    try:
        made = make()
    except RowValue as exc:
        return [Part(title, [str(exc)])]
    return made if isinstance(made, list) else [made]


def parts(document: Snapshot, full: bool = False) -> list[Part]:
    f = FactsReader(document)
    found = guarded("GPUs", lambda: gpu_part(f))
    found += guarded("GPU topology", lambda: topology_part(f))
    found += guarded("NVIDIA kernel module", lambda: kernel_module_part(f))
    found += guarded("python packages", lambda: packages_part(f))
    found += guarded("git", lambda: [p for path, repo in sorted(
        f.git().get("repos", {}).items()) for p in repo_parts(path, repo, full)])
    found += guarded("environment", lambda: env_part(f))
    found += guarded("sitecustomize", lambda: customize_parts(f))
    return found + bench_part(document)
