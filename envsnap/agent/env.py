"""Environment variables that steer GPU jobs: of the capturing shell and of running workers.

The shell's variables are not enough (docs/STORY.md): a server may have been started from another
shell, and its spawned workers may have lost or changed variables. So processes whose command
line matches a configured pattern are read too, from /proc/PID/environ, together with their
descendants (multiprocessing workers often carry a command line that matches nothing).

/proc/PID/environ holds the environment the process was exec'd with; a later os.environ change
inside it (a sitecustomize, say) shows only in the children it starts afterwards.

envsnap's own processes are never workers, whatever the pattern (a controller's command line
holds the --proc pattern it was given): the agent and its ancestors; the controller and its
ancestors, when it runs on this host (the controller names itself in the config: pid, boot id
and pid namespace, so a pid of another machine or container is never taken for it); and any
other envsnap command or agent on the host, with the parents that only run it (a `sh -c` or
`timeout` whose command line names envsnap). They are known by their command line, not by a
variable in their environment: such a variable would pass on to the workloads envsnap bench
and bisect start, and those are real workers.
"""
from __future__ import annotations

import os
import re
import time

from .envnames import DEFAULT_NAMES, DEFAULT_PREFIXES, is_selected
from .redact import redact_argv, redact_env_value
from .util import escaped, read_text

TYPE_CHECKING = False   # typing's own, without its import: see runner.py
if TYPE_CHECKING:
    from typing import Any, Dict, Iterable, List, Mapping, Optional, Pattern, Set, Tuple

    from .envnames import Selector

    Matcher = Tuple[str, Optional[Pattern[str]]]

# A pattern as broad as "python" must not turn a snapshot into a process dump.
MAX_PROCESSES = 256
LIMIT_NAMES = {"Max open files": "nofile", "Max locked memory": "memlock"}


def collect(config: Dict[str, Any]) -> Dict[str, Any]:
    prefixes = tuple(config.get("env_prefixes") or DEFAULT_PREFIXES)
    selector: Selector = (prefixes, DEFAULT_NAMES)
    patterns = [str(p) for p in config.get("procs") or []]
    processes, omitted = (find_processes(patterns, selector, config.get("controller"))
                          if patterns else ({}, 0))
    facts = {
        "shell": select_env(os.environ, selector),
        "processes": processes,
        "processes_omitted": omitted,
        "proc_patterns": patterns,
        "env_prefixes": list(prefixes),
    }
    return {"facts": facts, "volatile": {}}


def select_env(environ: Mapping[str, str], selector: Selector) -> Dict[str, str]:
    """The selected variables, masked. os.environ's undecodable bytes are escaped here, as
    parse_environ escapes a worker's, before a secret is looked for: one text for one byte."""
    chosen = {escaped(name): escaped(value) for name, value in environ.items()
              if is_selected(name, selector)}
    return {name: redact_env_value(name, value) for name, value in chosen.items()}


def parse_environ(raw: bytes) -> Dict[str, str]:
    """NUL-separated NAME=value entries, as /proc/PID/environ holds them."""
    env: Dict[str, str] = {}
    for entry in raw.split(b"\0"):
        name, eq, value = entry.partition(b"=")
        if eq and name:
            env[escaped(name)] = escaped(value)
    return env


def parse_cmdline(raw: bytes) -> List[str]:
    # The kernel ends each argument with a NUL; drop the empty tail after the last one.
    return [escaped(arg) for arg in raw.split(b"\0")][:-1] if raw else []


def parse_stat(text: str) -> Tuple[int, int]:
    """(ppid, starttime in clock ticks since boot) from /proc/PID/stat.

    The command name in parentheses may itself hold spaces and ')', so split after the last one.
    """
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[1]), int(fields[19])


def parse_btime(proc_stat: str) -> Optional[int]:
    for line in proc_stat.splitlines():
        if line.startswith("btime "):
            return int(line.split()[1])
    return None


def boot_epoch() -> Optional[float]:
    """When this host booted: the clock now less the time since boot, as the kernel counts
    process start times (CLOCK_BOOTTIME). Read from the clock it is the same to the
    microsecond in every capture, so a worker's start time is too (/proc/uptime's hundredths
    made it jitter by a hundredth, and a running worker look changed); /proc/uptime, then
    /proc/stat's btime (cut to the whole second: a worker's start up to a second early)
    are the fallbacks."""
    clock = getattr(time, "CLOCK_BOOTTIME", None)
    if clock is not None:
        try:
            return time.time() - time.clock_gettime(clock)
        except OSError:
            pass
    uptime = (read_text("/proc/uptime") or "").split()
    try:
        return time.time() - float(uptime[0])
    except (IndexError, ValueError):
        btime = parse_btime(read_text("/proc/stat") or "")
        return float(btime) if btime is not None else None


