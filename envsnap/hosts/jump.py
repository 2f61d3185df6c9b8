"""How a host is reached through a bastion: ProxyJump hops or a ProxyCommand.

They come from ~/.ssh/config (read by fabric, per host) or from an inventory's
`ansible_ssh_common_args` / `ansible_ssh_extra_args`, the ssh options Ansible passes on
(`-J bastion`, `-o ProxyJump=user@bastion:2222`, `-o ProxyCommand="ssh -W %h:%p bastion"`).
Besides the proxy, the cryptography those strings choose (`-o KexAlgorithms=...` and the
other options of CRYPTO_OPTIONS) is read, and given to ssh as Ansible gives it; no other
option is taken from an inventory (one could name a command to run here, LocalCommand).
"""
from __future__ import annotations

import re
import shlex
from typing import NamedTuple

from envsnap.errors import UsageError
from envsnap.hosts.inventory_graph import Vars

SSH_ARG_VARS = ("ansible_ssh_common_args", "ansible_ssh_extra_args")
# `-o Key=value`, `-o Key value`, `-oKey = value`: ssh's own spellings of one option
SSH_OPTION = re.compile(r"^\s*(?P<key>[A-Za-z]+)\s*(?:=|\s)\s*(?P<value>.*?)\s*$", re.DOTALL)
NO_PROXY = "none"   # ssh's word for "no proxy here", overriding a broader Host block
# What an inventory's ssh args may choose besides the proxy: algorithms only, which run nothing.
CRYPTO_OPTIONS = ("KexAlgorithms", "Ciphers", "MACs", "HostKeyAlgorithms",
                  "PubkeyAcceptedAlgorithms")


class Jump(NamedTuple):
    """The way to a host through others; empty when it is reached directly."""

    hops: tuple[str, ...] = ()   # ProxyJump, `[user@]host[:port]`, the first hop first
    command: str = ""            # ProxyCommand: its own process reaches the host

    @property
    def direct(self) -> bool:
        return not self.hops and not self.command


def proxy_jump_hops(value: str) -> tuple[str, ...]:
    """ProxyJump's `a,user@b:2222,ssh://c` as hops; `none` is no hop at all."""
    if value.strip().lower() == NO_PROXY:
        return ()
    return tuple(hop.strip().removeprefix("ssh://") for hop in value.split(",") if hop.strip())


def ssh_args_options(text: str, what: str) -> list[str]:
    """The `-o` options (and `-J`, as `ProxyJump value`) of ssh arguments, in order, each as
    `Key value` or `Key=value`."""
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise UsageError(f"{what}: not valid ssh arguments ({exc})") from None
    options = []
    for index, word in enumerate(words):
        following = words[index + 1] if index + 1 < len(words) else None
        if word in ("-J", "-o"):
            if following is None:
                raise UsageError(f"{what}: {word} without a value")
            options.append(("ProxyJump " + following) if word == "-J" else following)
        elif word.startswith(("-J", "-o")):
            options.append(("ProxyJump " + word[2:]) if word.startswith("-J") else word[2:])
    return options


def ssh_args_jump(text: str, what: str) -> Jump | None:
    """The proxy that ssh options on a command line give (ssh's rule: the first one given
    wins), or None when they give none."""
    for option in ssh_args_options(text, what):
        jump = option_jump(option)
        if jump is not None:
            return jump
    return None


def inventory_crypto(host_vars: Vars, what: str) -> dict[str, str]:
    """The algorithms an inventory host's ssh args choose (CRYPTO_OPTIONS, spelled as ssh
    spells them), the first given of each winning, as on ssh's command line."""
    chosen: dict[str, str] = {}
    for name, text in ssh_arg_strings(host_vars, what):
        for option in ssh_args_options(text, f"{what}: {name}"):
            match = SSH_OPTION.match(option)
            if not match:
                continue
            for key in CRYPTO_OPTIONS:
                if match["key"].lower() == key.lower() and match["value"]:
                    chosen.setdefault(key, match["value"])
    return chosen


def ssh_arg_strings(host_vars: Vars, what: str) -> list[tuple[str, str]]:
    """(var, value) of each ssh args var the host sets, in the order ssh reads them."""
    found = []
    for name in SSH_ARG_VARS:
        value = host_vars.get(name)
        if value is None or value == "":
            continue
        if not isinstance(value, str):
            raise UsageError(f"{what}: {name} must be a string of ssh arguments, not "
                             f"{type(value).__name__}")
        found.append((name, value))
    return found


def option_jump(option: str) -> Jump | None:
    """`ProxyJump=...` or `ProxyCommand=...` as a Jump; any other option is None."""
    match = SSH_OPTION.match(option)
    if not match:
        return None
    key, value = match["key"].lower(), match["value"]
    if key == "proxyjump":
        return Jump(hops=proxy_jump_hops(value))
    if key == "proxycommand":
        return Jump() if value.strip().lower() == NO_PROXY else Jump(command=value)
    return None


def inventory_jump(host_vars: Vars, what: str) -> Jump | None:
    """The proxy an inventory host's ssh args give; None when they give none (then
    ~/.ssh/config decides, as it would for ssh)."""
    for name, value in ssh_arg_strings(host_vars, what):
        jump = ssh_args_jump(value, f"{what}: {name}")
        if jump is not None:
            return jump
    return None
