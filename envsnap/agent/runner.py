"""Run every collector with its own timeout and print one JSON document.

The document says what the agent itself cost on the host, beside each collector's seconds:
`agent.startup_seconds` (the interpreter's start and the agent's own imports, __main__.py)
and `agent.masking_seconds` (the last pass, over what the agent adds to the collectors').

Each collector runs in a child process of its own, forked before its module is imported:
they are mostly Python (reading 200 packages' metadata, NVML's wrappers), so in threads
they would take turns on one interpreter lock; forked, they run side by side on the host's
cores, and all of them take about as long as the longest one. A child imports its own
module, collects, masks its result (`masked`: the same pass the whole document had, run
where the result is, so it too runs side by side) and hands it back pickled through a pipe;
a collector's seconds count all three. One that hangs (a wedged nvidia-smi, a stuck NFS
mount) is recorded as timed out and killed, one whose process dies (a driver library that
crashes it) as that, and the others are still reported. On a host of fewer than 4 cores, in
a process that already runs other threads (forking it could deadlock the child), or under a
python without fork, the collectors run in daemon threads instead, one after another in one
thread while each finishes within STALL (collect_in_threads), a hung one abandoned.

What the agent imports before the collectors start is only what every capture needs (json,
threading, the detector): the rest is imported where it is used (pickle where collectors
are forked, subprocess where a command runs, hashlib where a stream is hashed), as each
collector's module is imported by its own run (tests/unit/agent/test_agent_startup.py).
"""
from __future__ import annotations

import binascii
import json
import os
import sys
import threading
import time

from . import exits, redact, util
from .util import escaped_document

# typing.TYPE_CHECKING without typing's import (2 ms of the agent's start-up): mypy takes any
# name TYPE_CHECKING so, and nothing of typing runs here: every annotation is text (PEP 563),
# each module a capture imports takes typing in such a block.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, List, Optional, Tuple

    Collector = Callable[[Dict[str, Any]], Dict[str, Any]]

AGENT_VERSION = "1"
DEFAULT_TIMEOUT = 20.0


# Each section's collector is the `collect` of the module of its name. The module is imported
# by the process that runs it (a child of its own: collect_in_processes), so the six imports
# run side by side too (python_env's importlib.metadata, git's thread pool: ~10 ms each on an
# H200 host), and a collector's seconds include its import. Written out, not imported by
# name: Ansible ships with a module only the agent files it sees imported (ansible/build.py).
def system_collector() -> Collector:
    from . import system
    return system.collect


def nvidia_collector() -> Collector:
    from . import nvidia
    return nvidia.collect


def cuda_nccl_collector() -> Collector:
    from . import cuda_nccl
    return cuda_nccl.collect


def python_env_collector() -> Collector:
    from . import python_env
    return python_env.collect


def env_collector() -> Collector:
    from . import env
    return env.collect


def git_collector() -> Collector:
    from . import git
    return git.collect


COLLECTORS: Dict[str, Callable[[], Collector]] = {   # in the order of SECTIONS
    "system": system_collector, "nvidia": nvidia_collector, "cuda_nccl": cuda_nccl_collector,
    "python_env": python_env_collector, "env": env_collector, "git": git_collector}


def masked(value: Any) -> Any:
    """The last passes on what leaves this host: every string escaped (util.escaped: a byte
    that is not UTF-8 reads the same on every path), then masked, whatever channel carried it
    (an error message, a benchmark's command line and output, a variable's name)."""
    return redact.redact_document(escaped_document(value))


def run_one(name: str, config: Dict[str, Any], results: Dict[str, Any]) -> None:
    """One collector's result, masked where it ran (its seconds count its import and that)."""
    started = time.monotonic()
    try:
        data = COLLECTORS[name]()(config)
        result = {"facts": data.get("facts", {}), "volatile": data.get("volatile", {}),
                  "error": None}
    except Exception as exc:  # one failing collector must never lose the others
        result = {"facts": {}, "volatile": {}, "error": "%s: %s" % (type(exc).__name__, exc)}
    result = masked(result)
    result["seconds"] = round(time.monotonic() - started, 4)
    results[name] = result


def failed(error: str, seconds: float) -> Dict[str, Any]:
    result: Dict[str, Any] = masked({"facts": {}, "volatile": {}, "error": error})
    result["seconds"] = round(seconds, 4)
    return result


def collect_all(config: Dict[str, Any]) -> Dict[str, Any]:
    names: List[str] = config.get("collectors") or list(COLLECTORS)
    timeout = float(config.get("timeout", DEFAULT_TIMEOUT))
    collect = collect_in_processes if can_fork() else collect_in_threads
    results = collect(names, config, time.monotonic() + timeout)
    return {name: results.get(name) or failed("timed out after %gs" % timeout, timeout)
            for name in names}


MIN_CORES_TO_FORK = 4   # fewer, and the children only take turns on the cores instead


def can_fork() -> bool:
    """Fork the collectors: with cores enough for them to run side by side (on 2 cores each
    child's own start costs more than the lock did: 0.3 s against 0.2 s), and no other
    thread in this process (forking one could deadlock the child)."""
    return hasattr(os, "fork") and util.lone_thread() and usable_cores() >= MIN_CORES_TO_FORK


def usable_cores() -> int:
    affinity = getattr(os, "sched_getaffinity", None)   # Linux: the cores this may run on
    return len(affinity(0)) if affinity else (os.cpu_count() or 1)


STALL = 0.05   # seconds a collector runs alone before the next ones go on beside it