def parse_limits(text: str) -> Dict[str, Dict[str, Any]]:
    """The nofile and memlock rows of /proc/PID/limits (soft, hard; 'unlimited' kept as is)."""
    limits: Dict[str, Dict[str, Any]] = {}
    for line in text.splitlines():
        match = re.match(r"(Max [a-z ]+?)\s{2,}(\S+)\s+(\S+)", line)
        if match and match.group(1) in LIMIT_NAMES:
            soft, hard = (int(v) if v.isdigit() else v for v in match.group(2, 3))
            limits[LIMIT_NAMES[match.group(1)]] = {"soft": soft, "hard": hard}
    return limits


def compile_patterns(patterns: Iterable[str]) -> List[Matcher]:
    """Each pattern with its regex; None for one that is no regex (a substring then).
    A pattern that could backtrack catastrophically is refused (PatternRefused, a
    ValueError): a stranger's snapshot may carry one, and restore --check captures with it."""
    from .patterns import PatternRefused, problem  # on use: a capture without --proc has none

    matchers: List[Matcher] = []
    for pattern in patterns:
        try:
            compiled = re.compile(pattern)
        except (re.error, OverflowError, RecursionError):  # not a regex: still a substring
            matchers.append((pattern, None))
            continue
        why = problem(pattern)
        if why is not None:
            raise PatternRefused("--proc pattern %r refused: %s" % (pattern, why))
        matchers.append((pattern, compiled))
    return matchers


def first_matches(lines: List[str], matchers: List[Matcher]) -> List[Optional[str]]:
    """For each line, the first pattern found in it (as a substring or as a regex), or
    None. Regexes that repeat are matched under a time budget (patterns.py): PatternTimeout
    rather than a spin when one backtracks on a long command line."""
    from .patterns import PatternTimeout, search_lines

    regexes = [regex for _, regex in matchers if regex is not None]
    try:
        regex_hits = iter(search_lines(regexes, lines))
    except PatternTimeout as exc:
        raise PatternTimeout("--proc %s: matching the command lines %s"
                             % (" ".join(repr(r.pattern) for r in regexes), exc)) from None
    hits = [set(next(regex_hits)) if regex is not None else set() for _, regex in matchers]
    return [next((pattern for (pattern, _), found in zip(matchers, hits)
                  if pattern in line or number in found), None)
            for number, line in enumerate(lines)]


def matching_pattern(argv: List[str], matchers: List[Matcher]) -> Optional[str]:
    return first_matches([" ".join(argv)], matchers)[0]


class ProcTable:
    """One pass over /proc: command line, parent and start time of every visible process."""

    def __init__(self, root: str = "/proc") -> None:
        self.root = root
        self.argv: Dict[int, List[str]] = {}
        self.stat: Dict[int, Tuple[int, int]] = {}
        for name in os.listdir(root):
            if name.isdigit():
                self._add(int(name))

    def _add(self, pid: int) -> None:
        base = "%s/%d/" % (self.root, pid)
        try:
            argv = parse_cmdline(read_bytes(base + "cmdline"))
            stat = parse_stat(read_bytes(base + "stat").decode("utf-8", "replace"))
        except (OSError, ValueError, IndexError):  # it exited while we looked
            return
        if argv:  # kernel threads have an empty command line
            self.argv[pid] = argv
            self.stat[pid] = stat

    def ancestors(self, pid: int) -> Set[int]:
        """pid and its parents up to, not including, init."""
        seen: Set[int] = set()
        while pid > 1 and pid not in seen:
            seen.add(pid)
            pid = self.stat[pid][0] if pid in self.stat else 0
        return seen

    def children(self) -> Dict[int, List[int]]:
        tree: Dict[int, List[int]] = {}
        for pid, (ppid, _) in sorted(self.stat.items()):
            tree.setdefault(ppid, []).append(pid)
        return tree


PYTHON_VALUED_OPTIONS = ("-X", "-W")   # python options whose value is the next argument


def program_script(argv: List[str]) -> str:
    """The script a python command line runs ("-m NAME" as NAME), or "" for none."""
    words = iter(argv[1:])
    for word in words:
        if word == "-m":
            return next(words, "")
        if word == "-c":   # a program given as text: no script
            return ""
        if word in PYTHON_VALUED_OPTIONS:
            next(words, "")
        elif not word.startswith("-"):
            return word
    return ""


def is_envsnap_command(argv: List[str]) -> bool:
    """An envsnap CLI (`envsnap ...`, `python .../bin/envsnap ...`, `python -m envsnap`) or
    agent (`python ~/.cache/envsnap/agent-<hash> ...`, hosts/payload.py) command line."""
    program = os.path.basename(argv[0]) if argv else ""
    if program == "envsnap":
        return True
    if not program.startswith("python"):
        return False
    script = program_script(argv)
    name = os.path.basename(script.rstrip("/"))
    return (script.split(".")[0] == "envsnap" or name == "envsnap"
            or (name.startswith("agent-")
                and os.path.basename(os.path.dirname(script.rstrip("/"))) == "envsnap"))


