"""Options several commands share, declared once so they read and default the same."""
from __future__ import annotations

import argparse
import os

from envsnap.defaults import DEFAULT_CONNECT_TIMEOUT
from envsnap.snapshot.store import DEFAULT_STORE

EPILOG = """exit codes: 0 ok / no drift, 1 drift or regression found, 2 usage error,
3 host unreachable or partly failed, 4 invalid snapshot or playbook"""


def add_store_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", default=os.environ.get("ENVSNAP_STORE", DEFAULT_STORE),
                        help="snapshot folder (default: $ENVSNAP_STORE or ./snapshots)")


def add_connection_options(parser: argparse.ArgumentParser) -> None:
    """How hosts are found and reached: the inventory, host keys, the connect timeout."""
    parser.add_argument("--inventory", default=os.environ.get("ENVSNAP_INVENTORY"),
                        help="Ansible-style YAML inventory (default: $ENVSNAP_INVENTORY)")
    parser.add_argument("--accept-new-host-keys", action="store_true",
                        help="trust and record host keys not yet in known_hosts")
    parser.add_argument("--connect-timeout", type=float, default=DEFAULT_CONNECT_TIMEOUT,
                        metavar="S",
                        help=f"SSH connect timeout (default {DEFAULT_CONNECT_TIMEOUT:g})")
    add_store_option(parser)


def add_capture_options(parser: argparse.ArgumentParser) -> None:
    """What a snapshot records beyond the defaults: checkouts, interpreter, workers."""
    parser.add_argument("--repo", action="append", default=[], metavar="PATH",
                        help="git checkout to record (repeatable)")
    parser.add_argument("--python", help="interpreter on the host to run the agent with")
    parser.add_argument("--proc", action="append", default=[], metavar="PATTERN",
                        help="record env of running processes whose cmdline matches "
                             "(repeatable)")
    parser.add_argument("--force", action="store_true", help="replace an existing label")
