"""What this machine's SSH configuration says about a host name, before any connection.

Read by the inventory (hosts/inventory.py) to tell a typo from a host SSH can find, and kept
apart from the transport so the inventory needs neither the transport nor paramiko (imported
only when a config file exists) to name a host.
"""
from __future__ import annotations

import os
import socket
from pathlib import Path

SSH_CONFIGS = ("~/.ssh/config", "/etc/ssh/ssh_config")   # where fabric reads them, in order
# getaddrinfo's "no such name"; anything else (EAI_AGAIN: no DNS just now) is left to the
# connection to report, since the name may well exist.
NO_SUCH_NAME = frozenset(getattr(socket, name) for name in ("EAI_NONAME", "EAI_NODATA")
                         if hasattr(socket, name))


def ssh_destination(address: str) -> tuple[str, bool]:
    """(the name SSH connects to, whether it goes through a proxy), as ~/.ssh/config says:
    `Host gpu-box / HostName 10.0.0.7` makes gpu-box 10.0.0.7; a ProxyJump or ProxyCommand
    host is resolved at the far end, not here."""
    paths = [Path(os.path.expanduser(path)) for path in SSH_CONFIGS]
    paths = [path for path in paths if path.is_file()]
    if not paths:
        return address, False
    import paramiko

    hostname, proxied = address, False
    for path in reversed(paths):  # the user's file last, so its settings win
        try:
            found = paramiko.SSHConfig.from_path(str(path)).lookup(address)
        except (OSError, ValueError, paramiko.SSHException):
            continue  # a config SSH cannot read either: the connection will say so
        hostname = str(found.get("hostname") or hostname)
        proxied = proxied or "proxycommand" in found or "proxyjump" in found
    return hostname, proxied


def is_known_host(address: str) -> bool:
    """Whether SSH could find this host: through a proxy, or a name this machine resolves
    (after ~/.ssh/config's HostName). Asked before connecting, so a typo is named as one."""
    hostname, proxied = ssh_destination(address)
    if proxied:
        return True
    try:
        socket.getaddrinfo(hostname, None, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        return exc.errno not in NO_SUCH_NAME
    except UnicodeError:  # a label longer than DNS allows
        return False
    return True