def controller_pid(controller: Optional[Mapping[str, Any]]) -> Optional[int]:
    """The controller's pid when it runs on this machine and in this pid namespace."""
    if not controller:
        return None
    here = (read_text("/proc/sys/kernel/random/boot_id") or "").strip(), read_link(
        "/proc/self/ns/pid")
    same = here == (controller.get("boot_id"), controller.get("pid_namespace"))
    return int(controller["pid"]) if same and here[0] else None


def envsnap_processes(table: ProcTable, controller: Optional[Mapping[str, Any]]) -> Set[int]:
    """envsnap's own processes on this host and the parents that run them (module docstring)."""
    own = table.ancestors(os.getpid()) | {os.getpid(), os.getppid()}
    pid = controller_pid(controller)
    if pid is not None:
        own |= table.ancestors(pid)
    for pid, argv in table.argv.items():
        if not is_envsnap_command(argv):
            continue
        while pid > 1 and pid not in own:
            own.add(pid)
            pid = table.stat[pid][0] if pid in table.stat else 0
            if "envsnap" not in " ".join(table.argv.get(pid, [])):
                break
    return own


def select_processes(table: ProcTable, matchers: List[Matcher],
                     controller: Optional[Mapping[str, Any]] = None) -> Dict[int, str]:
    """{pid: why it was taken}: a pattern match, or the descendant of a matched process;
    envsnap's own processes left out (the module docstring says which)."""
    skip = envsnap_processes(table, controller)
    chosen: Dict[int, str] = {}
    pids = [pid for pid in sorted(table.argv) if pid not in skip]
    for pid, pattern in zip(pids, first_matches([" ".join(table.argv[pid]) for pid in pids],
                                                matchers)):
        if pattern is not None:
            chosen[pid] = "pattern %s" % pattern
    tree = table.children()
    queue = list(chosen)
    while queue:
        parent = queue.pop(0)
        for child in tree.get(parent, []):
            if child not in chosen and child not in skip:
                chosen[child] = "child of %d" % parent
                queue.append(child)
    return chosen


def find_processes(patterns: List[str], selector: Selector,
                   controller: Optional[Mapping[str, Any]] = None
                   ) -> Tuple[Dict[str, Any], int]:
    """({pid: process facts}, how many matched processes were left out by the cap)."""
    table = ProcTable()
    chosen = select_processes(table, compile_patterns(patterns), controller)
    booted = boot_epoch()
    found: Dict[str, Any] = {}
    for pid in sorted(chosen)[:MAX_PROCESSES]:
        found[str(pid)] = describe_process(pid, table, selector, booted)
        found[str(pid)]["matched"] = chosen[pid]
    return found, max(0, len(chosen) - MAX_PROCESSES)


def processes_by_pid(table: ProcTable, pids: List[int], selector: Selector
                     ) -> Dict[str, Any]:
    """{pid: process facts} of the given pids of `table` (found by another rule than a
    pattern: agent/discover.py's Python processes)."""
    booted = boot_epoch()
    found: Dict[str, Any] = {}
    for pid in pids:
        if pid in table.stat:
            found[str(pid)] = dict(describe_process(pid, table, selector, booted),
                                   matched="a running python")
    return found


def describe_process(pid: int, table: ProcTable, selector: Selector,
                     booted: Optional[float]) -> Dict[str, Any]:
    base = "/proc/%d/" % pid
    ppid, start_ticks = table.stat[pid]
    since_boot = round(start_ticks / os.sysconf("SC_CLK_TCK"), 2)
    return {
        "cmdline": redact_argv(table.argv[pid]),
        "exe": read_link(base + "exe"),
        "cwd": read_link(base + "cwd"),
        "ppid": ppid,
        "start_since_boot_s": since_boot,
        "start_epoch": round(booted + since_boot, 2) if booted is not None else None,
        "env": read_process_env(base + "environ", selector),
        "limits": parse_limits(read_text(base + "limits") or ""),
    }


def read_process_env(path: str, selector: Selector) -> Dict[str, Any]:
    try:
        raw = read_bytes(path)
    except PermissionError:
        return {"error": "permission denied"}
    except OSError as exc:  # it exited since the scan
        return {"error": exc.strerror or str(exc)}
    return select_env(parse_environ(raw), selector)


def read_bytes(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def read_link(path: str) -> Optional[str]:
    try:
        return os.readlink(path)
    except OSError:  # another user's process, or gone
        return None
