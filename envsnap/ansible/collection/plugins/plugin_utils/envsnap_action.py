# What both action plugins of envsnap.gpu share: envsnap's controller code, the host as
# Ansible knows it, and the agent run through the module on the host.
from __future__ import annotations

import os
from typing import Any

from ansible.plugins.action import ActionBase

NOT_FOUND = 127   # the shell's exit code for a command it cannot find
MISSING_ENVSNAP = ("envsnap is not importable by the Python that runs Ansible ({python}): "
                   "install envsnap there (pip install envsnap)")


class EnvsnapAction(ActionBase):
    """Each plugin's `act` runs with envsnap's controller code and the host; an EnvsnapError
    it raises (a bad option, a label taken, agent output refused) fails the host in one line."""

    TRANSFERS_FILES = False

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        super().run(tmp, task_vars)
        controller = self.controller()
        if controller is None:
            return self.missing_envsnap()
        from envsnap.errors import EnvsnapError

        try:
            return self.act(controller, self.host_seen(controller, task_vars), task_vars)
        except EnvsnapError as exc:
            return self.failed(str(exc))

    def act(self, controller: Any, host: Any, task_vars: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def controller(self) -> Any:
        """envsnap.ansible.controller, or None when envsnap is not installed here."""
        try:
            from envsnap.ansible import controller
        except ImportError:
            return None
        return controller

    def host_seen(self, controller: Any, task_vars: dict[str, Any]) -> Any:
        name = str(task_vars.get("inventory_hostname"))
        interpreter = task_vars.get("ansible_python_interpreter")
        return controller.HostSeen(
            name=name, address=str(task_vars.get("ansible_host") or name),
            interpreter=str(interpreter) if interpreter else None)

    def run_agent(self, module: str, agent: Any, task_vars: dict[str, Any]) -> dict[str, Any]:
        """The module on the host, under the python asked for (the ML environment's, whose
        packages the agent records) or Ansible's own."""
        module_vars = dict(task_vars)
        if agent.python:
            module_vars["ansible_python_interpreter"] = agent.python
        result: dict[str, Any] = self._execute_module(
            module_name=module, module_args={"agent_config": agent.config},
            task_vars=module_vars)
        if result.get("failed") and result.get("rc") == NOT_FOUND:
            python = module_vars.get("ansible_python_interpreter") or "python3"
            return self.failed(f"python not found on the host ({python!r}): set the python "
                               "option or ansible_python_interpreter", rc=NOT_FOUND)
        return result

    def failed(self, message: str, **more: Any) -> dict[str, Any]:
        return {"failed": True, "msg": message, **more}

    def missing_envsnap(self) -> dict[str, Any]:
        import sys

        return self.failed(MISSING_ENVSNAP.format(python=sys.executable))

    def environ(self) -> dict[str, str]:
        return dict(os.environ)
