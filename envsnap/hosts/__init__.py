"""Reaching hosts: the inventory, transports (local, SSH), the agent payload, capture."""
