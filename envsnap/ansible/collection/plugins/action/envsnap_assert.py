# envsnap.gpu.envsnap_assert on the controller: capture the host now through the module
# (nothing stored), then judge the gates with envsnap's own code (diff for the baseline).
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
        request = controller.assert_request(dict(self._task.args), host, self.environ())
        captured_at = controller.capture_time()
        result = self.run_agent("envsnap.gpu.envsnap_assert", request.agent, task_vars)
        if result.get("failed") or "agent_output" not in result:
            return result
        document = controller.document_from(str(result["agent_output"]), host, "assert",
                                            captured_at, request.agent)
        failures = controller.gate_failures(request, document)
        if failures:
            return self.failed(controller.failed_message(host.name, failures),
                               failures=[failure.line for failure in failures],
                               drifted=[fact for failure in failures for fact in failure.facts])
        return {"changed": False, "failures": [], "msg": f"{host.name}: every gate passed"}
