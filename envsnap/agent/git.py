"""Git collector: HEAD, branch, upstream, remotes, reflog, stashes, uncommitted work, history.

Per repo, the git reads run at once (rev-parse, config, log, stash list), and status and
diff as soon as the config has named the drivers to switch off (gitsafe.py: nothing the
checkout configured runs); then one `git log -p` per stash. The HEAD reflog is read straight
from its file. Nothing is fetched and nothing is written: optional locks are off, so
capturing never races the user.

A capture that names no repo imports this module and returns: what reading a repo needs
(gitrun, with typing, hashlib, subprocess; base64) is imported where it is used.
"""
from __future__ import annotations

import os
import time

from . import gitparse
from .util import CollectorError, escaped, sha256_file, which

TYPE_CHECKING = False   # typing's own, without its import: see runner.py
if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor
    from typing import Any, Callable, Dict, List, Optional, Set, Tuple, TypeVar

    from .gitrun import Git, Stream

    T = TypeVar("T")

DEFAULTS: Dict[str, Any] = {
    "max_patch_bytes": 1 << 20,   # kept bytes per patch, and for untracked file contents
    "history": 200,               # commits of history, at least (unless the budget is less)
    "history_budget": 5000,       # at most, when more moved since the reflog's oldest entry
    "reflog": 100,                # HEAD reflog entries
    "max_untracked": 1000,        # untracked files listed (a venv inside the repo has 100k)
    "max_hash_bytes": 512 << 20,  # untracked bytes hashed in all; checkpoints can be 100 GB
    "max_stash_patches": 10,      # stashes whose patch is kept; all are listed
    "git_timeout": 10.0,          # seconds per git command
}

# Patches that `git apply` takes back whatever the user's diff settings are.
PATCH_FLAGS = ["--binary", "--full-index", "--no-ext-diff", "--no-textconv", "--no-color",
               "--no-renames", "--src-prefix=a/", "--dst-prefix=b/"]


class RepoError(CollectorError):
    """This repository cannot be read at all; the message replaces its facts."""


# ---- the collector ----------------------------------------------------------------------------

def collect(config: Dict[str, Any]) -> Dict[str, Any]:
    # Stored absolute, resolved here on the host: a relative path (from the login home over
    # SSH) means nothing to the controller, nor to a restore run from elsewhere. The path as
    # given is kept beside it, so an inventory naming `sglang` still names this checkout.
    given = {os.path.abspath(os.path.expanduser(str(path))): str(path)
             for path in config.get("repos") or []}
    paths: List[str] = list(given)
    if not paths:
        return {"facts": {}, "volatile": {}}
    from . import gitlock
    from .gitrun import Git  # on use, as gitrun's typing.NamedTuple: see the docstring

    settings = dict(DEFAULTS, **{k: config[k] for k in DEFAULTS if k in config})
    exe = which("git")
    git = Git(exe, float(settings["git_timeout"])) if exe else None
    repos: Dict[str, Any] = {}
    seconds: Dict[str, float] = {}
    # on use: concurrent.futures brings logging, ~10 ms of every capture's start-up on the
    # host, where most captures name no repo
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=8) as pool:
        for path in paths:
            started = time.monotonic()
            repos[path] = collect_repo(path, git, settings, pool)
            if given[path] != path:
                repos[path]["given_path"] = given[path]
            holder = gitlock.lock_holder(path, config.get("controller"))
            if holder is not None and "error" not in repos[path]:
                repos[path]["held_by"] = holder
            seconds[path] = round(time.monotonic() - started, 4)
    facts: Dict[str, Any] = {"repos": repos}
    if git is not None:
        facts["git"] = {"path": git.exe, "version": git_version(git)}
    return {"facts": facts, "volatile": {"seconds": seconds}}


def git_version(git: Git) -> Optional[str]:
    try:
        code, out, _ = git.run("/", ["--version"])
    except CollectorError:
        return None
    return gitparse.text(out).strip().replace("git version ", "") if code == 0 else None


