# envsnap.gpu.envsnap_capture: its action plugin (plugins/action/envsnap_capture.py) checks
# the options and stores the snapshot on the controller; this part runs on the host.
from __future__ import annotations

DOCUMENTATION = r"""
module: envsnap_capture
short_description: Snapshot a GPU host's environment into the controller's envsnap store
description:
  - Runs envsnap's agent on the host (drivers, GPUs, CUDA and NCCL, Python packages, the
    environment variables that steer GPU jobs, git repos) as a module, so Ansible's forks,
    strategies, become, bastions and vault apply.
  - The controller side writes the snapshot into the envsnap store, signed and masked exactly
    as C(envsnap capture) writes it, under the label C(envsnap capture) would use
    (O(label) for a play of one host, O(label)/<inventory_hostname> for a play of several),
    and returns it as the fact C(envsnap_snapshot).
  - Needs envsnap installed in the Python that runs Ansible on the controller; the host
    needs only Python 3.8 or newer.
options:
  label:
    description: Snapshot label; a play of several hosts stores C(LABEL/<host>).
      Default C(<host>-<date>-<time>).
    type: str
  store:
    description: The envsnap store on the controller. Default C($ENVSNAP_STORE), else
      C(./snapshots).
    type: str
  force:
    description: Replace a snapshot of the same label (default is to fail the host).
    type: bool
    default: false
  repos:
    description: Git repos on the host to record (paths).
    type: list
    elements: str
  procs:
    description: Regexes matched on process command lines; the environment of matching
      processes (inference workers) is recorded.
    type: list
    elements: str
  hot_paths:
    description: Paths whose changes C(envsnap diff) ranks first.
    type: list
    elements: str
  python:
    description: The interpreter that runs the agent (the ML environment's python, whose
      packages are recorded). Default C(ansible_python_interpreter).
    type: str
  collector_timeout:
    description: Seconds each collector may take.
    type: float
  max_patch_bytes:
    description: Largest uncommitted patch recorded per repo.
    type: int
  history:
    description: Most commits of git history recorded per repo.
    type: int
"""

EXAMPLES = r"""
- name: Snapshot the fleet into ./snapshots/run1/<host>
  envsnap.gpu.envsnap_capture:
    label: run1
    repos: [/srv/sglang]
    procs: ["sglang.launch_server"]
"""

RETURN = r"""
label:
  description: The label the snapshot was stored under.
  type: str
  returned: success
path:
  description: The snapshot file on the controller.
  type: str
  returned: success
problems:
  description: Collectors or repos that failed on the host (the snapshot is kept).
  type: list
  elements: str
  returned: success
ansible_facts:
  description: C(envsnap_snapshot), the snapshot document.
  type: dict
  returned: success
"""

from ansible_collections.envsnap.gpu.plugins.module_utils.envsnap_module import (  # noqa: E402
    run_agent_module,
)

if __name__ == "__main__":
    run_agent_module()
