"""Topology matrices as pasted -> links and affinities, read by shape, not by column position.

- `nvidia-smi topo -m` (inside vLLM's collect_env, SGLang's check_env, or alone): a header
  of device names (GPU0.., NIC0.., mlx5_0.. on older drivers) then the affinity columns
  (`CPU Affinity`, `NUMA Affinity`, `GPU NUMA ID`), one row a device; nvidia-smi separates
  the cells with tabs, but a terminal or GitHub's copy button gives runs of spaces, and a
  cell may be empty (`0\t\tN/A`). Splitting on any whitespace and joining the header's
  known two- and three-word names back gives the same cells either way: every link cell is
  one word (X, NV18, SYS, PIX...), and so is every affinity (`0-31,64-95`, `0`, `N/A`).
  Its legend, and the `NIC Legend:` that names the NICs (`  NIC0: mlx5_0`), follow it.
- rocm-smi's `--showtopo` (inside vLLM's ROCm collect_env, SGLang's `AMD Topology:`): banner
  rules, then square tables of `Weight`, `Hops` and `Link Type between two GPUs`, then NUMA
  lines; the link types are kept (XGMI, PCIE), as nvidia-smi's links are.

Both return the agent's shape (agent/smi.parse_topology): {"links": {GPU0: {peer: link}},
"affinity": {GPU0: {cpu, numa, gpu_numa_id}}, "nics": {NIC0: mlx5_0}}, plus the line index
after the block. A row that does not fit its header is passed over and its index returned in
`broken`: the rest of the matrix still reads."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from envsnap.agent.smi import ANSI

if TYPE_CHECKING:
    from envsnap.snapshot.records import Facts, Gpu, Nvidia

AFFINITY = {"CPU Affinity": "cpu", "NUMA Affinity": "numa", "GPU NUMA ID": "gpu_numa_id"}
DEVICE = re.compile(r"(GPU\d+|NIC\d+|mlx\d+_\d+|[A-Za-z]+\d*_\d+)$")
LINK = re.compile(r"(X|SYS|NODE|PHB|PXB|PIX|SOC|NV\d+|PCIE|XGMI|\d+|N/A)$")
NIC_NAME = re.compile(r"\s*(NIC\d+)\s*:\s*(\S+)\s*$")
ROCM_TABLE = re.compile(r"=+\s*(Weight|Hops|Link Type) between two GPUs\s*=+$")
ROCM_RULE = re.compile(r"=+.*=+$|=+$")


@dataclass
class Matrix:
    links: dict[str, dict[str, str]] = field(default_factory=dict)
    affinity: dict[str, dict[str, str]] = field(default_factory=dict)
    nics: dict[str, str] = field(default_factory=dict)
    broken: list[int] = field(default_factory=list)     # indices of rows that did not fit
    columns: list[str] = field(default_factory=list)    # the header's devices: all GPUs
    end: int = 0                                          # the index of the line after it

    def as_topo(self) -> dict[str, object]:
        return {"links": self.links, "affinity": self.affinity, "nics": self.nics}


def plain(line: str) -> str:
    return ANSI.sub("", line).strip()


def words_at(line: str) -> list[tuple[int, str]]:
    """Each word of a line with the column it starts at (tabs kept as one column each)."""
    return [(found.start(), found.group()) for found in re.finditer(r"\S+", ANSI.sub("", line))]


def header_columns(line: str) -> list[tuple[int, str]]:
    """The header's columns and where each starts, affinity names joined back."""
    words = words_at(line)
    cells: list[tuple[int, str]] = []
    at = 0
    while at < len(words):
        for name in AFFINITY:
            size = len(name.split())
            if [word for _, word in words[at:at + size]] == name.split():
                cells.append((words[at][0], name))
                at += size
                break
        else:
            cells.append(words[at])
            at += 1
    return cells


def header_cells(line: str) -> list[str] | None:
    """The header's column names; None for no topo header."""
    # GPU0 heads every header and CPU Affinity ends it (drivers 418 on): a cheap test, as
    # every line of a paste is asked, and not rocm-smi's tables, whose header is GPUs alone
    if "GPU0" not in line or "CPU Affinity" not in line:
        return None
    cells = [name for _, name in header_columns(line)]
    devices = [c for c in cells if c not in AFFINITY]
    if not devices or not devices[0].startswith("GPU") or \
            not all(DEVICE.match(c) for c in devices):
        return None
    return cells


def is_header(line: str) -> bool:
    return header_cells(line) is not None


