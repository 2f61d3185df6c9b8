"""Regular expressions from a user, or from a stranger's snapshot, that cannot hang anything.

Python's `re` backtracks: `(a+)+$`, `(a|aa)*b` or `(.*a){20}` take exponential time on a
line that almost matches, and `.*.*.*x` polynomial time; the match runs in C and holds the
GIL, so a collector thread stuck in one freezes the whole agent. Two guards, the same on the
controller and on the host (this module is stdlib-only and runs on both):

1. `problem(pattern)`: a syntax check that refuses what backtracks catastrophically or
   could not be bounded: a repeated group holding a quantifier or an alternation (`(a+)+`,
   `(a|aa)*`, `(.*a){20}`), backreferences, conditionals, atomic groups, comments, over
   1000 characters.
   docs/guide/capture.md, "Patterns", lists what is allowed.
2. `Budgeted`: a pattern that passes but repeats anything (`.*`, `\\s+`) is matched in a
   child interpreter killed after `budget` seconds, so what the check cannot see
   (`.*.*.*.*x` on a long line) ends in one clear error, never a spin. A pattern without
   repetition costs at most its length at each position and is matched here.
"""
from __future__ import annotations

import json
import re
import sys

TYPE_CHECKING = False   # typing's own, without its import: see runner.py
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional, Tuple

MAX_PATTERN_CHARS = 1000
DEFAULT_BUDGET = 2.0          # seconds for one batch of matches; sane patterns take ms
ALLOWED_FLAGS = set("aiLmsux")
REFUSED_GROUPS = {"?P=": "a backreference", "?(": "a conditional", "?>": "an atomic group",
                  "?#": "a comment"}
LOOKAROUND = ("?=", "?!", "?<=", "?<!")   # `\d+(?= ms)`: checked like a group
COUNTED = re.compile(r"\{(\d*)(,?)(\d*)\}")

# The child: one JSON job on stdin, one JSON answer on stdout. `-I -S`: no site, no
# environment, no current folder on sys.path: it imports nothing but the stdlib.
CHILD = r"""
import json, re, sys
job = json.load(sys.stdin)
compiled = [re.compile(p) for p in job["patterns"]]
if job["op"] == "search":
    answer = [[i for i, line in enumerate(job["lines"]) if c.search(line)] for c in compiled]
else:
    last = None
    for last in compiled[0].finditer(job["lines"][0]):
        pass
    answer = None if last is None else (last.group(1) or "") if compiled[0].groups \
        else last.group(0)
json.dump(answer, sys.stdout)
"""


class PatternTimeout(Exception):
    """Matching took longer than the budget: the pattern backtracks on this text."""


class PatternRefused(ValueError):
    """The pattern's syntax is outside what envsnap matches (see `problem`)."""


class _Group:
    def __init__(self) -> None:
        self.repeats = False       # a quantifier inside, at any depth
        self.alternates = False    # a `|` inside, at any depth


def quantifier_at(pattern: str, index: int) -> Optional[Tuple[int, Optional[int]]]:
    """(end index, max repeats or None for unbounded) when a quantifier starts here."""
    char = pattern[index]
    if char in "*+":
        return index + 1, None
    if char == "?":
        return index + 1, 1
    if char == "{":
        counted = COUNTED.match(pattern, index)
        if counted and (counted.group(1) or counted.group(3)):
            low, comma, high = counted.groups()
            most = int(high) if high else (None if comma else int(low))
            return counted.end(), most
    return None


def class_end(pattern: str, index: int) -> int:
    """The index after the `]` that closes the class opened at `index`."""
    position = index + 1
    if position < len(pattern) and pattern[position] == "^":
        position += 1
    if position < len(pattern) and pattern[position] == "]":   # `[]a]`: a literal ]
        position += 1
    while position < len(pattern) and pattern[position] != "]":
        position += 2 if pattern[position] == "\\" else 1
    return position + 1


def group_opening(pattern: str, index: int) -> Tuple[int, bool, Optional[str]]:
    """For the `(` at `index`: (index after the opening, whether a group opens there (not
    for flags such as `(?i)`), why it is refused or None)."""
    rest = pattern[index + 1:]
    if not rest.startswith("?"):
        return index + 1, True, None
    for opening, name in REFUSED_GROUPS.items():
        if rest.startswith(opening):
            return index + 1, True, name
    if rest.startswith("?:"):
        return index + 3, True, None
    for opening in LOOKAROUND:
        if rest.startswith(opening):
            return index + 1 + len(opening), True, None
    if rest.startswith("?P<"):
        return index + 2 + rest.find(">"), True, None
    flags = re.match(r"\?([a-zA-Z-]*)(:|\))", rest)
    if flags and set(flags.group(1)) <= ALLOWED_FLAGS | {"-"}:
        return index + 1 + flags.end(), flags.group(2) == ":", None
    return index + 1, True, "an unknown group"


