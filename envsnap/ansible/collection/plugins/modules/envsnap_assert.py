# envsnap.gpu.envsnap_assert: its action plugin (plugins/action/envsnap_assert.py) judges the
# gates on the controller; this part runs envsnap's agent on the host.
from __future__ import annotations

DOCUMENTATION = r"""
module: envsnap_assert
short_description: Fail a host that is not fit to benchmark
description:
  - Captures the host now with envsnap's agent (nothing is stored) and checks the gates
    given; the host fails with one line per failed gate, and one per fact drifted
    from O(baseline).
  - Needs envsnap installed in the Python that runs Ansible on the controller.
options:
  driver:
    description: Required NVIDIA driver version; C(580) accepts any 580.x,
      C(580.159.04) only that one.
    type: str
  nccl:
    description: Required NCCL version (PyTorch's own NCCL when recorded, else every NCCL
      library and wheel found), matched as O(driver) is.
    type: str
  clocks_not_throttled:
    description: Fail when a GPU reports a clock event reason other than idle or a clock
      setting (power cap, thermal or hardware slowdown...), or reports no clocks at all.
    type: bool
    default: false
  baseline:
    description: A known-good snapshot (a label in the controller's store, or a file); the
      host fails on any fact that differs, as C(envsnap diff) finds it, apart from facts
      unique to each machine (hostname, UUIDs, boot id). Repos and processes are captured as
      the baseline recorded them when it is the user's own (signed with their key).
    type: str
  store:
    description: The envsnap store O(baseline) is read from. Default C($ENVSNAP_STORE),
      else C(./snapshots).
    type: str
  repos:
    description: Git repos to record (default, with O(baseline), the baseline's).
    type: list
    elements: str
  procs:
    description: Process regexes whose environment is recorded (default, with
      O(baseline), the baseline's).
    type: list
    elements: str
  hot_paths:
    description: Accepted for symmetry with envsnap_capture.
    type: list
    elements: str
  python:
    description: The interpreter that runs the agent. Default C(ansible_python_interpreter).
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
- name: Gate the benchmark
  envsnap.gpu.envsnap_assert:
    driver: "580.159"
    nccl: "2.28"
    clocks_not_throttled: true
    baseline: known-good/node01
"""

RETURN = r"""
failures:
  description: One line per failed gate (empty when the host passed).
  type: list
  elements: str
  returned: always
drifted:
  description: 'One line per fact that drifted from O(baseline), in the notation of envsnap
    diff, for example "env shell.NCCL_PROTO: LL -> (absent)".'
  type: list
  elements: str
  returned: failed
"""

from ansible_collections.envsnap.gpu.plugins.module_utils.envsnap_module import (  # noqa: E402
    run_agent_module,
)

if __name__ == "__main__":
    run_agent_module()
