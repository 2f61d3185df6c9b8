"""git on the host: one way to build every command line, and the moves made with it.

Restore's git task, bisect's tree and explain's states all read, stash, fetch and check out
through here, so each of those is done one way. The flags and environment come from
agent/gitsafe.py, as the capture's: output must not depend on the user's taste, the digest
of `git diff HEAD` is computed as at capture, and no command the checkout configured runs
on a read.

Whose checkout: git refuses one owned by another user (CVE-2022-24765), and envsnap never
overrides that for all paths. `toplevel`, which every restore, bisect and explain calls
first, refuses another user's checkout in one line (OthersCheckout, exit 2): moving it runs
its owner's settings (smudge filters, hooks) as whoever envsnap is. With
--as-root-in-others-checkouts (Shell.others), it is moved with `safe.directory` for that
one path and every configured command switched off, reads and writes alike (LFS files are
then checked out as their pointers: no filter runs). In the user's own checkout the writes
keep the user's settings, as when they type git.

A repository that cannot be brought to the wanted state raises GitFailure; nothing here
resets or cleans: whatever is in the way goes into a stash.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from envsnap.agent import gitsafe
from envsnap.errors import UsageError
from envsnap.hostops.shell import Shell, last_line, quote_path
from envsnap.hosts.transport import Result

# C messages (we parse "patch failed: f:12"); never ask for a password on a fetch; nothing
# of the invoking environment points git elsewhere or names a command.
GIT_ENV = {"LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0"}
ENV = gitsafe.shell_env_prefix(GIT_ENV)
# `git stash` writes commits; a host's root often has no identity, and git then refuses.
# The user's own identity, when configured, is left alone.
IDENTITY = ('{git} config user.name >/dev/null 2>&1 || '
            'export GIT_AUTHOR_NAME="${{GIT_AUTHOR_NAME:-envsnap}}" '
            'GIT_COMMITTER_NAME="${{GIT_COMMITTER_NAME:-envsnap}}"; '
            '{git} config user.email >/dev/null 2>&1 || '
            'export GIT_AUTHOR_EMAIL="${{GIT_AUTHOR_EMAIL:-envsnap@localhost}}" '
            'GIT_COMMITTER_EMAIL="${{GIT_COMMITTER_EMAIL:-envsnap@localhost}}"; ')
# The commands that only look: every configured command switched off, and no transport.
READS = frozenset({"rev-parse", "status", "log", "diff", "show", "config", "remote",
                   "for-each-ref", "cat-file", "ls-files", "ls-tree", "symbolic-ref",
                   "rev-list", "merge-base", "hash-object", "read-tree"})
# No fsmonitor command runs for a write either, even in the user's own checkout: it would
# run on every index refresh, for nothing envsnap needs.
FSMONITOR_OFF = ["-c", "core.fsmonitor=false"]


class GitFailure(Exception):
    """This repository cannot be brought to the wanted state; the message says why."""


class OthersCheckout(UsageError):
    """A checkout owned by another user than the one envsnap runs as on the host, without
    --as-root-in-others-checkouts: nothing was changed."""


def is_read(args: tuple[str, ...]) -> bool:
    return bool(args) and (args[0] in READS or args[:2] in (("stash", "list"),
                                                            ("stash", "show")))


def flags(shell: Shell, top: str, args: tuple[str, ...]) -> list[str]:
    """The `-c` flags of one command in `top` (gitsafe.py, hostops' docstring say why)."""
    admitted = shell.others.switches.get(top) if shell.others is not None else None
    chosen = list(gitsafe.OUTPUT_FLAGS)
    chosen += gitsafe.NO_COMMAND_FLAGS if is_read(args) or admitted is not None \
        else FSMONITOR_OFF
    if is_read(args):
        chosen += gitsafe.READ_ONLY_FLAGS
    if admitted is not None:
        chosen += gitsafe.OTHERS_FLAGS + ["-c", f"safe.directory={top}"] + admitted
    return chosen


def git_prefix(shell: Shell, top: str, *args: str) -> str:
    """`git -C TOP` and its flags, for the command `args` begins with."""
    quoted = " ".join(shlex.quote(flag) for flag in flags(shell, top, args))
    return f"git --no-pager -C {shlex.quote(top)} {quoted}"


def command(shell: Shell, top: str, *args: str) -> str:
    words = gitsafe.command_args(list(args))
    return f"{ENV} {git_prefix(shell, top, *args)} {' '.join(shlex.quote(a) for a in words)}"


def run(shell: Shell, top: str, *args: str) -> Result:
    return shell.sh(command(shell, top, *args))


def run_as_author(shell: Shell, top: str, *args: str) -> Result:
    identity = IDENTITY.format(git=f"{ENV} {git_prefix(shell, top, 'config')}")
    return shell.sh(f"{identity}{command(shell, top, *args)}")


def output(shell: Shell, top: str, *args: str) -> str | None:
    """stdout of a read that may fail (a missing ref): None then."""
    result = run(shell, top, *args)
    return result.stdout.strip() if result.exit_code == 0 else None


def complaint(result: Result) -> str:
    """git's own words: its error lines and the file names it lists under them."""
    said: list[str] = []
    for line in result.stderr.splitlines():
        if line.startswith(("error:", "fatal:")):
            said.append(line.strip())
        elif line.startswith("\t") and said and len(said) < 8:
            said[-1] += f" {line.strip()}"
    return "; ".join(said) or last_line(result.stderr) or last_line(result.stdout) or \
        f"exit {result.exit_code}"


# The checkout's top folder as git finds it (the nearest folder above holding `.git`), the
# uid envsnap runs as and the top's owner: what git's own ownership check compares.
WHOSE = ('cd -P -- {repo} 2>/dev/null || {{ echo "no such folder"; exit 3; }}; t=$(pwd -P); '
         'while [ "$t" != / ] && [ ! -e "$t/.git" ]; do t=$(dirname -- "$t"); done; '
         'printf "%s %s %s\\n" "$(id -u)" "$(stat -c %u -- "$t")" "$t"')


def toplevel(shell: Shell, repo: str) -> tuple[str | None, str]:
    """The checkout's top folder (patches are relative to it), or None and why not; another
    user's checkout raises OthersCheckout unless the shell admits it (then its drivers are
    found and switched off for every later command). One command on the host for a
    checkout of the user's own."""
    def show_toplevel(top: str) -> str:
        chosen = " ".join(shlex.quote(f) for f in flags(shell, top, ("rev-parse",)))
        return f"{ENV} git --no-pager -C {quote_path(repo)} {chosen} rev-parse --show-toplevel"

    result = shell.sh(f"{WHOSE.format(repo=quote_path(repo))} && {show_toplevel('')}")
    whose, _, shown = result.stdout.partition("\n")
    me, owner, top = (whose.strip().split(" ", 2) + ["", "", ""])[:3]
    if me.isdigit() and owner.isdigit() and me != owner and top:
        admit(shell, top, int(owner), int(me))
        result = shell.sh(show_toplevel(top))
        shown = result.stdout
    if result.exit_code != 0:
        return None, f"{repo}: not a git checkout ({complaint(result)})"
    found = shown.strip()
    if shell.others is not None and top in shell.others.switches:
        shell.others.switches.setdefault(found, shell.others.switches[top])
    return found, ""


def admit(shell: Shell, top: str, owner: int, me: int) -> None:
    """Another user's checkout: refused, or (--as-root-in-others-checkouts) its drivers
    switched off from now on."""
    if shell.others is None:
        raise OthersCheckout(
            f"{shell.host.name}: {top} belongs to uid {owner}, not to uid {me} that envsnap "
            "runs as there: moving it would run its owner's git settings (filters, hooks) as "
            "you; run envsnap as its owner, or give --as-root-in-others-checkouts to move it "
            "with none of its configured commands")
    shell.others.switches[top] = []   # safe.directory for it, for the listing itself
    listing = shell.sh(f"{ENV} git --no-pager -C {shlex.quote(top)} "
                       f"{' '.join(shlex.quote(f) for f in flags(shell, top, ('config',)))} "
                       + " ".join(shlex.quote(a) for a in gitsafe.config_scan_args()))
    try:
        if listing.exit_code not in (0, 1):
            raise gitsafe.Unsafe(f"its git config cannot be read: {complaint(listing)}")
        shell.others.switches[top] = gitsafe.driver_flags(
            listing.stdout.encode("utf-8", "surrogateescape"))
    except gitsafe.Unsafe as exc:
        del shell.others.switches[top]
        raise OthersCheckout(f"{shell.host.name}: {top}: {exc}; nothing was changed") from None


def resolve_commit(shell: Shell, top: str, rev: str) -> str | None:
    return output(shell, top, "rev-parse", "--verify", "-q", f"{rev}^{{commit}}")


def head(shell: Shell, top: str) -> str | None:
    return resolve_commit(shell, top, "HEAD")


def current_branch(shell: Shell, top: str) -> str | None:
    return output(shell, top, "symbolic-ref", "-q", "--short", "HEAD")


def porcelain(shell: Shell, top: str, submodules: bool = True) -> list[str]:
    """Changed and untracked paths, as `XY path` (ignored files are not work to save).
    submodules=False leaves out submodules (moved, or with work of their own), as `git stash`
    does: it neither saves nor counts them."""
    flags = () if submodules else ("--ignore-submodules=all",)
    result = run(shell, top, "status", "--porcelain=v1", "-z", "--untracked-files=all", *flags)
    if result.exit_code != 0:
        raise GitFailure(f"{top}: git status failed: {complaint(result)}")
    fields = result.stdout.split("\0")
    entries, index = [], 0
    while index < len(fields):
        entry = fields[index]
        index += 1
        if not entry:
            continue
        entries.append(entry)
        if entry[0] in "RC":  # a rename carries its old name in the next field
            index += 1
    return entries


# ---- stash ------------------------------------------------------------------------------------

def stash_push(shell: Shell, top: str, message: str, untracked: bool = True) -> str:
    """`git stash push` (untracked files too, if asked): the new stash's sha; GitFailure if
    git made none (then nothing was moved)."""
    before = output(shell, top, "rev-parse", "-q", "--verify", "refs/stash")
    extra = ("--include-untracked",) if untracked else ()
    pushed = run_as_author(shell, top, "stash", "push", "-q", *extra, "-m", message)
    after = output(shell, top, "rev-parse", "-q", "--verify", "refs/stash")
    if pushed.exit_code != 0 or not after or after == before:
        raise GitFailure(f"{top}: git stash failed, nothing was moved: {complaint(pushed)}")
    return after


def stash_changes(shell: Shell, top: str, message: str, untracked: bool) -> str | None:
    """Stash tracked changes (and untracked files if asked): the stash's sha, None if there
    was nothing to stash, GitFailure if git would not (then nothing was moved)."""
    entries = [e for e in porcelain(shell, top) if untracked or not e.startswith("??")]
    if not entries:
        return None
    return stash_push(shell, top, message, untracked)


def stash_ref(shell: Shell, top: str, sha: str) -> str | None:
    """stash@{n} of a stash commit: later stashes (ours, the user's) shift its number."""
    listed = (output(shell, top, "stash", "list", "--format=%H") or "").split()
    return f"stash@{{{listed.index(sha)}}}" if sha in listed else None


# ---- checkout ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Move:
    """A checkout to make: from HEAD (`now`, on `branch`) to `commit`, as `target` (the
    snapshot's branch when it still points there, else the bare commit)."""

    top: str
    commit: str
    target: str
    now: str | None
    branch: str | None

    @property
    def done(self) -> bool:
        return self.now == self.commit and self.target in (self.commit, self.branch)

    @property
    def where(self) -> str:
        return f"{self.target} ({self.commit[:12]})" if self.target != self.commit \
            else f"{self.commit[:12]} (detached)"

    @property
    def was(self) -> str:
        return f"{self.now[:12] if self.now else 'no commit'}" + \
            (f" on {self.branch}" if self.branch else "")


def plan_checkout(shell: Shell, top: str, sha: str, branch: str = "", fetch: bool = False,
                  probe: bool = False) -> Move:
    """Where a checkout of `sha` (on `branch`) goes from here; only reads (and fetches the
    commit when allowed, see ensure_commit)."""
    commit, _ = ensure_commit(shell, top, sha, fetch, probe)
    return Move(top, commit, wanted_ref(shell, top, commit, branch), head(shell, top),
                current_branch(shell, top))


def switch(shell: Shell, move: Move) -> None:
    # Submodules are a step of their own (their work is stashed first), whatever
    # submodule.recurse the user has set.
    result = run(shell, move.top, "checkout", "-q", "--no-recurse-submodules", move.target)
    if result.exit_code != 0:
        raise GitFailure(f"{move.top}: git checkout {move.target} refused (nothing was lost): "
                         f"{complaint(result)}")


def checkout(shell: Shell, top: str, sha: str, branch: str = "") -> None:
    """Check `sha` out (on `branch` when it still points there), unless already there."""
    move = plan_checkout(shell, top, sha, branch)
    if not move.done:
        switch(shell, move)


def wanted_ref(shell: Shell, top: str, commit: str, branch: str) -> str:
    """The snapshot's branch if it still points at the commit; otherwise the bare commit.
    A branch that moved on is left where it is: moving it would hide the user's commits."""
    if branch and resolve_commit(shell, top, f"refs/heads/{branch}") == commit:
        return branch
    return commit


# ---- fetch ------------------------------------------------------------------------------------

HEX = re.compile(r"^[0-9a-f]{7,64}$")
FULL_SHA = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
PREFLIGHT_REFS = "refs/envsnap/preflight"


def ensure_commit(shell: Shell, top: str, sha: str, fetch: bool,
                  probe: bool = False) -> tuple[str, str]:
    """(full sha, what was done to get it); with `fetch`, fetched from the remotes, and with
    `probe` (check mode) into a temporary ref only (probe_commit); GitFailure if it cannot
    be had."""
    commit = resolve_commit(shell, top, sha)
    if commit:
        return commit, ""
    remotes = (output(shell, top, "remote") or "").split()
    if not fetch:
        hint = "; fetch: true would look on " + ", ".join(remotes) if remotes else ""
        raise GitFailure(f"{top}: commit {sha} is not in this checkout{hint}")
    if not remotes:
        raise GitFailure(f"{top}: commit {sha} is not in this checkout and it has no remote "
                         "to fetch it from")
    if probe:
        return probe_commit(shell, top, sha, remotes)
    return fetch_commit(shell, top, sha, remotes)


def probe_commit(shell: Shell, top: str, sha: str, remotes: list[str]) -> tuple[str, str]:
    """Check mode: prove the commit can be had, by fetching it for real into a temporary ref
    that is deleted again. "would fetch" is no proof: a commit that no remote has passed the
    plan, then failed half-way through the restore. Only objects are added (git gc drops
    them later if nothing ends up using them); branches, remote-tracking refs, tags and
    FETCH_HEAD stay as they were."""
    namespace = f"{PREFLIGHT_REFS}/{sha}"
    tried = []
    try:
        for remote in remotes:
            fetched = fetch_into(shell, top, remote, [f"+{sha}:{namespace}/exact"]) \
                if FULL_SHA.match(sha) else None
            if fetched is None or fetched.exit_code != 0:
                # A server that refuses a bare sha (protocol v0 without allowAnySHA1InWant):
                # its branches and tags, into the same temporary namespace.
                fetched = fetch_into(shell, top, remote, [f"+refs/heads/*:{namespace}/heads/*",
                                                          f"+refs/tags/*:{namespace}/tags/*"])
            commit = resolve_commit(shell, top, sha)
            if commit:
                return commit, f"fetched from {remote} to check it (temporary ref removed)"
            tried.append(f"{remote}: fetch failed: {complaint(fetched)}" if fetched.exit_code
                         else f"{remote}: not there")
    finally:
        drop_refs(shell, top, namespace)
    raise GitFailure(f"{top}: commit {sha} is neither here nor on the remotes "
                     f"({'; '.join(tried)}); nothing was changed")


def fetch_into(shell: Shell, top: str, remote: str, refspecs: list[str]) -> Result:
    flags = ["-q", "--no-tags", "--no-recurse-submodules", "--no-write-fetch-head"]
    fetched = run(shell, top, "fetch", *flags, remote, *refspecs)
    if fetched.exit_code == 129 and "no-write-fetch-head" in fetched.stderr:
        # git older than 2.29: FETCH_HEAD is rewritten, which nothing of the user's reads
        # back except a `git merge FETCH_HEAD` typed right after a fetch.
        fetched = run(shell, top, "fetch", *flags[:-1], remote, *refspecs)
    return fetched


def drop_refs(shell: Shell, top: str, namespace: str) -> None:
    """Delete every ref under the preflight's temporary namespace (and its empty folders)."""
    listed = output(shell, top, "for-each-ref", "--format=%(refname)", namespace) or ""
    for ref in listed.split():
        run(shell, top, "update-ref", "-d", ref)
    # git prunes the empty folders it made, all but refs/envsnap itself (only if empty).
    folder = output(shell, top, "rev-parse", "--git-path", "refs/envsnap")
    if folder:
        shell.sh(f"cd {shlex.quote(top)} && rmdir -- {shlex.quote(folder)} 2>/dev/null; true")


def fetch_commit(shell: Shell, top: str, sha: str, remotes: list[str]) -> tuple[str, str]:
    """Each remote's branches first (what `git fetch` does), then the sha itself, which
    servers allow for any reachable commit under protocol v2."""
    tried = []
    for remote in remotes:
        fetched = run(shell, top, "fetch", "-q", remote)
        if fetched.exit_code == 0 and not resolve_commit(shell, top, sha) and HEX.match(sha):
            run(shell, top, "fetch", "-q", remote, sha)
        commit = resolve_commit(shell, top, sha)
        if commit:
            return commit, f"fetched from {remote}"
        tried.append(f"{remote}: fetch failed: {complaint(fetched)}" if fetched.exit_code
                     else f"{remote}: not there")
    raise GitFailure(f"{top}: commit {sha} is neither here nor on the remotes "
                     f"({'; '.join(tried)}); nothing was changed")
