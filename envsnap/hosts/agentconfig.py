"""What a capture asks the agent: the options of a capture, and the agent's config built from
them for one host. Kept apart from hosts/capture.py, and light to import, so that
`envsnap capture local` can start the agent from them before it loads the rest
(hosts/headstart.py)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from envsnap.defaults import DEFAULT_COLLECTOR_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, DEFAULT_FORKS

if TYPE_CHECKING:
    from envsnap.hosts.inventory import Host
    from envsnap.hosts.payload import CollectConfig, ControllerIdentity


class CaptureOptions(NamedTuple):
    """A NamedTuple, not a dataclass: `capture local` forks its agent right after building
    these, and dataclasses (with inspect, ast, dis) would load first (~5 ms)."""

    label: str | None = None
    force: bool = False
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    collector_timeout: float = DEFAULT_COLLECTOR_TIMEOUT
    accept_new_host_keys: bool = False
    forks: int = DEFAULT_FORKS
    max_patch_bytes: int | None = None
    history: int | None = None          # most commits of git history recorded per repo


def agent_config(host: Host, options: CaptureOptions) -> CollectConfig:
    repos = host.list_var("repos")
    if host.is_local:  # `--repo sglang` means here, not the agent's working directory ($HOME)
        repos = [os.path.abspath(os.path.expanduser(repo)) for repo in repos]
    config: CollectConfig = {"repos": repos, "procs": host.list_var("procs"),
                             "timeout": options.collector_timeout}
    config["controller"] = controller_identity()
    if options.max_patch_bytes is not None:
        config["max_patch_bytes"] = options.max_patch_bytes
    if options.history is not None:
        config["history_budget"] = options.history
    return config


def controller_identity() -> ControllerIdentity:
    """This process as an agent on this machine would know it (agent/env.py, gitlock.py);
    boot id and pid namespace "" where /proc does not tell them."""
    try:
        boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        boot_id = namespace = ""
    # uname's node name is socket.gethostname() (the same uname call), without socket's import
    return {"pid": os.getpid(), "hostname": os.uname().nodename, "boot_id": boot_id,
            "pid_namespace": namespace}