def collect_repo(path: str, git: Optional[Git], settings: Dict[str, Any],
                 pool: ThreadPoolExecutor) -> Dict[str, Any]:
    """One repository's facts, or {"error": why} when it cannot be read at all."""
    try:
        problem = path_problem(path, git)
        if problem:
            raise RepoError(problem)
        assert git is not None
        git = git.for_checkout(path)   # as its owner where envsnap is root: gitsafe.py
        reads = start_reads(git, path, settings, pool)
        results = {k: f.result() for k, f in reads.items()}
        return read_repo(path, results["safe"], settings, pool, results)
    except CollectorError as exc:
        return {"error": str(exc)}
    except Exception as exc:  # one strange repo must not lose the others
        return {"error": "%s: %s" % (type(exc).__name__, exc)}


def path_problem(path: str, git: Optional[Git]) -> Optional[str]:
    if not os.path.exists(path):
        return "no such directory: %s" % path
    if not os.path.isdir(path):
        return "not a directory: %s" % path
    if git is None:
        return "git not found"
    return None


def start_reads(git: Git, path: str, settings: Dict[str, Any],
                pool: ThreadPoolExecutor) -> Dict[str, "Future[Any]"]:
    """The independent reads, started together: the slowest one sets the repo's time. Those
    that look at the work tree (status, diff) wait for the config's drivers to be switched
    off; the one config read also gives the remotes."""
    from .gitsafe import config_scan_args

    where = pool.submit(git.run, path, ["rev-parse", "--git-dir", "--git-common-dir",
                                        "--show-toplevel"])
    listing = pool.submit(git.run, path, config_scan_args())
    safe = pool.submit(lambda: git.with_drivers(path, with_submodules(git, path,
                                                                      listing.result())))

    def then(read: str, *args: Any) -> "Future[Any]":   # Git.run or Git.stream, once safe
        return pool.submit(lambda: getattr(safe.result(), read)(*args))

    return {
        "where": where,
        "listing": listing,
        "safe": safe,   # its error, if any, is the repo's: it comes before status's
        "status": then("run", path, ["status", "--porcelain=v2", "--branch", "-z",
                                       "--untracked-files=all"]),
        "history": pool.submit(read_history, git, path, settings, where),
        "patch": then("stream", path, ["diff", "HEAD"] + PATCH_FLAGS + ["--"],
                      int(settings["max_patch_bytes"]), True),
        "staged": then("stream", path, ["diff", "--cached"] + PATCH_FLAGS + ["--"],
                       int(settings["max_patch_bytes"]), True),
        "stashes": pool.submit(git.run, path, ["stash", "list", "-z",
                                               "--format=" + gitparse.STASH_FORMAT]),
    }


def with_submodules(git: Git, path: str,
                    listing: Tuple[int, bytes, bytes]) -> Tuple[int, bytes, bytes]:
    """The config listing, and where there are submodules, theirs too: `git status` looks
    into each, and the superproject's `-c` switches reach the git it starts there. One more
    command, only for a checkout with a .gitmodules."""
    from .gitsafe import config_scan_args

    code, out, err = listing
    if code not in (0, 1) or not os.path.exists(os.path.join(path, ".gitmodules")):
        return listing
    import shlex

    scan = " ".join(shlex.quote(word) for word in [git.exe] + config_scan_args())
    inner, more, problem = git.run(path, ["submodule", "foreach", "--quiet", "--recursive",
                                          scan + " || true"])
    if inner != 0:
        raise RepoError("git submodule foreach failed: %s" % first_line(problem))
    return code, out + (b"\0" if out and not out.endswith(b"\0") else b"") + more, err


