"""The snapshot's sections, in the order they are collected, shown and diffed: each is what
the collector module of this package of the same name reports (system.py, nvidia.py, ...).

Defined here, at the lowest floor, because the agent ships alone (hosts/payload.py) and the
controller must read the same list: the schema (snapshot/schema.py), the diff's order
(diff/compare.py) and what restore leaves to the operator (restore/run.py).
"""

SECTIONS = ("system", "nvidia", "cuda_nccl", "python_env", "env", "git")
