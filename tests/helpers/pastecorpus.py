"""The corpus of pasted reports (tests/data/pastes/threads): each paste, in each copy style,
imported through the real CLI and its stored snapshot compared with the facts labelled by
hand. `score` is the whole measure; tests/data/pastes/score.py prints it, and
tests/corpus/test_pastes_corpus.py holds its figures."""
from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envsnap.snapshot.store import Store

CORPUS = Path(__file__).resolve().parent.parent / "data" / "pastes" / "threads"
STYLES = ("copy-button", "fenced", "template")
TOOLS = ("vllm", "sglang", "torch", "smi", "topo", "pip")
INTERNAL, REFUSED = 70, 4

# where a labelled fact lives in a snapshot's facts (the snapshot's schema, not a reader's)
PLACES: dict[str, tuple[str, ...]] = {
    "torch": ("cuda_nccl", "torch", "version"),
    "torch_cuda": ("cuda_nccl", "torch", "cuda"),
    "cuda_toolkit": ("cuda_nccl", "cuda_toolkit", "version"),
    "nccl": ("cuda_nccl", "nccl", "torch", "version"),   # torch.cuda.nccl.version()
    "driver": ("nvidia", "driver"),
    "cuda_driver": ("nvidia", "cuda_driver"),
    "gpu_count": ("nvidia", "gpu_count"),
    "python": ("python_env", "interpreter", "version"),
    "os": ("system", "os_release", "PRETTY_NAME"),
    "vllm": ("python_env", "packages", "vllm"),
    "torch_hip": ("cuda_nccl", "torch", "hip"),
    "hip_runtime": ("cuda_nccl", "rocm", "hip_runtime"),
    "miopen": ("cuda_nccl", "rocm", "miopen"),
}
ABSENT = object()

Runner = Callable[[list[str]], "tuple[int, str]"]   # argv -> (exit code, stderr)


@dataclass(frozen=True)
class Fact:
    """One labelled fact of one paste: `key` names it (`gpus[1]`, `links GPU0-GPU1`)."""

    key: str
    want: object
    got: object

    @property
    def verdict(self) -> str:
        if self.got is ABSENT:
            return "missing"
        return "right" if self.got == self.want else "wrong"


@dataclass
class Outcome:
    """One paste in one copy style: how the import ended and each labelled fact."""

    name: str
    tool: str
    style: str
    code: int
    message: str = ""
    facts: list[Fact] = field(default_factory=list)

    @property
    def read_right(self) -> bool:
        return self.code == 0 and all(f.verdict == "right" for f in self.facts)

    @property
    def wrong(self) -> list[Fact]:
        return [f for f in self.facts if f.verdict == "wrong"]

    def reason(self) -> str:
        if self.code == INTERNAL:
            return "internal error: " + self.message
        if self.code != 0:
            return f"exit {self.code}: " + self.message
        parts = [f"{f.key} {f.verdict}: want {f.want!r}, got "
                 f"{'nothing' if f.got is ABSENT else repr(f.got)}"
                 for f in self.facts if f.verdict != "right"]
        return "; ".join(parts)


def pastes() -> list[dict[str, Any]]:
    index: list[dict[str, Any]] = json.loads((CORPUS / "index.json").read_text())
    labels: dict[str, dict[str, Any]] = json.loads((CORPUS / "labels.json").read_text())
    return [{**paste, "labels": labels[paste["name"]]} for paste in index]


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def lookup(facts: object, place: tuple[str, ...]) -> object:
    for key in place:
        if not isinstance(facts, dict) or key not in facts:
            return ABSENT
        facts = facts[key]
    return facts


def compared(labels: dict[str, Any], facts: dict[str, Any]) -> Iterator[Fact]:
    """Each labelled fact beside what the snapshot says of it."""
    gpus = lookup(facts, ("nvidia", "gpus"))
    by_index = {gpu.get("index"): gpu for gpu in gpus.values()} if isinstance(gpus, dict) else {}
    for key, want in labels.items():
        if key in PLACES:
            yield Fact(key, want, lookup(facts, PLACES[key]))
        elif key == "gpus":
            for index, name in enumerate(want):
                if name is not None:
                    yield Fact(f"gpus[{index}]", name, by_index.get(index, {}).get("name", ABSENT))
        elif key == "memory_mib":
            for index, mib in enumerate(want):
                yield Fact(f"memory_mib[{index}]", mib,
                           by_index.get(index, {}).get("memory_total_mib", ABSENT))
        elif key == "cudnn":
            libraries = lookup(facts, ("cuda_nccl", "cudnn", "libraries"))
            got = sorted(set(libraries.values())) if isinstance(libraries, dict) else ABSENT
            yield Fact("cudnn", want, got)
        elif key == "links":
            for pair, link in want.items():
                one, other = pair.split("-")
                yield Fact(f"links {pair}", link,
                           lookup(facts, ("nvidia", "topology", one, other)))
        elif key == "packages":
            for name, version in want.items():
                yield Fact(f"packages {name}", version,
                           lookup(facts, ("python_env", "packages", canonical(name))))
        else:
            raise ValueError(f"labels.json: no place for {key!r}")


def score(run: Runner, store: Path) -> list[Outcome]:
    """Every paste in every copy style it has, imported with `run` into `store` and compared.
    `run` is the CLI in this process (argv without the program's name -> exit code, stderr)."""
    outcomes = []
    for number, paste in enumerate(pastes()):
        for style in paste["styles"]:
            label = f"p{number}-{style}"
            path = CORPUS / "pastes" / f"{paste['name']}.{style}.txt"
            code, stderr = run(["import", str(path), "--label", label, "--store", str(store)])
            outcome = Outcome(paste["name"], paste["tool"], style, code,
                              stderr.strip().splitlines()[-1] if stderr.strip() else "")
            if code == 0:
                shown, shown_err = run(["show", label, "--store", str(store)])
                if shown != 0:
                    outcome.code, outcome.message = shown, "show: " + shown_err.strip()
                document = Store(str(store)).load(label)
                outcome.facts = list(compared(paste["labels"], dict(document["facts"])))
            outcomes.append(outcome)
    return outcomes


def table(outcomes: list[Outcome]) -> str:
    """Counts per tool and per copy style: pastes, read right, refused, internal errors,
    other exits, wrong facts."""
    rows = ["tool     style        pastes  right  refused  internal  other  wrong-facts"]
    groups = [(tool, style) for tool in TOOLS for style in STYLES] + \
             [(tool, "all") for tool in TOOLS] + [("all", style) for style in STYLES] + \
             [("all", "all")]
    for tool, style in groups:
        chosen = [o for o in outcomes if tool in ("all", o.tool) and style in ("all", o.style)]
        if not chosen:
            continue
        rows.append(f"{tool:<8} {style:<12} {len(chosen):>6}  "
                    f"{sum(o.read_right for o in chosen):>5}  "
                    f"{sum(o.code == REFUSED for o in chosen):>7}  "
                    f"{sum(o.code == INTERNAL for o in chosen):>8}  "
                    f"{sum(o.code not in (0, REFUSED, INTERNAL) for o in chosen):>5}  "
                    f"{sum(len(o.wrong) for o in chosen):>11}")
    return "\n".join(rows)


def misses(outcomes: list[Outcome]) -> str:
    return "\n".join(f"{o.name}.{o.style}: {o.reason()}" for o in outcomes if not o.read_right)
