"""Run every collector with its own timeout and print one JSON document.

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
from typing import Any, Callable, Dict, List

from . import benchrun, cuda_nccl, env, exits, git, nvidia, python_env, redact, system, timeline
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


def main(argv: List[str]) -> int:
    sys.stdout.write(agent_output(decode_config(argv)))
    sys.stdout.flush()
    # Abandoned collector threads may still be blocked; leave without waiting for them.
    os._exit(exits.OK)


def agent_output(config: Dict[str, Any]) -> str:
    """What the agent reports, as JSON text, every string masked: printed by main, and
    returned as it is by the Ansible collection's modules (envsnap/ansible/), so the
    controller reads the same text whichever way it came."""
    redact.emit_digests()   # the controller rekeys them under the user's masking key
    document: Dict[str, Any] = {
        "agent": {"version": AGENT_VERSION, "python": sys.executable,
                  "python_version": "%d.%d.%d" % sys.version_info[:3], "pid": os.getpid()},
    }
    if config.get("mode") == "bench":
        document["bench"] = benchrun.run_bench(config)
    elif config.get("mode") == "timeline":
        document["timeline"] = timeline.collect(config)
    else:
        document["collectors"] = collect_all(config)
    # The last passes: every string leaves this host escaped (util.escaped: a byte that is
    # not UTF-8 reads the same on every path) and masked, whatever channel carried it (an
    # error message, a benchmark's command line and output, a variable's name).
    return json.dumps(redact.redact_document(escaped_document(document)), sort_keys=True,
                      default=lambda odd: redact.redact_text(str(odd)))