def read_smi(lines: list[str], at: int) -> Matrix:
    """nvidia-smi topo -m from its header at `at`: the matrix, its legend, its NIC legend."""
    matrix = Matrix(end=at)
    header = header_cells(lines[at]) if at < len(lines) else None
    if header is None:
        return matrix
    devices = [c for c in header if c not in AFFINITY]
    matrix.columns = devices
    places = [(where, AFFINITY[name]) for where, name in header_columns(lines[at])
              if name in AFFINITY]
    at += 1
    while at < len(lines) and plain(lines[at]) and not plain(lines[at]).startswith("Legend"):
        words = words_at(lines[at])
        name = words[0][1]
        links = [word for _, word in words[1:1 + len(devices)]]
        rest = words[1 + len(devices):]
        if not DEVICE.match(name) or len(links) < len(devices) and name.startswith("GPU") \
                or not all(LINK.match(cell) for cell in links) or len(rest) > len(places):
            matrix.broken.append(at)
        elif name.startswith("GPU"):
            matrix.links[name] = {peer: link for peer, link in zip(devices, links) if link != "X"}
            matrix.affinity[name] = affinities(rest, places, "\t" in lines[at])
        at += 1
    matrix.end = legends(lines, at, matrix)
    return matrix


def affinities(rest: list[tuple[int, str]], places: list[tuple[int, str]],
               tabs: bool) -> dict[str, str]:
    """The affinity cells of a row. All there, or tab-separated (nvidia-smi never leaves a
    cell empty there): in order. Spaces with cells missing (`PXB     PXB          N/A`, a
    host that reports no affinity): the columns a copy's tab stops moved cannot tell which
    cell is which, so only a CPU list, which no other column holds, is kept."""
    if tabs or len(rest) == len(places):
        return {field: word for (_, word), (_, field) in zip(rest, places)}
    lists = [word for _, word in rest if re.search(r"[-,]", word)]
    return {"cpu": lists[0]} if len(lists) == 1 and any(f == "cpu" for _, f in places) else {}


def legends(lines: list[str], at: int, matrix: Matrix) -> int:
    """Past the `Legend:` and `NIC Legend:` blocks (indented lines, blanks between)."""
    while True:
        blank = at
        while blank < len(lines) and not plain(lines[blank]):
            blank += 1
        if blank >= len(lines) or plain(lines[blank]) not in ("Legend:", "NIC Legend:"):
            return at
        at = blank + 1
        while at < len(lines) and (not plain(lines[at]) or lines[at][:1] in (" ", "\t")):
            found = NIC_NAME.match(ANSI.sub("", lines[at]))
            if found:
                matrix.nics[found.group(1)] = found.group(2)
            at += 1


def is_rocm_start(line: str) -> bool:
    text = plain(line)
    return "ROCm System Management Interface" in text or bool(ROCM_TABLE.match(text))


def read_rocm(lines: list[str], at: int) -> Matrix:
    """rocm-smi --showtopo from its banner or first table: the link types between GPUs."""
    matrix = Matrix(end=at)
    while at < len(lines):
        text = plain(lines[at])
        table = ROCM_TABLE.match(text)
        if table:
            at = rocm_table(lines, at + 1, table.group(1), matrix)
        elif not text or ROCM_RULE.fullmatch(text) or text.startswith("GPU["):
            at += 1          # banners, NUMA lines (`GPU[0] : (Topology) Numa Node: 0`)
        else:
            break
    matrix.end = at
    return matrix


def rocm_table(lines: list[str], at: int, kind: str, matrix: Matrix) -> int:
    header = plain(lines[at]).split() if at < len(lines) else []
    if not header or not all(re.fullmatch(r"GPU\d+", c) for c in header):
        return at
    at += 1
    while at < len(lines) and plain(lines[at]).startswith("GPU") and \
            not plain(lines[at]).startswith("GPU["):
        cells = plain(lines[at]).split()
        if len(cells) != len(header) + 1:
            matrix.broken.append(at)
        elif kind == "Link Type":
            matrix.links[cells[0]] = {peer: link for peer, link in zip(header, cells[1:])
                                      if peer != cells[0]}
        at += 1
    return at


def matrix_facts(matrix: Matrix, numa_node: bool = False) -> Facts:
    """GPU0.. links (NICs by their legend's names) and affinities, as the agent keeps them."""
    links = {gpu: peers for gpu, peers in matrix.links.items() if peers}
    topo: dict[str, dict[str, str | None]] = {
        gpu: {matrix.nics.get(p, p): link for p, link in peers.items()}
        for gpu, peers in links.items()}
    gpus: dict[str, Gpu] = {}
    for gpu, affinity in matrix.affinity.items():
        numa = affinity.get("gpu_numa_id", "N/A")
        record: Gpu = {"index": int(gpu[3:])}
        if "cpu" in affinity:               # a cell the matrix has: what it does not say is
            record["cpu_affinity"] = affinity["cpu"]          # unknown, not None
        if "numa" in affinity:
            record["numa_affinity"] = affinity["numa"]
        if numa_node and "gpu_numa_id" in affinity:
            record["numa_node"] = int(numa) if numa.isdigit() else None
        gpus[gpu] = record
    nvidia: Nvidia = {}
    if topo:
        nvidia["topology"] = topo
    if gpus:
        nvidia["gpus"] = gpus
    return {"nvidia": nvidia} if nvidia else {}
