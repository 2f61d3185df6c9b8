"""The one place where the command line and environment of every git envsnap runs are built.

A checkout's config (its .git/config, the files it includes, its owner's ~/.gitconfig) can
name commands that git runs by itself: core.fsmonitor on `git status`, filter drivers on
`git diff` and checkout, diff and merge drivers, hooks, editors, pagers, credential helpers,
ssh commands. Whoever runs git in another user's checkout runs that user's commands, which is
why git refuses such a checkout (CVE-2022-24765) unless `safe.directory` says otherwise.
envsnap never says `safe.directory=*` and never runs those commands:

- Every read (capture, timeline, and the reads of restore, bisect and explain) sets each
  command-running setting to a value that runs nothing (NO_COMMANDS), asks diff and log for
  no external diff and no textconv, and switches off, by name, every filter driver (and merge
  driver, remote upload-pack, submodule update command) that the config defines: git has no
  switch that turns off all filters, and `.gitattributes` in the tree or `.git/info/attributes`
  name them, so the names come from one `git config --get-regexp` (driver_flags).
- Where envsnap is root and the checkout is another user's, the agent's reads run as that
  user (their uid, gid and groups, their HOME; identity_of), so git's own ownership check
  holds, and a filter added between the listing and the read runs as its owner, never as
  root. Elsewhere a checkout git refuses is refused in one line (refusal).
- Writes (restore, bisect and explain moving a checkout) happen only in the checkout of the
  user envsnap runs as, with that user's own settings (their LFS smudge filter, their hooks),
  as when they type git; in another user's checkout only with --as-root-in-others-checkouts,
  and then with the same switches as a read plus `safe.directory` for that one path
  (hostops/git.py).

Stdlib only, Python >= 3.8: the agent ships it to the host, and the controller's hostops and
the host-side tree writer build their git commands from the same lists.
"""
from __future__ import annotations

import os
import sys

TYPE_CHECKING = False   # typing's own, without its import: see runner.py
if TYPE_CHECKING:
    from typing import Any, Dict, Iterable, List, NamedTuple, Optional
else:
    from collections import namedtuple as _namedtuple

# Output that does not depend on the user's taste: quoting, prefixes, signatures, colours.
OUTPUT_FLAGS = ["-c", "core.quotepath=off", "-c", "color.ui=never", "-c", "diff.relative=false",
                "-c", "log.showSignature=false"]

# Each git setting that names a command, set to a value that runs none. An empty command is
# an error where git would run it ("cannot run"), never a shell; the hooks folder is one that
# holds no hooks. Set on the command line, each outranks every config file.
NO_COMMANDS = [
    "core.fsmonitor=false",            # run on every `git status` and index refresh
    "core.hooksPath=/dev/null",        # every hook, the fsmonitor hook included
    "core.editor=:", "sequence.editor=:",   # ":" is git's own word for "no editor"
    "core.pager=", "core.askPass=",
    "core.sshCommand=ssh",             # plain ssh from PATH, the user's default
    "credential.helper=",              # empty: clears every helper listed before it
    "diff.external=",                  # besides --no-ext-diff on every diff (PER_COMMAND)
    "gpg.program=", "gpg.openpgp.program=", "gpg.ssh.program=", "gpg.x509.program=",
    "gpg.ssh.defaultKeyCommand=", "commit.gpgSign=false", "tag.gpgSign=false",
    "protocol.ext.allow=never",        # `ext::` remotes are commands
    "core.alternateRefsCommand=",      # run on a fetch into a repository with alternates
    "gc.auto=0", "maintenance.auto=false",   # no background work started in the user's repo
    # uploadpack.packObjectsHook is honoured only from system, global and command-line
    # config, never from a repository's; alias.* never shadows a git command envsnap runs.
]
NO_COMMAND_FLAGS = [flag for setting in NO_COMMANDS for flag in ("-c", setting)]
# A read goes nowhere: no transport at all (remote helpers, proxies, partial-clone fetches).
READ_ONLY_FLAGS = ["-c", "protocol.allow=never"]
# A write in another user's checkout (hostops/git.py) fetches over ssh, https or a path, not
# git://: core.gitProxy, the program git:// connects through, is the one setting where the
# first value git reads wins, so the repository's own outranks the command line.
OTHERS_FLAGS = ["-c", "protocol.git.allow=never"]
# Options of one git command (after its name), for the commands that can show a diff.
PER_COMMAND = {"diff": ["--no-ext-diff", "--no-textconv"],
               "log": ["--no-ext-diff", "--no-textconv"],
               "show": ["--no-ext-diff", "--no-textconv"]}

# The settings named per driver: `filter.<name>.clean` and so on. Each found is set to run
# nothing; a filter marked required would then fail the command, so it is marked optional.
DRIVER_PATTERN = (r"^(filter\..*\.(clean|smudge|process)|merge\..*\.driver|"
                  r"remote\..*\.(uploadpack|receivepack|url)|submodule\..*\.update)$")
DRIVER_SETTINGS = {
    ("filter", "clean"): ["clean=", "smudge=", "process=", "required=false"],
    ("filter", "smudge"): ["clean=", "smudge=", "process=", "required=false"],
    ("filter", "process"): ["clean=", "smudge=", "process=", "required=false"],
    ("merge", "driver"): ["driver="],
    ("remote", "uploadpack"): ["uploadpack=git-upload-pack"],
    ("remote", "receivepack"): ["receivepack=git-receive-pack"],
    ("submodule", "update"): ["update=checkout"],
}

