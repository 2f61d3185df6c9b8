"""Label templates: `--label 'run1/{host}-{rank}'`, one label per host, planned before
anything runs.

A template is plain substitution of envsnap's own fields, never `str.format` on what the
user typed: a field is one bare name from FIELDS, so `{host.__class__}` or `{host:>9}` is
refused here, never evaluated.
"""
from __future__ import annotations

import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Union

from envsnap.errors import UsageError
from envsnap.hosts.inventory import LOCAL, Host
from envsnap.snapshot.store import label_from_name

HOST, DATE, TIME, RANK = "host", "date", "time", "rank"
FIELDS = (HOST, DATE, TIME, RANK)
FIELD = re.compile(r"\{([^{}]*)\}")
# The task's rank as launchers export it: Slurm (srun, sbatch), torchrun, Open MPI, MPICH/PMIx.
RANK_VARIABLES = ("SLURM_PROCID", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK")


@dataclass(frozen=True)
class Field:
    name: str


Piece = Union[str, Field]   # a runtime alias: the controller runs on Python 3.9 too


@dataclass(frozen=True)
class LabelTemplate:
    text: str
    pieces: tuple[Piece, ...]

    def uses(self, name: str) -> bool:
        return Field(name) in self.pieces

    def render(self, values: Mapping[str, str]) -> str:
        return "".join(values[piece.name] if isinstance(piece, Field) else piece
                       for piece in self.pieces)


def fields_named() -> str:
    return ", ".join("{" + name + "}" for name in FIELDS)


def parse_template(text: str) -> LabelTemplate:
    """The template's literal text and fields, or one line saying what is wrong with it."""
    pieces: list[Piece] = []
    position = 0
    for match in FIELD.finditer(text):
        literal = text[position:match.start()]
        check_balanced(text, literal)
        pieces += [literal, Field(check_field(text, match.group(1)))]
        position = match.end()
    check_balanced(text, text[position:])
    pieces.append(text[position:])
    return LabelTemplate(text, tuple(piece for piece in pieces if piece != ""))


def check_balanced(text: str, literal: str) -> None:
    if "{" in literal or "}" in literal:
        raise UsageError(f"label template {text!r}: unbalanced '{{' or '}}' (fields are "
                         f"{fields_named()})")


def check_field(text: str, name: str) -> str:
    if name in FIELDS:
        return name
    base = re.split(r"[:!.\[]", name, maxsplit=1)[0]
    if base in FIELDS:
        raise UsageError(f"label template {text!r}: {{{name}}} is not a field: fields are "
                         f"bare names ({fields_named()}), with no format spec, conversion "
                         "or attribute")
    raise UsageError(f"label template {text!r}: unknown field {{{name}}} (fields are "
                     f"{fields_named()})")


def launcher_rank(environ: Mapping[str, str]) -> str:
    """This task's rank from the first launcher variable set; 0 when none is (one task)."""
    for variable in RANK_VARIABLES:
        value = environ.get(variable, "").strip()
        if value:
            if not value.isdigit():
                raise UsageError(f"{{rank}}: {variable}={value!r} is not a whole number")
            return str(int(value))
    return "0"


def host_field(host: Host) -> str:
    """A host's name as a label part; `local` is this machine's short hostname (under srun,
    the node's name), so the tasks of many nodes each get their own label."""
    if host.name == LOCAL:
        return label_from_name(socket.gethostname().split(".")[0])
    return label_from_name(host.name)


def shared_values(template: LabelTemplate, when: datetime,
                  environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Every field but {host}, from the capture's time (UTC) and the launcher's rank (read
    only when the template asks for it)."""
    values = {DATE: when.strftime("%Y-%m-%d"), TIME: when.strftime("%H%M%S")}
    if template.uses(RANK):
        values[RANK] = launcher_rank(os.environ if environ is None else environ)
    return values
