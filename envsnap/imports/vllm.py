"""vLLM's `python collect_env.py` (vllm/collect_env.py) -> facts: torch's collect_env with a
tail of vLLM's own, in two layouts.

- up to vLLM 0.8 (vllm-project/vllm #9293, #13497): torch's layout line for line, then right
  after the libraries `ROCM Version:`, `Neuron SDK Version:`, `vLLM Version:`,
  `vLLM Build Flags:` with one line under it, `GPU Topology:` with nvidia-smi's topo -m
  matrix and its legend under it, then a blank line and the environment variables vLLM
  reports (`NAME=value` a line: NCCL, CUDA, TORCH... and its own VLLM_*, secret-looking
  names left out by the script itself);
- from vLLM 0.8.5/0.9 (#18285 "reformat the collect-env output", #19607, #22372): the same
  facts in sections, each under a title between two rules of `=`, keys padded to one column
  (`OS                           : Ubuntu 22.04`), the topology matrix indented two spaces,
  the variables under "Environment Variables".

The sectioned layout is brought back to torch's, line for line (so a line number stays the
file's), and read by collect_env.py; this module reads the tail. The variables become
env.shell (partial: only those vLLM chose to print)."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, cast

from envsnap.imports import topology
from envsnap.imports.collect_env import (
    FIRST_LINE,
    LIBRARIES,
    known,
    read_lines,
    reading_of,
    versioned,
)
from envsnap.imports.reading import Reading, Unreadable, merge, quoted

if TYPE_CHECKING:
    from envsnap.snapshot.records import Facts

RULE = re.compile(r"=+$")
PADDED = re.compile(r"([A-Za-z][A-Za-z0-9_ ()/.,'-]*?)\s+: ?(.*)$")
ENV_LINE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
TITLES = {"CPU Info": "CPU:", "Versions of relevant libraries": LIBRARIES}
TAIL_KEYS = ("ROCM Version", "Neuron SDK Version", "vLLM Version")


SECTIONED = re.compile(r"^=+[ \t]*\n[ \t]*System Info[ \t]*\n[ \t]*=+", re.MULTILINE)


def looks_like(text: str) -> bool:
    """vLLM's tail, or (a paste cut before it) the sectioned layout only vLLM prints."""
    head = text[:200000]
    return "PyTorch version" in head and ("vLLM Version" in head or bool(SECTIONED.search(head)))


def unsectioned(lines: list[str]) -> list[str]:
    """The sectioned layout as torch's: rules and titles out (blank), padded keys closed up;
    the same number of lines."""
    plain = []
    for number, line in enumerate(lines):
        before = lines[number - 1] if number else ""
        after = lines[number + 1] if number + 1 < len(lines) else ""
        text = line.strip()
        if RULE.fullmatch(text):
            # a section's closing rule stands where torch's layout has its heading, if any
            title = lines[number - 1].strip() if number else ""
            closes = number >= 2 and RULE.fullmatch(lines[number - 2].strip())
            plain.append(TITLES.get(title, "") if closes else "")
        elif RULE.fullmatch(before.strip()) and RULE.fullmatch(after.strip()):
            # the first section's title stands where torch's layout has its first line: a
            # paste that starts at the banner is read from there, its System Info too
            plain.append(FIRST_LINE if text == "System Info" else "")
        elif (match := PADDED.match(line)) and not line.startswith(" "):
            plain.append(f"{match.group(1)}: {match.group(2)}".rstrip() if match.group(2)
                         else f"{match.group(1)}:")
        else:
            plain.append(line)
    return plain


def read(text: str, source: str, cut: bool = False) -> Reading:
    raw = text.splitlines()
    sectioned = any(RULE.fullmatch(line.strip()) and len(line.strip()) > 10 for line in raw)
    lines = unsectioned(raw) if sectioned else raw
    facts, keys = read_lines(lines, source, read_tail)
    if "vLLM Version" not in keys and not cut:
        raise Unreadable(source, len(lines), "truncated vLLM collect_env output: no "
                         "'vLLM Version' line after the libraries")
    version = keys.get("vLLM Version", "").strip() or None
    reading = reading_of(lines, source, facts, keys, "vLLM collect_env", version, cut)
    installed = versioned(version)
    if installed and re.match(r"\d", installed):   # the package itself, where no row lists it
        reading.facts.setdefault("python_env", {}).setdefault("packages", {}).setdefault(
            "vllm", installed)
    rocm = known(keys.get("ROCM Version"))
    if rocm:
        merge(reading.facts, {"cuda_nccl": {"rocm": {"version": rocm}}})
    reading.format = "sectioned (vLLM 0.9+)" if sectioned else "torch layout + vLLM tail"
    return reading


def read_tail(lines: list[str], at: int, source: str, facts: Facts,
              keys: dict[str, str]) -> None:
    env: dict[str, str | None] = {}
    while at < len(lines):
        line = lines[at].rstrip()
        key, _, value = line.partition(":")
        if not line.strip():
            at += 1
        elif key in TAIL_KEYS:
            keys[key] = value.strip()
            at += 1
        elif line == "vLLM Build Flags:":
            at += 2                      # its one line: CUDA Archs, ROCm, Neuron
        elif line == "GPU Topology:":
            at = read_topology(lines, at + 1, facts, source)
        elif (match := ENV_LINE.match(line)) and "vLLM Version" in keys:
            env[match.group(1)] = match.group(2)
            at += 1
        else:
            raise Unreadable(source, at + 1, f"cannot read {quoted(line)} as a line of "
                             "vLLM's collect_env tail")
    if env:
        merge(facts, {"env": {"shell": env}})


def read_topology(lines: list[str], at: int, facts: Facts, source: str) -> int:
    """The matrix under `GPU Topology:` (nvidia-smi's, or rocm-smi's on ROCm) and its legends;
    the next line's index. A row that does not fit its header is named (Unreadable): the
    paste's reader passes it over and reads the rest."""
    while at < len(lines) and not lines[at].strip():
        at += 1
    if at < len(lines) and topology.is_rocm_start(lines[at]):
        matrix = topology.read_rocm(lines, at)
        refuse_broken(matrix, lines, source)
        if matrix.links:
            merge(facts, {"cuda_nccl": {"rocm": {"topology": cast(
                "dict[str, dict[str, str | None]]", matrix.links)}}})
        return matrix.end
    matrix = topology.read_smi(lines, at)
    refuse_broken(matrix, lines, source)
    merge(facts, topology.matrix_facts(matrix))
    return matrix.end


def refuse_broken(matrix: topology.Matrix, lines: list[str], source: str) -> None:
    if matrix.broken:
        row = matrix.broken[0]
        raise Unreadable(source, row + 1, f"cannot read {quoted(lines[row])} as a row of the "
                         "topology matrix: its cells do not fit the header")