def read_repo(path: str, git: Git, settings: Dict[str, Any], pool: ThreadPoolExecutor,
              results: Dict[str, Any]) -> Dict[str, Any]:
    """Without rev-parse and status there is no repo to speak of; the rest fail on their own."""
    where = locate(path, results["where"])
    status = gitparse.parse_status(checked(results["status"], "status"))
    reflog, older = read_reflog(where["git_dir"], int(settings["reflog"]))
    boundary = read_shallow(where["common_dir"])
    shallow = boundary is not None
    repo: Dict[str, Any] = {"realpath": os.path.realpath(path), "toplevel": where["toplevel"],
                            "shallow": shallow, "reflog": reflog, "reflog_truncated": older}
    if boundary is not None:
        repo["shallow_boundary"] = sorted(boundary)
    repo.update(head_facts(status, reflog))
    operation = read_operation(where["git_dir"], status["conflicted"])
    if operation is not None:
        repo["in_progress"] = operation
    repo["remotes"] = gitparse.parse_remotes(results["listing"][1])
    repo.update(history_facts(results["history"], status["head"], shallow, settings))
    gitparse.mark_boundary(repo["history"], boundary or set())
    stashes, problem = parsed(results["stashes"], gitparse.parse_stash_list)
    if problem:
        repo["stashes_error"] = problem
    patches = start_stash_patches(git, where["toplevel"], stashes or {}, settings, pool)
    repo["uncommitted"] = uncommitted_facts(git, where["toplevel"], status, results["patch"],
                                            results["staged"], settings)
    submodules = submodule_facts(git, where["toplevel"], status["submodules"])
    if submodules:
        repo["submodules"] = submodules
    repo["stashes"] = finish_stashes(stashes or {}, patches)
    return repo


def parsed(result: Tuple[int, bytes, bytes],
           parse: Callable[[bytes], T]) -> Tuple[Optional[T], str]:
    """A read that may fail alone: (data, "") or (None, git's complaint)."""
    code, out, err = result
    return (parse(out), "") if code == 0 else (None, first_line(err))


def checked(result: Tuple[int, bytes, bytes], what: str) -> bytes:
    code, out, err = result
    if code != 0:
        raise RepoError("git %s failed: %s" % (what, first_line(err)))
    return out


def first_line(err: bytes) -> str:
    lines = gitparse.text(err).strip().splitlines()
    return lines[0] if lines else "no message"


def locate(path: str, result: Tuple[int, bytes, bytes]) -> Dict[str, str]:
    code, out, err = result
    if code != 0:
        if b"not a git repository" in err:
            raise RepoError("not a git repository: %s" % path)
        raise RepoError("git rev-parse failed in %s: %s" % (path, first_line(err)))
    git_dir, common_dir, toplevel = out.split(b"\n")[:3]
    # --git-dir and --git-common-dir may be relative to the directory git ran in.
    return {"git_dir": os.path.join(path, escaped(git_dir)),
            "common_dir": os.path.join(path, escaped(common_dir)),
            "toplevel": escaped(toplevel)}


def head_facts(status: Dict[str, Any], reflog: List[Dict[str, Any]]) -> Dict[str, Any]:
    facts = {key: status[key] for key in ("head", "branch", "upstream", "ahead", "behind")}
    facts["detached"] = status["branch"] is None and status["head"] is not None
    if facts["detached"]:
        facts.update(gitparse.detached_state(status["head"], reflog))
    return facts


def read_history(git: Git, path: str, settings: Dict[str, Any],
                 where: "Future[Tuple[int, bytes, bytes]]") -> Tuple[Tuple[int, bytes, bytes], int]:
    """`git log` of HEAD, as deep as what moved: (git's answer, the depth asked for)."""
    depth = history_depth(git, path, settings, where.result())
    args = ["log", "-n", str(depth), "-z", "-m", "--no-renames", "--name-only", "--no-ext-diff",
            "--format=" + gitparse.HISTORY_FORMAT, "HEAD", "--"]
    return git.run(path, args), depth


# Commits recorded beyond the count that moved: a date-ordered log may list a few commits
# of a side branch before the last of them.
HISTORY_MARGIN = 20


