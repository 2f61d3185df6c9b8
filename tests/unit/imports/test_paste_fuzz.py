"""Never an internal error on a paste: real outputs (tests/data/pasted, the corpus of real
threads, the H200 recordings, conda and pip lists), mutated as copying mangles them (lines
dropped, duplicated, wrapped, re-indented, tabs to spaces and back, cut anywhere, fences and
prose added), given to every reader alone and to the whole import: each gives a reading or
says why it cannot (Unreadable, an envsnap error), never anything else. Seeded: the same cases
on every run."""
from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest

from envsnap.errors import EnvsnapError
from envsnap.imports import build
from envsnap.imports.reading import Unreadable

DATA = Path(__file__).resolve().parents[2] / "data"
SAMPLES = sorted([*(DATA / "pasted").glob("*.txt"), *(DATA / "h200-reports").glob("*.txt"),
                  *(DATA / "pastes").glob("conda_list_*.txt"), DATA / "pastes" / "uv_pip_list.txt",
                  DATA / "h200" / "collect_env.txt", DATA / "h200" / "smi.txt",
                  DATA / "h200" / "smi_q.txt", DATA / "h200" / "smi_topo_m.txt",
                  DATA / "h200x2" / "smi_topo_m.txt", DATA / "h200" / "smi_q.xml",
                  DATA / "h200-evidence" / "pip_freeze.txt",
                  DATA / "h200-evidence" / "pip_list.json",
                  # the corpus of real threads, each post whole as written (its template copy)
                  *(DATA / "pastes" / "threads" / "pastes").glob("*.template.txt")])
# mutations a sample: with the corpus of real threads there are about two hundred samples,
# so a dozen each keeps the suite's time while every sample is mangled every way over the set
CASES_A_SAMPLE = 12
PROSE = ["Thanks for any help!", "### Your current environment", "```text", "```", "> ",
         "<details>", "</details>", "$ python collect_env.py", "- [x] I searched the issues",
         "Collecting environment information...", "GPU Topology:", "NVIDIA Topology: ",
         "Legend:", "  NIC0: mlx5_0", "Package    Version", "----------", "vLLM Version: 0.9",
         "==============================", "GPU0\tGPU1\tCPU Affinity", "GPU0  X  NV12  0-3  0",
         "| NVIDIA-SMI 535.54.03    Driver Version: 535.54.03    CUDA Version: 12.2 |",
         "|   0  NVIDIA A100  On   | 00000000:07:00.0 Off |  0 |", "PyTorch version: 2.4",
         "Python: 3.11.5", "CUDA available: True", "=== Weight between two GPUs ===",
         "       GPU0         GPU1", "GPU0   0            15", "\x1b[4m", "\t\t", "\u00a0"]


def mutate(lines: list[str], rng: random.Random) -> list[str]:
    lines = list(lines)
    for _ in range(rng.randint(1, 6)):
        at = rng.randrange(len(lines) + 1)
        kind = rng.randrange(9)
        line = lines[at] if at < len(lines) else ""
        if kind == 0 and at < len(lines):
            del lines[at]                                              # dropped
        elif kind == 1 and at < len(lines):
            lines.insert(at, line)                                     # duplicated
        elif kind == 2 and len(line) > 2:                              # wrapped
            cut = rng.randrange(1, len(line))
            lines[at:at + 1] = [line[:cut], line[cut:]]
        elif kind == 3 and at < len(lines):
            lines[at] = " " * rng.randint(1, 4) + line                 # re-indented
        elif kind == 4:
            lines = [text.replace("\t", " " * rng.randint(1, 8)) for text in lines]
        elif kind == 5:
            lines = [text.replace("    ", "\t") for text in lines]
        elif kind == 6:
            lines = lines[:at] + ([line[:rng.randrange(len(line) + 1)]] if line else [])
        elif kind == 7:
            lines.insert(at, rng.choice(PROSE))                        # markdown, prose
        else:
            lines = ["> " + text for text in lines]                    # quoted in a reply
    return lines or [""]


def mutated(path: Path, number: int) -> str:
    rng = random.Random(f"{path.name}:{number}")
    return "\n".join(mutate(path.read_text().splitlines(), rng)) + "\n"


def answers(read: Callable[[str, str], object], text: str, source: str) -> None:
    try:
        read(text, source)
    except (Unreadable, EnvsnapError):
        pass


# one test a sample, its mutations in a loop: a test each costs more in the runner's
# bookkeeping than reading the mutation does
@pytest.mark.parametrize("path", SAMPLES, ids=[str(p.relative_to(DATA)) for p in SAMPLES])
def test_every_reader_gives_a_reading_or_says_why(path: Path) -> None:
    for number in range(CASES_A_SAMPLE):
        text = mutated(path, number)
        try:
            for kind, reader in build.READERS.items():
                answers(reader, text, kind)
            answers(lambda pasted, source: build.imported_snapshot(
                [build.Source(source, pasted)], label="fuzz", host="imported",
                captured_at="2026-12-05T00:00:00Z"), text, path.name)
        except Exception as crash:   # anything but a reading or a reason why not
            raise AssertionError(f"{path.name}, mutation {number}: {crash!r}") from crash


def test_the_samples_are_there_and_read_unmutated() -> None:
    assert len(SAMPLES) >= 20
    for path in SAMPLES:
        pasted = build.read_pasted(build.Source(path.name, path.read_text()))
        assert pasted.readings, path
