# What both action plugins of envsnap.gpu share: envsnap's controller code, the host as
# Ansible knows it, and the agent run through the module on the host.
#
# Ansible's values carry no types: what envsnap reads of them is typed here. The task's vars
# are Ansible's (names to any value; envsnap reads inventory_hostname, ansible_host,
# ansible_python_interpreter and ansible_play_hosts_all, each turned into text or a list
# where it is read); a result is what Ansible takes back from a module or a plugin (failed,
# msg, rc, changed, and each module's own keys), read here only for failed, rc and
# agent_output.
from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from types import ModuleType
from typing import TYPE_CHECKING

from ansible.plugins.action import ActionBase

if TYPE_CHECKING:
    from envsnap.ansible.controller import AgentRun, HostSeen

NOT_FOUND = 127   # the shell's exit code for a command it cannot find
MISSING_ENVSNAP = ("envsnap is not importable by the Python that runs Ansible ({python}): "
                   "install envsnap there (pip install envsnap)")
TaskVars = Mapping[str, object]
Result = dict[str, object]


class EnvsnapAction(ActionBase):
    """Each plugin's `act` runs with envsnap's controller code and the host; an EnvsnapError
    it raises (a bad option, a label taken, agent output refused) fails the host in one line,
    and so does any other error (a host's output envsnap did not foresee): a failed task,
    never a traceback in the play's output."""

    TRANSFERS_FILES = False

    def run(self, tmp: str | None = None, task_vars: TaskVars | None = None) -> Result:
        task_vars = task_vars or {}
        super().run(tmp, task_vars)
        controller = self.controller()
        if controller is None:
            return self.missing_envsnap()
        from envsnap.errors import EnvsnapError

        try:
            return self.act(controller, self.host_seen(controller, task_vars), task_vars)
        except EnvsnapError as exc:
            return self.failed(one_line(str(exc)))
        except Exception as exc:   # envsnap's own fault, said as one: the host still fails alone
            return self.failed(one_line(f"envsnap failed ({type(exc).__name__}: {exc})"))

    def act(self, controller: ModuleType, host: HostSeen, task_vars: TaskVars) -> Result:
        raise NotImplementedError

    def controller(self) -> ModuleType | None:
        """envsnap.ansible.controller, or None when envsnap is not installed here."""
        try:
            from envsnap.ansible import controller
        except ImportError:
            return None
        return controller

    def host_seen(self, controller: ModuleType, task_vars: TaskVars) -> HostSeen:
        name = str(task_vars.get("inventory_hostname"))
        interpreter = task_vars.get("ansible_python_interpreter")
        seen: HostSeen = controller.HostSeen(
            name=name, address=str(task_vars.get("ansible_host") or name),
            interpreter=str(interpreter) if interpreter else None)
        return seen

    def play_hosts(self, task_vars: TaskVars) -> list[str]:
        """The play's hosts, as Ansible lists them (every host of the play, failed or not)."""
        hosts = task_vars.get("ansible_play_hosts_all")
        return [str(host) for host in hosts] if isinstance(hosts, list) else []

    def run_agent(self, module: str, agent: AgentRun, task_vars: TaskVars) -> Result:
        """The module on the host, under the python asked for (the ML environment's, whose
        packages the agent records) or Ansible's own."""
        module_vars = dict(task_vars)
        if agent.python:
            module_vars["ansible_python_interpreter"] = agent.python
        result: Result = self._execute_module(
            module_name=module, module_args={"agent_config": agent.config},
            task_vars=module_vars)
        if result.get("failed") and result.get("rc") == NOT_FOUND:
            python = module_vars.get("ansible_python_interpreter") or "python3"
            return self.failed(f"python not found on the host ({python!r}): set the python "
                               "option or ansible_python_interpreter", rc=NOT_FOUND)
        return result

    def failed(self, message: str, **more: object) -> Result:
        return {"failed": True, "msg": message, **more}

    def missing_envsnap(self) -> Result:
        return self.failed(MISSING_ENVSNAP.format(python=sys.executable))

    def environ(self) -> dict[str, str]:
        return dict(os.environ)


def one_line(message: str) -> str:
    return " ".join(message.split("\n"))