def history_depth(git: Git, path: str, settings: Dict[str, Any],
                  where: Tuple[int, bytes, bytes]) -> int:
    """At least `history` commits, and as many as HEAD gained since the oldest position in the
    recorded reflog, up to `history_budget`: a 500-commit pull is recorded whole, so a diff
    against the snapshot taken before it counts every commit, not "at least 200"."""
    budget = int(settings["history_budget"])
    limit = min(int(settings["history"]), budget)
    try:
        git_dir = locate(path, where)["git_dir"]
        lines, _ = tail_lines(os.path.join(git_dir, "logs", "HEAD"), int(settings["reflog"]))
    except (CollectorError, OSError, ValueError):
        return limit
    oldest = gitparse.oldest_position(gitparse.parse_reflog(lines[:1]))
    if oldest is None:
        return limit
    code, out, _ = git.run(path, ["rev-list", "--count", "--ignore-missing", "HEAD", "--not",
                                  oldest, "--"])
    moved = gitparse.text(out).strip()
    if code != 0 or not moved.isdigit():
        return limit
    return min(budget, max(limit, int(moved) + HISTORY_MARGIN))


def history_facts(read: Tuple[Tuple[int, bytes, bytes], int], head: Optional[str],
                  shallow: bool, settings: Dict[str, Any]) -> Dict[str, Any]:
    """Newest first; complete means it reaches the root: not shallow and not cut by the depth
    (which is the depth asked for, `history` or more when more moved)."""
    result, limit = read
    commits, problem = parsed(result, gitparse.parse_history) if head else ([], "")
    facts = {"history": commits or [], "history_limit": limit,
             "history_complete": not problem and not shallow and len(commits or []) < limit}
    if problem:
        facts["history_error"] = problem
    return facts


# What each marker's files say, read as the first line of a file in the git dir.
OPERATION_DETAILS = {"onto": ["rebase-merge/onto", "rebase-apply/onto"],
                     "branch": ["rebase-merge/head-name", "rebase-apply/head-name",
                                "BISECT_START"],
                     "merge_head": ["MERGE_HEAD"], "cherry_pick_head": ["CHERRY_PICK_HEAD"],
                     "revert_head": ["REVERT_HEAD"]}


def read_operation(git_dir: str, conflicted: List[str]) -> Optional[Dict[str, Any]]:
    """A rebase, merge, cherry-pick, revert or bisect stopped half-way, with the files left
    conflicted (status's unmerged entries); None when none is in progress."""
    markers = [name for name, _ in gitparse.OPERATION_MARKERS + [("rebase-apply/applying", "")]
               if os.path.exists(os.path.join(git_dir, name))]
    present = [name.replace("rebase-apply/", "") for name in markers]
    details = {key: first_line_of(git_dir, files) for key, files in OPERATION_DETAILS.items()}
    return gitparse.operation_in_progress(present, conflicted, details)


def first_line_of(git_dir: str, names: List[str]) -> str:
    for name in names:
        try:
            with open(os.path.join(git_dir, name), "rb") as handle:
                return gitparse.text(handle.readline()).strip()
        except OSError:
            continue
    return ""


def read_shallow(common_dir: str) -> Optional[Set[str]]:
    """The shallow edge (.git/shallow: one sha a line): commits whose parents were not fetched.
    None: not a shallow clone."""
    try:
        with open(os.path.join(common_dir, "shallow"), "rb") as handle:
            return {gitparse.text(line).strip() for line in handle if line.strip()}
    except FileNotFoundError:
        return None
    except OSError:  # unreadable: shallow all the same, edge unknown
        return set()


# ---- submodules -------------------------------------------------------------------------------

MAX_SUBMODULES = 200


