# The host's half of envsnap.gpu's modules: run envsnap's agent in this process and return
# its JSON text as it is; the controller's action plugin turns it into a snapshot.
from __future__ import annotations

import sys

from ansible.module_utils.basic import AnsibleModule


def run_agent_module() -> None:
    # The action plugin checked the task's options and built the agent's config.
    module = AnsibleModule(argument_spec={"agent_config": {"type": "dict", "required": True}},
                           supports_check_mode=True)
    try:  # pynvml travels beside the agent when the collection was built with it
        from ansible_collections.envsnap.gpu.plugins.module_utils import envsnap_pynvml
        sys.modules.setdefault("pynvml", envsnap_pynvml)
    except ImportError:
        pass   # the agent then reads the GPUs through nvidia-smi, as without pynvml
    from ansible_collections.envsnap.gpu.plugins.module_utils.envsnap_agent import runner

    module.exit_json(changed=False, agent_output=runner.agent_output(module.params["agent_config"]))
