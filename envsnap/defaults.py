"""Defaults that the library and the command line share. This module imports nothing:
building the parser happens for every command (`envsnap diff` too), and must not load
capture, transport, bench or bisect to learn a number."""
from __future__ import annotations

DEFAULT_FORKS = 5                  # hosts worked on at once: Ansible's default
DEFAULT_COLLECTOR_TIMEOUT = 20.0   # seconds each collector may take on the host
DEFAULT_CONNECT_TIMEOUT = 10.0     # seconds for an SSH connection
DEFAULT_REPEAT = 5                 # benchmark runs
DEFAULT_SAMPLE_INTERVAL = 0.2      # seconds between telemetry samples during a run
DEFAULT_RUN_TIMEOUT = 1800.0       # seconds before one benchmark run is killed
DEFAULT_SERVE_TIMEOUT = 300.0      # seconds a --serve server has to become ready (an
                                   # inference server loads its weights first)
DEFAULT_BISECT_REPEAT = 3          # bisect: runs per commit to start with (bench/stats.py
                                   # tells a large gap at 2-3 runs a side)
DEFAULT_MAX_REPEAT = 20            # bisect: runs per commit at most, can't tell included
DEFAULT_PRUNE_KEEP = 5             # prune: rollback points kept per host, the newest
DEFAULT_PRUNE_DAYS = 30.0          # prune: and every one younger than this many days
DEFAULT_STORE = "snapshots"           # the store folder, without --store or $ENVSNAP_STORE
REPORT_FORMATS = ("md", "html", "json")
