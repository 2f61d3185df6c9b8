# envsnap.gpu.envsnap_capture on the controller: check the options, run the agent on the
# host through the module, then store the snapshot as `envsnap capture` stores it.
from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

from ansible_collections.envsnap.gpu.plugins.plugin_utils.envsnap_action import (
    EnvsnapAction,
    Result,
    TaskVars,
)

if TYPE_CHECKING:
    from envsnap.ansible.controller import HostSeen


class ActionModule(EnvsnapAction):
    def act(self, controller: ModuleType, host: HostSeen, task_vars: TaskVars) -> Result:
        request = controller.capture_request(dict(self._task.args), host,
                                             self.play_hosts(task_vars), self.environ())
        captured_at = controller.capture_time()
        result = self.run_agent("envsnap.gpu.envsnap_capture", request.agent, task_vars)
        if result.get("failed") or "agent_output" not in result:
            return result
        if self._task.check_mode:   # captured, but nothing is written in check mode
            return {"changed": True, "label": request.label}
        saved = controller.save_capture(request, str(result["agent_output"]), host, captured_at)
        return {"changed": True, "label": saved.label, "path": str(saved.path),
                "problems": saved.problems,
                "ansible_facts": {"envsnap_snapshot": saved.document}}
