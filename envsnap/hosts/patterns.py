"""Ansible's host patterns, as `--limit` takes them: `n2`, `gpu:!n3`, `gpu:&rack1`, `gpu[0]`,
`gpu[1:3]`, `node0*`, `~node0[2-4]`, `rack1,login`, `@retry-file`.

The same rules as Ansible's inventory manager, so a `--limit` selects what
`ansible --list-hosts --limit` lists for the same inventory:

- patterns are split on `,`, or else on `:` outside brackets (unless the whole text is one
  host address, such as `node[01:04]` or `10.0.0.1`); `@FILE` stands for the patterns in
  FILE, one a line (a retry file);
- the plain patterns are taken first (their union, in order), then each `&pattern` keeps
  only the hosts it also matches, then each `!pattern` drops the hosts it matches; with no
  plain pattern, `all` is the start;
- one pattern is a host's exact name, else a shell glob (`node0?`) or, after `~`, a regular
  expression matched from the start of the name; it matches every host of each group whose
  name it matches, and hosts by name when no group matched (or it is a glob or regex);
- a trailing `[i]`, `[i:j]` or `[i:]` picks hosts by position (from 0, `j` included) among
  what the pattern matched: `node[01:04]` is the hosts 1 to 4 of `node`, not a name range.

A pattern that matches nothing is reported (Ansible warns and goes on); a selection with no
host left is a usage error, as it is to Ansible. A pattern read from an @FILE is named in
messages by its line alone, never by its text: the file may be anything given by mistake
(`@/proc/self/environ` holds tokens), so what is said of it is counts and a line number.
"""
from __future__ import annotations

import fnmatch
import ipaddress
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from envsnap.agent.patterns import regex_problem
from envsnap.errors import UsageError

ALL = "all"
SUBSCRIPT = re.compile(r"^(?P<base>.+)\[(?:(?P<index>-?[0-9]+)|"
                       r"(?P<start>[0-9]+):(?P<end>[0-9]*))\]$")
# One host address as Ansible's parse_address takes it: a name of letters, digits, `-`, `_`
# and `.`, with [x:y] ranges, and an optional :port. Such a text is one pattern, not a list.
ONE_ADDRESS = re.compile(r"^(?:[A-Za-z0-9_.-]|\[[A-Za-z0-9]+:[A-Za-z0-9]+(?::[0-9]+)?\])+"
                         r"(?::[0-9]+)?$")
COLON_PARTS = re.compile(r"(?:[^\s:\[\]]|\[[^\]]*\])+")
MAX_LIMIT_FILE_BYTES = 1 << 20


@dataclass(frozen=True)
class Hosts:
    """What patterns select from: every host in inventory order, and each group's hosts in
    Ansible's order (its own first, then its children's, level by level)."""

    names: Sequence[str]
    groups: Mapping[str, Sequence[str]]


@dataclass(frozen=True)
class Pattern:
    """One pattern of a --limit: as typed, or read from line `line` of the @FILE `file`,
    which holds `of` patterns."""

    text: str
    file: str | None = None
    line: int = 0
    of: int = 0

    @property
    def shown(self) -> str:
        """How an error names it: its text when typed, its place when read from a file."""
        return f"pattern {self.text!r}" if self.file is None else \
            f"the pattern at line {self.line} of @{self.file}"


@dataclass(frozen=True)
class Selection:
    hosts: list[str]
    unmatched: list[Pattern]      # patterns that matched no host (Ansible warns of each)


def unmatched_said(unmatched: Sequence[Pattern], quoted: bool = True) -> list[str]:
    """The patterns that matched no host, as messages name them: each typed one by its text
    (`quoted` as Python writes a string, or bare), each @FILE by counts and the first such
    line (`2 of the 5 patterns of @F, the first at line 3`)."""
    said: list[str] = []
    files: dict[str, list[Pattern]] = {}
    for pattern in unmatched:
        if pattern.file is None:
            said.append(repr(pattern.text) if quoted else pattern.text)
        else:
            files.setdefault(pattern.file, []).append(pattern)
    for file, missed in files.items():
        said.append(f"{len(missed)} of the {missed[0].of} patterns of @{file}, the first at "
                    f"line {min(pattern.line for pattern in missed)}")
    return said


def split_patterns(text: str) -> list[str]:
    """`a,b[1], c` -> [a, b[1], c]; `gpu:!n3` -> [gpu, !n3]; `node[01:04]` -> itself."""
    if "," in text:
        parts = text.split(",")
    elif ONE_ADDRESS.match(text) or is_ipv6(text):
        parts = [text]
    else:
        parts = COLON_PARTS.findall(text)
    return [part.strip() for part in parts if part.strip()]


def is_ipv6(text: str) -> bool:
    try:
        return ipaddress.ip_address(text).version == 6
    except ValueError:
        return False


