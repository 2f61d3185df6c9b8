# envsnap.gpu.envsnap_capture on the controller: check the options, run the agent on the
# host through the module, then store the snapshot as `envsnap capture` stores it.
from __future__ import annotations

from typing import Any

from ansible_collections.envsnap.gpu.plugins.plugin_utils.envsnap_action import EnvsnapAction


class ActionModule(EnvsnapAction):
    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        super().run(tmp, task_vars)
        controller = self.controller()
        if controller is None:
            return self.missing_envsnap()
        from envsnap.errors import EnvsnapError

        host = self.host_seen(controller, task_vars)
        try:
            request = controller.capture_request(
                dict(self._task.args), host, list(task_vars.get("ansible_play_hosts_all") or []),
                self.environ())
        except EnvsnapError as exc:
            return self.failed(str(exc))
        captured_at = controller.capture_time()
        result = self.run_agent("envsnap.gpu.envsnap_capture", request.agent, task_vars)
        if result.get("failed") or "agent_output" not in result:
            return result
        if self._task.check_mode:   # captured, but nothing is written in check mode
            return {"changed": True, "label": request.label}
        try:
            saved = controller.save_capture(request, str(result["agent_output"]), host,
                                            captured_at)
        except EnvsnapError as exc:
            return self.failed(str(exc))
        return {"changed": True, "label": saved.label, "path": str(saved.path),
                "problems": saved.problems,
                "ansible_facts": {"envsnap_snapshot": saved.document}}