def submodule_facts(git: Git, top: str, flags: Dict[str, str]) -> Dict[str, Dict[str, Any]]:
    """Each submodule: the commit the superproject records for it, the one checked out in
    it, and whether its own tree is dirty. The superproject's patch shows only a pointer."""
    if not os.path.exists(os.path.join(top, ".gitmodules")):
        return {}  # the usual case costs one stat
    code, out, _ = git.run(top, ["config", "-z", "-f", ".gitmodules", "--get-regexp",
                                 r"^submodule\..*\.path$"])
    paths = [gitparse.text(record).partition("\n")[2] for record in gitparse.split_nul(out)]
    paths = [path for path in paths if path][:MAX_SUBMODULES] if code == 0 else []
    if not paths:
        return {}
    code, out, _ = git.run(top, ["ls-files", "-s", "-z", "--"] + paths)
    recorded = gitparse.parse_gitlinks(out) if code == 0 else {}
    facts = {}
    for path in paths:
        state = flags.get(path, "S...")
        checked_out = None
        if os.path.exists(os.path.join(top, path, ".git")):
            code, out, _ = git.run(os.path.join(top, path), ["rev-parse", "-q", "--verify",
                                                             "HEAD"])
            checked_out = gitparse.text(out).strip() if code == 0 else None
        facts[path] = {"recorded": recorded.get(path), "checked_out": checked_out,
                       "initialized": checked_out is not None,
                       "modified": state[2:3] == "M", "untracked": state[3:4] == "U"}
    return facts


# ---- reflog -----------------------------------------------------------------------------------

def read_reflog(git_dir: str, limit: int) -> Tuple[List[Dict[str, Any]], bool]:
    """The file holds the old sha too, which `git log -g` cannot print; no process needed."""
    try:
        lines, older = tail_lines(os.path.join(git_dir, "logs", "HEAD"), limit)
    except OSError:  # logging turned off (core.logAllRefUpdates=false) or a reftable repo
        return [], False
    return gitparse.parse_reflog(lines), older


def tail_lines(path: str, count: int) -> Tuple[List[bytes], bool]:
    """The last `count` lines of a file, and whether older lines exist before them."""
    with open(path, "rb") as handle:
        end = handle.seek(0, os.SEEK_END)
        block = 1 << 15
        while True:
            start = max(0, end - block)
            handle.seek(start)
            lines = [line for line in handle.read(end - start).split(b"\n") if line]
            if start > 0 and len(lines) > count:
                return lines[-count:], True  # lines[0] may be cut: it is never returned
            if start == 0:
                return lines[-count:] if count else [], len(lines) > count
            block *= 4


# ---- stashes ----------------------------------------------------------------------------------

def start_stash_patches(git: Git, top: str, stashes: Dict[str, Dict[str, Any]],
                        settings: Dict[str, Any],
                        pool: ThreadPoolExecutor) -> Dict[str, "Future[Stream]"]:
    """What `git stash show -p --include-untracked --binary` prints, on any git version.

    The stash commit against its first parent is the worktree change; its third parent, when
    present, is a root commit holding the untracked files, shown whole by --root.
    """
    wanted = list(stashes.items())[:int(settings["max_stash_patches"])]
    futures = {}
    for ref, stash in wanted:
        revs = [stash["sha"]] + ([stash["sha"] + "^3"] if stash["has_untracked"] else [])
        args = ["log", "--no-walk=unsorted", "-m", "--first-parent", "--root", "-p",
                "--format="] + PATCH_FLAGS + revs + ["--"]
        futures[ref] = pool.submit(git.stream, top, args, int(settings["max_patch_bytes"]),
                                   True)
    return futures


def finish_stashes(stashes: Dict[str, Dict[str, Any]],
                   patches: Dict[str, "Future[Stream]"]) -> Dict[str, Dict[str, Any]]:
    for ref, stash in stashes.items():
        if ref not in patches:
            stash["patch_skipped"] = "beyond max_stash_patches"
            continue
        stream = patches[ref].result()
        if stream.code != 0:
            stash["patch_error"] = first_line(stream.stderr)
        else:
            stash["patch"] = blob_of_stream(stream)
    return stashes


