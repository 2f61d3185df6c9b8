"""Assemble the Ansible collection envsnap.gpu from its source and the agent.

    envsnap ansible DEST     # writes DEST/ansible_collections/envsnap/gpu/

The agent is not kept twice in the repository: the collection's source (collection/) holds
the modules, action plugins and docs, and this step copies envsnap/agent/ in as the module_utils
package `envsnap_agent`. Ansible's AnsiballZ then ships, with each module, exactly the agent
files it imports (it follows the agent's relative imports), and pynvml beside them when this
envsnap has it, as the SSH payload does (hosts/payload.py).

Why a module, not the SSH payload run through Ansible's connection: a module is what
Ansible knows how to run anywhere it reaches (become, a bastion, a container connection,
pipelining, its own temp folders and their permissions); a hand-made upload to ~/.cache
would have to redo all of that and would break under `become`.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from envsnap import __version__
from envsnap.errors import UsageError
from envsnap.hosts.payload import AGENT_DIR, vendored_pynvml

SOURCE = Path(__file__).parent / "collection"
NAMESPACE, NAME = "envsnap", "gpu"
AGENT_PACKAGE = "envsnap_agent"   # plugins/module_utils/envsnap_agent/
PYNVML = "envsnap_pynvml.py"       # plugins/module_utils/envsnap_pynvml.py
BUILT_MARK = ".envsnap-build"      # a folder holding it may be replaced by the next build


def collection_dir(dest: Path) -> Path:
    return dest / "ansible_collections" / NAMESPACE / NAME


def build(dest: Path) -> Path:
    """Write the collection under `dest` (replacing an earlier build there) and return its
    folder; ANSIBLE_COLLECTIONS_PATH=dest makes it usable as it is."""
    target = collection_dir(dest)
    if target.exists():
        if not (target / BUILT_MARK).is_file():   # never delete what envsnap did not write
            raise UsageError(f"{target} exists and is no collection envsnap built: "
                             "move it away or pick another DEST")
        shutil.rmtree(target)
    shutil.copytree(SOURCE, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (target / BUILT_MARK).write_text("written by `envsnap ansible`; "
                                     "replaced by the next build\n")
    galaxy = target / "galaxy.yml"
    galaxy.write_text(galaxy.read_text().replace("@VERSION@", __version__))
    agent = target / "plugins" / "module_utils" / AGENT_PACKAGE
    agent.mkdir()
    for source in sorted(AGENT_DIR.glob("*.py")):
        if source.name != "__main__.py":   # the SSH payload's entry point, no module's
            shutil.copy(source, agent / source.name)
    pynvml = vendored_pynvml()
    if pynvml is not None:
        (target / "plugins" / "module_utils" / PYNVML).write_bytes(pynvml)
    return target
