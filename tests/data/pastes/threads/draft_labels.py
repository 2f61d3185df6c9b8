"""Drafts labels.json from the template pastes with plain patterns of each tool's printed
lines, written for this corpus alone (envsnap's readers are not used). Every draft was then
read against its paste and corrected by hand (README.md); run it again only to start over:
`python tests/data/pastes/threads/draft_labels.py > draft.json`."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def first(pattern: str, text: str) -> str | None:
    found = re.search(pattern, text, re.M)
    return found.group(1).strip() if found else None


def known(value: str | None) -> str | None:
    bad = ("N/A", "None", "Could not collect", "No CUDA", "Module Not Found", "")
    return None if value is None or value in bad else value


def links(text: str) -> dict[str, str]:
    """GPU-to-GPU cells of every whole row of a topo -m matrix."""
    found: dict[str, str] = {}
    lines = text.splitlines()
    for number, line in enumerate(lines):
        header = line.split()
        if header[:1] != ["GPU0"] or "X" in header:
            continue
        gpus = [cell for cell in header if re.fullmatch(r"GPU\d+", cell)]
        for row in lines[number + 1:]:
            cells = row.split()
            if not cells or not re.fullmatch(r"GPU\d+", cells[0]) or len(cells) < len(gpus) + 1:
                break
            for peer, cell in zip(gpus, cells[1:]):
                if peer != cells[0]:
                    found[f"{cells[0]}-{peer}"] = cell
        break
    return found


def torch_facts(text: str) -> dict[str, Any]:
    facts: dict[str, Any] = {
        "torch": known(first(r"PyTorch version\s*:\s*(.*)$", text)),
        "torch_cuda": known(first(r"CUDA used to build PyTorch\s*:\s*(.*)$", text)),
        "cuda_toolkit": known(first(r"CUDA runtime version\s*:\s*(.*)$", text)),
        "driver": known(first(r"Nvidia driver version\s*:\s*(.*)$", text)),
        "python": (first(r"Python version\s*:\s*(\S+)", text)),
        "os": first(r"^OS\s*:\s*(.*?)(?: \([^()]*\))?$", text),
        "vllm": known(first(r"vLLM Version\s*:\s*(\S+)", text)),
        "nccl": known(first(r"NCCL version\s*:\s*(\S+)", text)),
    }
    cudnn = sorted(set(re.findall(r"libcudnn[\w]*\.so\.(\d+\.\d+\.\d+)$", text, re.M)))
    if cudnn:
        facts["cudnn"] = cudnn
    gpus = re.findall(r"^(?:GPU models and configuration\s*:\s*)?GPU (\d+): (.+?)(?: \(UUID.*)?$",
                      text, re.M)
    if gpus:
        facts["gpus"] = [name.strip() for _, name in gpus]
        facts["gpu_count"] = len(gpus)
    packages = dict(re.findall(r"^\[pip3?\] ([\w.-]+)==(\S+)$", text, re.M))
    if packages:
        facts["packages"] = packages
    return facts


def sglang_facts(text: str) -> dict[str, Any]:
    facts: dict[str, Any] = {
        "python": first(r"^Python: (\S+)", text),
        "torch": known(first(r"^PyTorch: (\S+)", text)),
        "cuda_toolkit": first(r"^NVCC: .*?, V(\S+)", text),
        "driver": known(first(r"^CUDA Driver Version: (\S+)", text)),
    }
    gpus: list[str] = []
    for indexes, name in re.findall(r"^GPU ([\d,]+): (.+?)\s*$", text, re.M):
        gpus += [name] * len(indexes.split(","))
    if gpus:
        facts["gpus"], facts["gpu_count"] = gpus, len(gpus)
    packages = {name: version for name, version in
                re.findall(r"^(sglang|flashinfer|flashinfer_python|triton|transformers|vllm|"
                           r"numpy|sgl_kernel): (\S+)\s*$", text, re.M)
                if known(version)}
    if packages:
        facts["packages"] = packages
    return facts


def smi_facts(text: str) -> dict[str, Any]:
    facts: dict[str, Any] = {
        "driver": first(r"Driver Version: (\S+)", text),
        "cuda_driver": first(r"CUDA Version: (\S+)", text),
    }
    rows = re.findall(r"^\|\s+(\d+)\s+(.+?)\s+(?:On|Off)\s*\|\s*[0-9A-Fa-f]+:[0-9A-Fa-f:.]+",
                      text, re.M)
    memory = re.findall(r"^\|.*?W\s*/\s*\d+W\s*\|\s*\d+MiB\s*/\s*(\d+)MiB", text, re.M)
    facts["gpus"] = [None if name.endswith("...") else name for _, name in rows]
    facts["gpu_count"] = len(rows)
    facts["memory_mib"] = [int(m) for m in memory]
    return facts


def pip_facts(text: str) -> dict[str, Any]:
    """`name  version` rows under pip list's `Package Version` header, or pip freeze's
    `name==version` lines (a blockquote's `> ` taken off)."""
    packages: dict[str, str] = {}
    listed = False
    for line in text.splitlines():
        line = line[2:] if line.startswith("> ") else line
        if re.match(r"^Package\s+Version\b", line):
            listed = True
            continue
        row = re.match(r"^([A-Za-z0-9][\w.-]*)\s+(\d\S*)(?:\s+\S.*)?$", line) if listed else None
        frozen = re.match(r"^([A-Za-z0-9][\w.-]*)==(\S+)$", line)
        if row or frozen:
            name, version = (row or frozen).groups()  # type: ignore[union-attr]
            packages[name] = version
        elif listed and not re.match(r"^-+(\s+-+)*\s*$", line):
            listed = False
    return {"packages": packages}


def topo_facts(text: str) -> dict[str, Any]:
    return {}   # its links are drafted for every tool, below


def draft(name: str, tool: str, text: str) -> dict[str, Any]:
    reader = {"torch": torch_facts, "vllm": torch_facts, "sglang": sglang_facts,
              "smi": smi_facts, "topo": topo_facts, "pip": pip_facts}[tool]
    facts = {k: v for k, v in reader(text).items() if v not in (None, [], {})}
    found = links(text)
    if found:
        facts["links"] = found
    return facts


def main() -> None:
    index = json.loads((HERE / "index.json").read_text())
    out = {p["name"]: draft(p["name"], p["tool"],
                            (HERE / "pastes" / f"{p['name']}.template.txt").read_text())
           for p in index}
    json.dump(out, sys.stdout, indent=1)


if __name__ == "__main__":
    main()
