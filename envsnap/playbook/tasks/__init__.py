"""Task modules for playbooks, one module per file; playbook/modules.py names them. See
base.py for what a module is.

Restore (envsnap/restore/run.py) uses them only through playbooks/restore.yml, like any
playbook. Bisect (envsnap/bisect/tree.py) calls the git helpers in gitcmd.py and gitpatch.py
directly, without the playbook engine.
"""