def collect_in_threads(names: List[str], config: Dict[str, Any],
                       deadline: float) -> Dict[str, Any]:
    """{name: result} of those done by the deadline, run in turn by one thread: they would
    take turns on the interpreter lock anyway, and side by side each of their file reads
    handed the lock to another thread and back (a plain 2-core host: 21 ms of collecting
    in threads, 14 in turn). A collector still running after STALL seconds (a command that
    waits, or hangs) is left to finish beside the rest: another thread takes the next ones,
    so one that hangs costs the others STALL, not the deadline."""
    results: Dict[str, Any] = {}
    waiting = list(dict.fromkeys(names))   # each once, as their results are keyed
    count = len(waiting)
    progress = threading.Condition()

    def take_turns() -> None:
        while True:
            with progress:
                if not waiting:
                    return
                name = waiting.pop(0)
            run_one(name, config, results)
            if len(results) == count:   # the last one: each other wake-up is a lock handoff
                with progress:
                    progress.notify()

    with progress:
        threading.Thread(target=take_turns, daemon=True).start()
        while len(results) < count:
            seen, left = len(results), deadline - time.monotonic()
            if left <= 0:
                break
            progress.wait(min(STALL, left))
            if waiting and len(results) == seen:   # stalled: the next ones go on beside it
                threading.Thread(target=take_turns, daemon=True).start()
    return dict(results)   # a copy: an abandoned thread may still write its own


def collect_in_processes(names: List[str], config: Dict[str, Any],
                         deadline: float) -> Dict[str, Any]:
    """Each collector forked; {name: result} of those whose child answered by the deadline."""
    import pickle  # on use, as signal: only the forked collectors' results need them
    import signal

    children: Dict[int, Tuple[str, int]] = {}   # read end -> (name, pid)
    for name in names:
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:   # the child: never returns
            os.close(read_end)
            run_in_child(name, config, write_end)
        os.close(write_end)
        children[read_end] = (name, pid)
    started = time.monotonic()
    received = util.read_until(list(children), deadline)
    results: Dict[str, Any] = {}
    for read_end, (name, pid) in children.items():
        os.close(read_end)
        if read_end not in received:
            os.kill(pid, signal.SIGKILL)   # hung past the deadline: collect_all says so
        status = os.waitpid(pid, 0)[1]
        if received.get(read_end):
            results[name] = pickle.loads(received[read_end])
        elif read_end in received:   # it died without a word: a library crashed its loader
            results[name] = failed(ended_text(status), time.monotonic() - started)
    return results


def ended_text(status: int) -> str:
    code = util.exit_code(status)
    if code < 0:
        return "the collector's process was killed by signal %d" % -code
    return "the collector's process exited %d without a result" % code


def run_in_child(name: str, config: Dict[str, Any], write_end: int) -> None:
    """Run one collector and write its result to `write_end`; never returns (os._exit: the
    parent's buffers, atexit handlers and finally blocks are not the child's to run)."""
    try:
        import pickle

        results: Dict[str, Any] = {}
        run_one(name, config, results)
        try:
            data = pickle.dumps(results[name])
        except Exception as exc:   # a fact of a type pickle refuses: said, not lost silently
            data = pickle.dumps(failed("%s: %s" % (type(exc).__name__, exc),
                                       results[name]["seconds"]))
        with os.fdopen(write_end, "wb") as out:
            out.write(data)
    finally:
        os._exit(exits.OK)


def decode_config(argv: List[str]) -> Dict[str, Any]:
    if not argv:
        return {}
    # binascii: base64.b64decode's own decoder, without the base64 module's import
    config: Dict[str, Any] = json.loads(binascii.a2b_base64(argv[0]).decode("utf-8"))
    return config


def main(argv: List[str], started: Optional[Tuple[float, float]] = None) -> int:
    """`started`: (monotonic, process_time) when __main__ began, before any import."""
    sys.stdout.write(agent_output(decode_config(argv), started))
    sys.stdout.flush()
    # Abandoned collector threads may still be blocked; leave without waiting for them.
    os._exit(exits.OK)


def agent_output(config: Dict[str, Any], started: Optional[Tuple[float, float]] = None) -> str:
    """What the agent reports, as JSON text, every string masked: printed by main, and
    returned as it is by the Ansible collection's modules (envsnap/ansible/), so the
    controller reads the same text whichever way it came."""
    redact.emit_digests()   # the controller rekeys them under the user's masking key
    agent: Dict[str, Any] = {"version": AGENT_VERSION, "python": sys.executable,
                             "python_version": "%d.%d.%d" % sys.version_info[:3],
                             "pid": os.getpid()}
    if started is not None:   # run as the agent, not from within Ansible's module
        wall_at_start, cpu_before_start = started
        agent["startup_seconds"] = round(cpu_before_start + time.monotonic() - wall_at_start, 4)
    document: Dict[str, Any] = {"agent": agent}
    if config.get("mode") == "bench":
        # on use: its serving and sampling (urllib.request, http, email) cost every capture's
        # start-up on the host ~10 ms of imports it never needs (idle 2-core machine)
        from . import benchrun

        document["bench"] = benchrun.run_bench(config)
    elif config.get("mode") == "timeline":
        from . import timeline  # on use, as benchrun: its log readers (gzip) cost a capture

        document["timeline"] = timeline.collect(config)
    else:
        document["collectors"] = collect_all(config)
    masking = time.monotonic()
    collected = document.pop("collectors", None)   # masked already, each where it ran
    output: Dict[str, Any] = masked(document)
    if collected is not None:
        output["collectors"] = collected
    output["agent"]["masking_seconds"] = round(time.monotonic() - masking, 4)
    return json.dumps(output, sort_keys=True, default=lambda odd: redact.redact_text(str(odd)))
