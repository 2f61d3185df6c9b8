"""Run every collector with its own timeout and print one JSON document.

The document says what the agent itself cost on the host, beside each collector's seconds:
`agent.startup_seconds` (the interpreter's start and the agent's imports, __main__.py) and
`agent.masking_seconds` (the last pass, every string masked).

Each collector runs in a daemon thread: one that hangs (a wedged nvidia-smi, a stuck NFS
mount) is recorded as timed out and abandoned, and the others are still reported.
"""
from __future__ import annotations

import base64
import json
import os
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import cuda_nccl, env, exits, git, nvidia, python_env, redact, system
from .sections import SECTIONS
from .util import escaped_document

AGENT_VERSION = "1"
DEFAULT_TIMEOUT = 20.0

# Each section's collector is the module of its name, in the order of SECTIONS. They are
# imported as written, not by name at run time: Ansible ships with a module only the agent
# files it sees imported (ansible/build.py).
MODULES = {module.__name__.rpartition(".")[2]: module
           for module in (cuda_nccl, env, git, nvidia, python_env, system)}
COLLECTORS: Dict[str, Callable[[Dict[str, Any]], Dict[str, Any]]] = {
    name: MODULES[name].collect for name in SECTIONS}


def run_one(name: str, config: Dict[str, Any], results: Dict[str, Any]) -> None:
    started = time.monotonic()
    try:
        data = COLLECTORS[name](config)
        results[name] = {"facts": data.get("facts", {}), "volatile": data.get("volatile", {}),
                         "error": None}
    except Exception as exc:  # one failing collector must never lose the others
        results[name] = {"facts": {}, "volatile": {}, "error": "%s: %s" % (type(exc).__name__, exc)}
    results[name]["seconds"] = round(time.monotonic() - started, 4)


def collect_all(config: Dict[str, Any]) -> Dict[str, Any]:
    names: List[str] = config.get("collectors") or list(COLLECTORS)
    timeout = float(config.get("timeout", DEFAULT_TIMEOUT))
    results: Dict[str, Any] = {}
    threads = {}
    for name in names:
        thread = threading.Thread(target=run_one, args=(name, config, results), daemon=True)
        thread.start()
        threads[name] = thread
    deadline = time.monotonic() + timeout
    for name, thread in threads.items():
        thread.join(max(0.0, deadline - time.monotonic()))
        if name not in results:
            results[name] = {"facts": {}, "volatile": {}, "seconds": timeout,
                             "error": "timed out after %gs" % timeout}
    return {name: results[name] for name in names}


def decode_config(argv: List[str]) -> Dict[str, Any]:
    if not argv:
        return {}
    config: Dict[str, Any] = json.loads(base64.b64decode(argv[0]).decode("utf-8"))
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
        from . import timeline  # on use, as benchrun: its log readers are no capture's

        document["timeline"] = timeline.collect(config)
    else:
        document["collectors"] = collect_all(config)
    # The last passes: every string leaves this host escaped (util.escaped: a byte that is
    # not UTF-8 reads the same on every path) and masked, whatever channel carried it (an
    # error message, a benchmark's command line and output, a variable's name).
    masking = time.monotonic()
    masked: Dict[str, Any] = redact.redact_document(escaped_document(document))
    masked["agent"]["masking_seconds"] = round(time.monotonic() - masking, 4)
    return json.dumps(masked, sort_keys=True, default=lambda odd: redact.redact_text(str(odd)))
