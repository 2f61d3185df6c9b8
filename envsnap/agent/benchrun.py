"""Benchmark mode of the agent: run one command N times, sampling the GPUs while it runs.

Idle GPU readings lie (docs/STORY.md: clocks and throttle reasons only matter under load), so a
daemon thread reads NVML every `sample_interval` seconds during each run. The command runs
in a process group of its own: a run past its timeout is killed with everything it started,
and what a run leaves behind is killed too, so it never overlaps the next run.

Each run, and everything it starts, carries a mark of its own in its environment
(reaper.py): what a run leaves behind outside its group (a child that called setsid) is
stopped with it, and marked processes of an agent that is gone are stopped before the runs.

A benchmark must not outlive the person who started it: with "lifeline", the controller
holds the agent's stdin open while it waits, and end of file there (Ctrl-C, a killed
controller, a dropped SSH connection) kills the run in progress and starts no other. Such a
controller follows the runs too: a PROGRESS_PREFIX line on stderr after each.

Config: {"mode": "bench", "cmd": str, "repeat": int, "cwd": str|None,
         "sample_interval": float (0 or None: no sampling), "timeout": per-run seconds,
         "metric": regex|None (stop early when a run prints no match, or one that is not a
                   finite number), "max_samples": int,
         "lifeline": bool (stdin is held open by the controller),
         "env": [[name, value|null]] (set / unset for the benchmark command),
         "serve": {"cmd", "ready", "timeout", "env"} | None (a server started before the
                  runs and stopped after them: benchserve.py)}
"""
from __future__ import annotations

import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List, Optional

from . import benchsample, benchserve, reaper
from .patterns import PatternRefused, PatternTimeout, checked, last_match
from .util import escaped

PROGRESS_PREFIX = "envsnap-progress: "
TAIL_BYTES = 64 * 1024   # the metric is printed near the end; whole logs can be huge
DEFAULT_REPEAT = 5
DEFAULT_RUN_TIMEOUT = 1800.0
READ_CHUNK = 1 << 16


class Tail:
    """The last TAIL_BYTES of a stream, read in a thread so a chatty command never blocks."""

    def __init__(self, stream: Any) -> None:
        self.data = bytearray()
        self.total = 0
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream: Any) -> None:
        for chunk in iter(lambda: stream.read1(READ_CHUNK), b""):
            self.total += len(chunk)
            self.data += chunk
            if len(self.data) > 2 * TAIL_BYTES:  # trim now and then, not on every chunk
                del self.data[:-TAIL_BYTES]

    def text(self) -> str:
        # A leftover child holding the pipe open must not hang the agent.
        self.thread.join(5.0)
        return escaped(bytes(self.data[-TAIL_BYTES:]))


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # the group is already gone


class Lifeline:
    """Watches stdin in a daemon thread; its end means the controller is gone."""

    def __init__(self, stream: Optional[Any]) -> None:
        self.lost = threading.Event()
        self.group: Optional[int] = None   # the run in progress
        if stream is not None:
            threading.Thread(target=self._watch, args=(stream,), daemon=True).start()

    def _watch(self, stream: Any) -> None:
        while stream.read(READ_CHUNK):
            pass  # the controller sends nothing; anything it might is ignored
        self.lost.set()
        if self.group is not None:
            kill_group(self.group)


def wait_run(proc: subprocess.Popen[bytes], timeout: float) -> Dict[str, Any]:
    try:
        return {"exit_code": proc.wait(timeout), "timed_out": False}
    except subprocess.TimeoutExpired:
        kill_group(proc.pid)
        return {"exit_code": proc.wait(), "timed_out": True}


