"""Ansible-style playbooks: load, check names, template, run tasks/ across hosts."""
