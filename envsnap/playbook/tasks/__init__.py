"""Task modules for playbooks, one module per file; playbook/modules.py names them. See
base.py for what a module is.

A task is a thin adapter over envsnap.hostops, which does the work on the host: it reads
its arguments, honours check and diff mode, and says what it did. Restore
(envsnap/restore/run.py) uses them only through playbooks/restore.yml, like any playbook;
bisect and explain call hostops directly, without the playbook engine.
"""