def run_once(cmd: str, cwd: str, timeout: float, sampler: benchsample.Sampler,
             lifeline: Lifeline, env: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    """One run: exit code, wall seconds, output tail, telemetry."""
    started_at = time.time()
    sampler.start()
    started = time.perf_counter()
    owner = reaper.own_mark("run")
    try:
        proc = subprocess.Popen(["sh", "-c", cmd], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=cwd,
                                start_new_session=True,
                                env=reaper.marked(dict(os.environ) if env is None else env,
                                                  owner))
    except OSError:
        reaper.stop_marked(owner)   # nothing started: its record goes
        raise
    lifeline.group = proc.pid
    if lifeline.lost.is_set():  # lost between the check before this run and now
        kill_group(proc.pid)
    try:
        tail = Tail(proc.stdout)
        result = wait_run(proc, timeout)
    finally:
        # Leftovers of this run (a server it forked) must not skew the next; and a Ctrl-C on
        # a local controller, which reaches this agent but not the run's own session, must
        # not leave the benchmark running.
        kill_group(proc.pid)
        reaper.stop_marked(owner)   # and what left the group (setsid) but kept the mark
        lifeline.group = None
    seconds = time.perf_counter() - started
    telemetry = sampler.stop()
    result.update(seconds=round(seconds, 4), started_at=round(started_at, 3),
                  output_tail=tail.text(), output_bytes=tail.total)
    result.update(telemetry)
    return result


def progress_line(run: Dict[str, Any], total: int, metric: Optional[Any]) -> str:
    """"run 2 of 5: 61.3 s, exit 0, metric 91.7": what the controller shows as runs end."""
    outcome = "timed out" if run["timed_out"] else "exit %s" % run["exit_code"]
    line = "run %d of %d: %.1f s, %s" % (run["run"], total, run["seconds"], outcome)
    try:
        found = metric_text(run["output_tail"], metric) if metric is not None else None
    except PatternTimeout:   # stop_reason says so, and stops the runs
        found = None
    if found is not None:
        line += ", metric %s" % found
    return line


def metric_text(text: str, metric: Any) -> Optional[str]:
    """What the metric regex picks in a run's output: the last match (a final summary line
    follows the warm-up lines), its first group, or the whole match for a regex without
    groups. None when nothing matches; PatternTimeout when the regex backtracks past the
    time budget (patterns.py). The controller reads values the same way (bench/stats.py
    parse_metric calls this)."""
    return last_match(metric, text)


def metric_number(raw: str) -> float:
    """The picked text as a number, or ValueError saying what was matched. nan and inf are
    refused too: one of them makes every median, spread and verdict after it meaningless."""
    try:
        value = float(raw)
    except ValueError:
        raise ValueError("the metric regex matched %r, not a number" % raw) from None
    if not math.isfinite(value):
        raise ValueError("the metric regex matched %r, not a finite number" % raw)
    return value


def stop_reason(run: Dict[str, Any], number: int, metric: Optional[Any]) -> Optional[str]:
    """Why the runs after this one would be wasted, or None to go on."""
    if run["timed_out"]:
        return "run %d timed out" % number
    if run["exit_code"] != 0:
        return "run %d exited %s" % (number, run["exit_code"])
    if metric is None:
        return None
    try:
        found = metric_text(run["output_tail"], metric)
    except PatternTimeout as exc:
        return "run %d: the metric regex %s on its output" % (number, exc)
    if found is None:
        return "run %d printed no metric" % number
    try:  # a metric that is not a number now will not be one in the next runs either
        metric_number(found)
    except ValueError as exc:
        return "run %d: %s" % (number, exc)
    return None


def compile_metric(config: Dict[str, Any]) -> Optional[Any]:
    """The metric regex; PatternRefused for one that could backtrack catastrophically (the
    controller refuses it first; this host refuses it too, whoever sent it)."""
    try:
        return checked(config["metric"]) if config.get("metric") else None
    except (re.error, OverflowError, RecursionError):
        return None  # the controller validated it; a host python that disagrees runs all


def resolve_cwd(config: Dict[str, Any]) -> str:
    return os.path.abspath(os.path.expanduser(config.get("cwd") or "~"))


def run_bench(config: Dict[str, Any]) -> Dict[str, Any]:
    cwd = resolve_cwd(config)
    out: Dict[str, Any] = {"cmd": config["cmd"], "cwd": cwd, "runs": [], "stopped": None,
                           "error": None}
    try:
        compile_metric(config)
    except PatternRefused as exc:
        out["error"] = "the metric regex %r is refused: %s" % (config["metric"], exc)
        return out
    if not os.path.isdir(cwd):
        out["error"] = "working directory %s does not exist on the host" % cwd
        return out
    sampler = benchsample.Sampler.open(config.get("sample_interval", benchsample.DEFAULT_INTERVAL),
                                       int(config.get("max_samples",
                                                      benchsample.DEFAULT_MAX_SAMPLES)))
    lifeline = Lifeline(sys.stdin.buffer if config.get("lifeline") else None)
    reaper.reap_orphans()   # left by an agent killed with -9: neither lingers nor skews runs
    server = benchserve.Server(config["serve"], cwd) if config.get("serve") else None
    try:
        out["telemetry"] = sampler.info
        if server is not None:
            out["server"] = serve(server, lifeline)
        run_all(config, cwd, sampler, lifeline, out)
        if server is not None:
            server.check_alive("during the runs")
    except benchserve.ServeError as exc:
        out["error"] = str(exc)
    except OSError as exc:  # sh cannot start (no permission on cwd, out of processes)
        out["error"] = "cannot start the benchmark in %s: %s" % (cwd, exc.strerror or exc)
    finally:
        if server is not None:   # whatever happened: nothing it started is left running
            stopped = server.stop()
            if out.get("server"):
                out["server"]["stopped"] = stopped
        sampler.close()
    return out


def serve(server: benchserve.Server, lifeline: Lifeline) -> Dict[str, Any]:
    """Start the server and wait until it is ready: its record (benchserve.record)."""
    problem = benchserve.check_ready(server.ready)
    if problem is not None:
        raise benchserve.ServeError(problem)
    try:
        server.start()
    except OSError as exc:
        raise benchserve.ServeError("cannot start the server in %s: %s"
                                    % (server.cwd, exc.strerror or exc)) from None
    return benchserve.record(server, server.wait_ready(lifeline.lost))


def run_all(config: Dict[str, Any], cwd: str, sampler: benchsample.Sampler,
            lifeline: Lifeline, out: Dict[str, Any]) -> None:
    metric = compile_metric(config)
    timeout = float(config.get("timeout") or DEFAULT_RUN_TIMEOUT)
    runs: List[Dict[str, Any]] = out["runs"]
    total = int(config.get("repeat", DEFAULT_REPEAT))
    env = benchserve.changed_env(dict(os.environ), config["env"]) if config.get("env") else None
    for number in range(1, total + 1):
        if lifeline.lost.is_set():
            out["stopped"] = "the controller went away before run %d" % number
            return
        run = run_once(config["cmd"], cwd, timeout, sampler, lifeline, env)
        run["run"] = number
        runs.append(run)
        if config.get("lifeline"):  # a controller follows: tell it as each run ends
            sys.stderr.write(PROGRESS_PREFIX + progress_line(run, total, metric) + "\n")
            sys.stderr.flush()
        out["stopped"] = stop_reason(run, number, metric)
        if out["stopped"]:
            return