def limit_patterns(text: str) -> list[Pattern]:
    """The patterns of a --limit, with each `@FILE` replaced by the lines of FILE."""
    found: list[Pattern] = []
    for pattern in split_patterns(text):
        found += file_patterns(pattern[1:]) if pattern.startswith("@") else [Pattern(pattern)]
    return found


def file_patterns(path: str) -> list[Pattern]:
    file = Path(path)
    if not file.is_file():
        why = "not a regular file" if file.exists() else "no such file"
        raise UsageError(f"--limit @{path}: {why} (a limit starting with '@' is a file "
                         "of host names, one a line)")
    try:
        with file.open("rb") as handle:
            data = handle.read(MAX_LIMIT_FILE_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"--limit @{path}: cannot read it: {exc.strerror}") from None
    if len(data) > MAX_LIMIT_FILE_BYTES:
        raise UsageError(f"--limit @{path}: over {MAX_LIMIT_FILE_BYTES >> 20} MiB: not a "
                         "file of host names")
    lines = [(number, line.strip()) for number, line in
             enumerate(data.decode("utf-8", "replace").splitlines(), 1) if line.strip()]
    return [Pattern(text, path, number, len(lines)) for number, text in lines]


def select(patterns: Sequence[Pattern], hosts: Hosts) -> Selection:
    """The hosts the patterns select, in Ansible's order, and the patterns that matched none."""
    plain = [p for p in patterns if p.text[0] not in "&!"]
    ordered = (plain or [Pattern(ALL)]) + [p for p in patterns if p.text[0] == "&"] + \
        [p for p in patterns if p.text[0] == "!"]
    known = set(hosts.names)
    chosen: list[str] = []
    unmatched: list[Pattern] = []
    for pattern in ordered:
        bare = pattern.text.lstrip("&!")
        found = [bare] if bare in known else match_one(bare, hosts, pattern.shown)
        if not found and bare != ALL:
            unmatched.append(pattern)
        if pattern.text[0] in "&!":
            keep = pattern.text[0] == "&"
            matched = set(found)
            chosen = [name for name in chosen if (name in matched) == keep]
        else:
            chosen = with_new(chosen, found)
    return Selection(chosen, unmatched)


def with_new(names: list[str], more: Sequence[str]) -> list[str]:
    """`names`, then those of `more` not in it yet, each once, in order."""
    seen = set(names)
    added = []
    for name in more:
        if name not in seen:
            seen.add(name)
            added.append(name)
    return names + added


def match_one(pattern: str, hosts: Hosts, shown: str) -> list[str]:
    """The hosts one pattern matches; `shown`: how an error names it (Pattern.shown)."""
    base, pick = split_subscript(pattern)
    return pick_hosts(enumerate_matches(base, hosts, shown), pick, shown)


def split_subscript(pattern: str) -> tuple[str, tuple[int, int | None] | None]:
    """`gpu[1:3]` -> (gpu, (1, 3)); `gpu[2]` -> (gpu, (2, None)); `gpu[1:]` -> (gpu, (1, -1));
    a regex keeps its brackets."""
    match = None if pattern.startswith("~") else SUBSCRIPT.match(pattern)
    if match is None:
        return pattern, None
    if match["index"] is not None:
        return match["base"], (int(match["index"]), None)
    return match["base"], (int(match["start"]), int(match["end"]) if match["end"] else -1)


def pick_hosts(found: list[str], pick: tuple[int, int | None] | None,
               shown: str) -> list[str]:
    if not found or pick is None:
        return found
    start, end = pick
    if end is None:
        try:
            return [found[start]]
        except IndexError:
            raise UsageError(f"--limit: no host at position {start} of {shown} (it "
                             f"matches {len(found)})") from None
    return found[start:(len(found) - 1 if end == -1 else end) + 1]


def enumerate_matches(pattern: str, hosts: Hosts, shown: str) -> list[str]:
    """Every host of each group the pattern names; hosts by name when it names no group, or
    when it is a glob or regex (which may name both)."""
    matches = matcher(pattern, shown)
    found: list[str] = []
    groups = [group for group in hosts.groups if matches(group)]
    for group in groups:
        found = with_new(found, hosts.groups[group])
    if not groups or pattern.startswith("~") or any(mark in pattern for mark in ".?*["):
        found = with_new(found, [name for name in hosts.names if matches(name)])
    return found


def matcher(pattern: str, shown: str) -> Callable[[str], object]:
    """A glob matched whole, or after `~` a regex matched from the name's start (one that
    could backtrack catastrophically is refused, as every pattern envsnap takes)."""
    expression = pattern[1:] if pattern.startswith("~") else fnmatch.translate(pattern)
    why = regex_problem(expression) if pattern.startswith("~") else None
    if why is not None:
        raise UsageError(f"--limit: {shown} refused: {why} "
                         "(see docs/guide/capture.md#patterns)")
    try:
        return re.compile(expression).match
    except re.error as exc:
        raise UsageError(f"--limit: {shown} is not valid ({exc})") from None