def problem(pattern: str) -> Optional[str]:
    """Why `pattern` is refused, or None when it is allowed (a valid regex is assumed:
    compile it first)."""
    if len(pattern) > MAX_PATTERN_CHARS:
        return "longer than %d characters" % MAX_PATTERN_CHARS
    stack = [_Group()]
    index = 0
    while index < len(pattern):
        char = pattern[index]
        quantified_group: Optional[_Group] = None
        if char == "\\":
            following = pattern[index + 1:index + 2]
            if following.isdigit() and following != "0" or following == "g":
                return "a backreference (\\%s)" % following
            index += 2
        elif char == "[":
            index = class_end(pattern, index)
        elif char == "(":
            start = index
            index, opens, refused = group_opening(pattern, index)
            if refused:
                return "%s at %r" % (refused, pattern[start:start + 4])
            if opens:
                stack.append(_Group())
            continue
        elif char == ")":
            if len(stack) == 1:
                return "an unbalanced parenthesis"
            quantified_group = stack.pop()
            stack[-1].repeats |= quantified_group.repeats
            stack[-1].alternates |= quantified_group.alternates
            index += 1
        elif char == "|":
            stack[-1].alternates = True
            index += 1
            continue
        else:
            index += 1
        if index >= len(pattern):
            break
        quantifier = quantifier_at(pattern, index)
        if quantifier is None:
            continue
        index, most = quantifier
        if index < len(pattern) and pattern[index] == "?":   # lazy: the same risk
            index += 1
        if index < len(pattern) and quantifier_at(pattern, index) is not None:
            return "a quantifier on a quantifier (at %r)" % pattern[index:index + 4]
        stack[-1].repeats = True
        inside = quantified_group
        if inside is not None and (most is None or most > 1) and \
                (inside.repeats or inside.alternates):
            what = "a quantifier" if inside.repeats else "an alternation"
            return ("a repeated group holding %s, which can backtrack exponentially "
                    "(write the repetition once, outside or inside the group)" % what)
    return None


def repeats(pattern: str) -> bool:
    """Whether the pattern has any quantifier: only then can matching take long."""
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            index += 2
        elif char == "[":
            index = class_end(pattern, index)
        elif char == "(":
            index = group_opening(pattern, index)[0]
            continue
        else:
            index += 1
        if index < len(pattern) and quantifier_at(pattern, index) is not None:
            return True
    return False


def proc_pattern_problem(pattern: str) -> Optional[str]:
    """Why a --proc pattern is refused, or None. One that is no regex (`[bad`) is allowed:
    it is matched as a plain substring."""
    try:
        re.compile(pattern)
    except (re.error, OverflowError, RecursionError):
        return None
    return problem(pattern)


def regex_problem(pattern: str) -> Optional[str]:
    """Why a regex (--metric) is refused, or None."""
    try:
        re.compile(pattern)
    except (re.error, OverflowError, RecursionError) as exc:
        return "not a regular expression (%s)" % exc
    return problem(pattern)


def checked(pattern: str) -> "re.Pattern[str]":
    """The compiled pattern, or PatternRefused (re.error and friends pass through)."""
    compiled = re.compile(pattern)
    why = problem(pattern)
    if why is not None:
        raise PatternRefused(why)
    return compiled


def run_child(job: Dict[str, Any], budget: float) -> Any:
    import subprocess  # on use: schema checks import this module, diff must stay quick

    if not sys.executable:
        raise PatternTimeout("no interpreter to match in with a time limit")
    try:
        done = subprocess.run([sys.executable, "-I", "-S", "-c", CHILD],
                              input=json.dumps(job), capture_output=True, text=True,
                              timeout=budget)
    except subprocess.TimeoutExpired:
        raise PatternTimeout("took more than %gs (it backtracks)"
                             % budget) from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["exit %d" % done.returncode])[-1]
        raise PatternTimeout("matching failed: %s" % last)
    return json.loads(done.stdout)


def search_lines(patterns: List["re.Pattern[str]"], lines: List[str],
                 budget: float = DEFAULT_BUDGET) -> List[List[int]]:
    """For each pattern, the indices of the lines it finds a match in; within `budget`
    seconds, else PatternTimeout."""
    answer: List[List[int]] = [[] for _ in patterns]
    slow = [n for n, compiled in enumerate(patterns) if repeats(compiled.pattern)]
    for number, compiled in enumerate(patterns):
        if number not in slow:
            answer[number] = [i for i, line in enumerate(lines) if compiled.search(line)]
    if slow and lines:
        found = run_child({"op": "search", "patterns": [patterns[n].pattern for n in slow],
                           "lines": lines}, budget)
        for number, indices in zip(slow, found):
            answer[number] = indices
    return answer


def last_match(compiled: "re.Pattern[str]", text: str,
               budget: float = DEFAULT_BUDGET) -> Optional[str]:
    """The last match's first group (or the whole match without groups), None for no
    match; within `budget` seconds, else PatternTimeout."""
    if repeats(compiled.pattern) and text:
        found = run_child({"op": "last", "patterns": [compiled.pattern], "lines": [text]},
                          budget)
        return None if found is None else str(found)
    last = None
    for found in compiled.finditer(text):
        last = found
    if last is None:
        return None
    return (last.group(1) or "") if compiled.groups else last.group(0)