# The invoker's environment must neither point git at another repository nor name a command
# (GIT_EXTERNAL_DIFF, GIT_SSH_COMMAND, GIT_CONFIG_PARAMETERS...): every GIT_* goes, and these.
COMMAND_ENV = ("PAGER", "EDITOR", "VISUAL", "SSH_ASKPASS", "XDG_CONFIG_HOME")
# Names the host's shell unsets before git (hostops cannot say "every GIT_*" in one word;
# GIT_INDEX_FILE stays: hostops sets it for a private index of its own).
SHELL_UNSET = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR",
               "GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE",
               "GIT_CONFIG", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_EXTERNAL_DIFF",
               "GIT_PAGER", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "GIT_ASKPASS", "GIT_EXEC_PATH",
               "GIT_SSH", "GIT_SSH_COMMAND", "GIT_PROXY_COMMAND") + COMMAND_ENV
READ_ENV = {"LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0",
            # --no-optional-locks (older gits ignore the variable rather than fail); no
            # blob fetched by a partial clone while we only look
            "GIT_OPTIONAL_LOCKS": "0", "GIT_NO_LAZY_FETCH": "1"}

DUBIOUS = b"dubious ownership"

if TYPE_CHECKING:
    class Identity(NamedTuple):
        """Who git runs as: a checkout's owner, for a reader that is root."""
        uid: int
        gid: int
        groups: List[int]
        home: str
else:
    Identity = _namedtuple("Identity", "uid gid groups home")


class Unsafe(Exception):
    """The checkout's config names a driver whose setting cannot be written on a command
    line (its name holds `=` or a line break): it is not read rather than read with it on."""


def driver_flags(listing: bytes) -> List[str]:
    """`-c` flags that switch off each driver named in `git config -z --get-regexp
    DRIVER_PATTERN` output (`key\\nvalue\\0` records); remote urls are listed by the same
    read for the capture and need no switch."""
    flags: List[str] = []
    seen = set()
    for record in listing.split(b"\0"):
        key = record.partition(b"\n")[0].decode("utf-8", "surrogateescape")
        section, _, rest = key.partition(".")
        name, _, variable = rest.rpartition(".")
        settings = DRIVER_SETTINGS.get((section, variable))
        if not settings or (section, name) in seen:
            continue
        if "=" in name or "\n" in name or not name:
            raise Unsafe("its config names a %s driver %r that cannot be switched off on a "
                         "command line: not read" % (section, name))
        seen.add((section, name))
        flags += [part for setting in settings
                  for part in ("-c", "%s.%s.%s" % (section, name, setting))]
    return flags


def read_argv(exe: str, cwd: str, args: List[str], drivers: Iterable[str] = ()) -> List[str]:
    """git -C cwd, with every command switched off, then the command and its own switches."""
    return ([exe, "--no-pager", "-C", cwd] + OUTPUT_FLAGS + NO_COMMAND_FLAGS + READ_ONLY_FLAGS
            + list(drivers) + command_args(args))


def command_args(args: List[str]) -> List[str]:
    if args and args[0] in PER_COMMAND:
        return args[:1] + PER_COMMAND[args[0]] + args[1:]
    return list(args)


def read_env(base: Dict[str, str], identity: Optional[Identity] = None) -> Dict[str, str]:
    env = {key: value for key, value in base.items()
           if not key.startswith("GIT_") and key not in COMMAND_ENV}
    env.update(READ_ENV)
    if identity is not None:   # the owner's git reads the owner's ~/.gitconfig, not root's
        env["HOME"] = identity.home
    return env


def identity_of(path: str) -> Optional[Identity]:
    """The owner of the checkout at `path` when envsnap is root and it is not root's: git then
    runs as that user. None: git runs as envsnap does (its own refusal stands)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return None
    uid = os.stat(path).st_uid
    if uid == 0:
        return None
    import pwd

    try:
        user = pwd.getpwuid(uid)
    except KeyError:   # an owner with no account: its uid and the folder's group, no home
        return Identity(uid, os.stat(path).st_gid, [], "/nonexistent")
    try:
        groups = os.getgrouplist(user.pw_name, user.pw_gid)
    except OSError:
        groups = [user.pw_gid]
    return Identity(uid, user.pw_gid, groups, user.pw_dir or "/nonexistent")


def popen_options(identity: Optional[Identity]) -> Dict[str, Any]:
    """subprocess options that start git as `identity`: its groups, gid, then uid, all of
    them (real and effective), so nothing git runs can become root again."""
    if identity is None:
        return {}
    if sys.version_info >= (3, 9):
        return {"user": identity.uid, "group": identity.gid, "extra_groups": identity.groups}
    return {"preexec_fn": lambda: drop_to(identity)}


def drop_to(identity: Identity) -> None:
    """Python 3.8 has no user=/group= for subprocess: the same calls, in the child."""
    os.setgroups(identity.groups)
    os.setregid(identity.gid, identity.gid)
    os.setreuid(identity.uid, identity.uid)


def refusal(path: str, stderr: bytes) -> Optional[str]:
    """git's refusal of a checkout owned by someone else, said in one line; None otherwise."""
    if DUBIOUS not in stderr:
        return None
    try:
        uid = os.stat(path).st_uid
    except OSError:
        uid = -1
    return ("%s is owned by uid %d, not by uid %d that envsnap runs as: git refuses to read "
            "another user's checkout (run envsnap as that user, or as root)"
            % (path, uid, os.geteuid() if hasattr(os, "geteuid") else -1))


def shell_env_prefix(settings: Dict[str, str]) -> str:
    """For a command line on the host: `env -u ...` every variable above, then `settings`
    (plain words: LC_ALL=C and the like)."""
    unset = " ".join("-u %s" % name for name in SHELL_UNSET)
    return "env %s %s" % (unset, " ".join("%s=%s" % item for item in sorted(settings.items())))


def config_scan_args() -> List[str]:
    return ["config", "-z", "--get-regexp", DRIVER_PATTERN]

