"""What this machine's SSH configuration says about a host name, before any connection.

Read by the inventory (hosts/inventory.py) to tell a typo from a host SSH can find, and by the
transport to choose and set up its connection. Asked of OpenSSH itself (`ssh -G`: the
configuration it would use, no connection made, a few ms) where an `ssh` client is on PATH,
so the answer is the client's own, Match blocks and Include files too; otherwise of
paramiko's parser (imported only then, and only when a config file exists).

OpenSSH reads `~` from the password database, envsnap (like fabric) from $HOME: where the two
differ (a test's HOME, `sudo -E`), ssh is pointed at $HOME's ~/.ssh/config with `-F`, so both
transports read the same file.
"""
from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

from envsnap.hosts.inventory_graph import is_ip_address

SSH_CONFIGS = ("~/.ssh/config", "/etc/ssh/ssh_config")   # where fabric reads them, in order
# getaddrinfo's "no such name"; anything else (EAI_AGAIN: no DNS just now) is left to the
# connection to report, since the name may well exist.
NO_SUCH_NAME = ("EAI_NONAME", "EAI_NODATA")
SSH_G_TIMEOUT_S = 10.0


class Destination(NamedTuple):
    """Where SSH goes for a host name, as its configuration says."""

    hostname: str
    proxied: bool                   # through a ProxyJump or ProxyCommand
    user: str | None = None         # None: not said (paramiko's reading)
    port: int | None = None
    known_hosts: tuple[str, ...] = ()   # UserKnownHostsFile, as configured


def ssh_client() -> str | None:
    """The OpenSSH client on PATH, if any."""
    return shutil.which("ssh")


def config_args() -> list[str]:
    """`-F $HOME/.ssh/config` where ssh would read another file as ~/.ssh/config (see the
    module's docstring); nothing otherwise, so ssh reads the system's file too."""
    home = os.path.expanduser("~")
    try:
        own = pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:
        own = ""
    config = Path(home) / ".ssh" / "config"
    if os.path.realpath(home) == os.path.realpath(own) or not config.is_file():
        return []
    return ["-F", str(config)]


def ssh_destination(address: str) -> Destination:
    """Where SSH connects for `address`: `Host gpu-box / HostName 10.0.0.7` makes gpu-box
    10.0.0.7; a ProxyJump or ProxyCommand host is resolved at the far end, not here."""
    client = ssh_client()
    if client is not None:
        args = tuple(config_args())
        found = openssh_destination(client, address, args, configs_stamp())
        if found is not None:
            return found
    return paramiko_destination(address)


def configs_stamp() -> tuple[tuple[int, int, int] | None, ...]:
    """What the config files are now: the cache below answers again once one changes."""
    stamps: list[tuple[int, int, int] | None] = []
    for path in SSH_CONFIGS:
        try:
            status = os.stat(os.path.expanduser(path))
            stamps.append((status.st_ino, status.st_mtime_ns, status.st_size))
        except OSError:
            stamps.append(None)
    return tuple(stamps)


@lru_cache(maxsize=256)
def openssh_destination(client: str, address: str, args: tuple[str, ...],
                        stamp: tuple[tuple[int, int, int] | None, ...]) -> Destination | None:
    """`ssh -G` of the address (asked once per process for each address and state of the
    config files: the inventory and the transport both ask); None when ssh cannot read its
    configuration (the connection will say why)."""
    try:
        result = subprocess.run([client, *args, "-G", "--", address], capture_output=True,
                                text=True, timeout=SSH_G_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if result.returncode != 0:
        return None
    said: dict[str, str] = {}
    for line in result.stdout.splitlines():
        key, _, value = line.partition(" ")
        said.setdefault(key.lower(), value.strip())
    proxied = said.get("proxyjump", "none").lower() != "none" or \
        said.get("proxycommand", "none").lower() != "none"
    port = said.get("port", "")
    return Destination(hostname=said.get("hostname") or address, proxied=proxied,
                       user=said.get("user") or None,
                       port=int(port) if port.isdigit() else None,
                       known_hosts=tuple(said.get("userknownhostsfile", "").split()))


def paramiko_destination(address: str) -> Destination:
    paths = [Path(os.path.expanduser(path)) for path in SSH_CONFIGS]
    paths = [path for path in paths if path.is_file()]
    if not paths:
        return Destination(address, False)
    import paramiko

    hostname, proxied = address, False
    for path in reversed(paths):  # the user's file last, so its settings win
        try:
            found = paramiko.SSHConfig.from_path(str(path)).lookup(address)
        except (OSError, ValueError, paramiko.SSHException):
            continue  # a config SSH cannot read either: the connection will say so
        hostname = str(found.get("hostname") or hostname)
        proxied = proxied or "proxycommand" in found or "proxyjump" in found
    return Destination(hostname, proxied)


def config_files() -> list[str]:
    """The SSH config files read for a host name, as a person would name them (`~/...` under
    $HOME): with -F only $HOME's; else OpenSSH reads the password database's home and the
    system's, paramiko $HOME's and the system's; only those that exist."""
    if config_args():
        paths = [os.path.join(os.path.expanduser("~"), ".ssh", "config")]
    elif ssh_client() is not None:
        try:
            own = pwd.getpwuid(os.getuid()).pw_dir
        except KeyError:
            own = os.path.expanduser("~")
        paths = [os.path.join(own, ".ssh", "config"), SSH_CONFIGS[1]]
    else:
        paths = [os.path.expanduser(path) for path in SSH_CONFIGS]
    home = os.path.join(os.path.expanduser("~"), "")
    return [f"~/{path[len(home):]}" if path.startswith(home) else path
            for path in paths if os.path.isfile(path)]


def unknown_host_text(address: str) -> str:
    """Where SSH looked for a name is_known_host refused, for the line that refuses it:
    `not a Host in ~/.ssh/config, and the name does not resolve`."""
    hostname = ssh_destination(address).hostname
    files = config_files()
    if hostname.lower() != address.lower():   # ssh -G gives the name in lower case
        return (f"a Host in {' or '.join(files) or 'the SSH config'} whose HostName "
                f"{hostname} does not resolve")
    looked = f"not a Host in {' or '.join(files)}" if files else \
        "not a Host in an SSH config (there is no ~/.ssh/config)"
    return f"{looked}, and the name does not resolve"


def is_known_host(address: str) -> bool:
    """Whether SSH could find this host: through a proxy, at an address, or by a name this
    machine resolves (after ~/.ssh/config's HostName). Asked before connecting, so a typo is
    named as one."""
    destination = ssh_destination(address)
    if destination.proxied or is_ip_address(destination.hostname):
        return True   # nothing to look up: no socket, nor the idna codec (~4 ms of a start)
    import socket  # on use: nor for a host from an inventory

    try:
        socket.getaddrinfo(destination.hostname, None, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        return exc.errno not in {getattr(socket, name, None) for name in NO_SUCH_NAME}
    except UnicodeError:  # a label longer than DNS allows
        return False
    return True