def blob_of_stream(stream: Stream) -> Dict[str, Any]:
    """The kept text, and for a patch its files measured over the whole stream, which stay
    true when the text is cut at the cap."""
    truncated = stream.size > len(stream.head)
    blob = gitparse.encode_blob(stream.head, stream.size, stream.sha256, truncated)
    if stream.files and stream.files["files_total"]:  # an empty patch stays as it always was
        blob.update(stream.files)
    return blob


# ---- uncommitted work -------------------------------------------------------------------------

def uncommitted_facts(git: Git, top: str, status: Dict[str, Any], patch: Stream,
                      staged: Stream, settings: Dict[str, Any]) -> Dict[str, Any]:
    """Staged + unstaged as one patch against HEAD, the staged part alone (so a restore puts
    the index back as it was, not everything staged), and the untracked files beside it."""
    if status["head"] is None:  # no commit yet: everything is new relative to the empty tree
        patch = git.stream(top, ["diff", empty_tree(git, top)] + PATCH_FLAGS + ["--"],
                           int(settings["max_patch_bytes"]), True)
    blob = blob_or_error(patch)
    untracked_paths: List[bytes] = status["untracked"]
    untracked = untracked_facts(top, untracked_paths, settings)
    return {"dirty": bool(status["tracked"] or untracked_paths), "tracked": status["tracked"],
            "patch": blob, "staged": blob_or_error(staged), "untracked": untracked,
            "untracked_count": len(untracked_paths),
            "untracked_truncated": len(untracked_paths) > len(untracked),
            "digest": gitparse.uncommitted_digest(blob.get("sha256", ""), untracked)}


def blob_or_error(stream: Stream) -> Dict[str, Any]:
    return blob_of_stream(stream) if stream.code == 0 else {"error": first_line(stream.stderr)}


def empty_tree(git: Git, top: str) -> str:
    """The empty tree's id differs between sha1 and sha256 repositories: ask git."""
    out = checked(git.run(top, ["hash-object", "-t", "tree", "--stdin"]), "hash-object")
    return gitparse.text(out).strip()


class Budget:
    """Bytes left for kept file contents and for hashing, shared by all untracked files."""

    def __init__(self, content: int, hashing: int) -> None:
        self.content = content
        self.hashing = hashing


def untracked_facts(top: str, paths: List[bytes],
                    settings: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    budget = Budget(int(settings["max_patch_bytes"]), int(settings["max_hash_bytes"]))
    root = os.fsencode(top)
    return {escaped(raw): file_facts(os.path.join(root, raw), budget)
            for raw in paths[:int(settings["max_untracked"])]}


def file_facts(path: bytes, budget: Budget) -> Dict[str, Any]:
    try:
        info = os.lstat(path)
    except OSError as exc:  # deleted between status and now
        return {"error": exc.strerror or str(exc)}
    if os.path.islink(path):
        return {"symlink": escaped(os.readlink(path))}
    if not os.path.isfile(path):  # an untracked nested repository shows as a directory
        return {"bytes": None, "content_skipped": "not a regular file"}
    if info.st_size <= budget.content:
        return small_file_facts(path, budget)
    facts: Dict[str, Any] = {"bytes": info.st_size, "content_skipped": "over cap"}
    if info.st_size <= budget.hashing:
        budget.hashing -= info.st_size
        facts["sha256"] = sha256_file(os.fsdecode(path))
    else:  # too big to hash within the budget: its mtime at least shows it was rewritten
        facts["sha256"] = None
        facts["hash_skipped"] = "over max_hash_bytes"
        facts["mtime_ns"] = info.st_mtime_ns
    return facts


def small_file_facts(path: bytes, budget: Budget) -> Dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            data = handle.read(budget.content + 1)
    except OSError as exc:
        return {"error": exc.strerror or str(exc)}
    import hashlib

    facts: Dict[str, Any] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    if b"\0" in data or gitparse.utf8_text(data, False) is None:
        facts["content_skipped"] = "binary"
        return facts
    budget.content -= len(data)
    blob = gitparse.blob_of(data, escaped(path))
    facts["content"] = blob["text"]
    if blob.get("redacted"):
        facts["redacted"] = True
    return facts
