"""The checkout during a bisect: the user's work stashed, one commit at a time, put back.

Entering stashes the user's work (untracked files included, with a message that says where
HEAD was) and remembers HEAD and its branch. `visit` moves to a commit, first undoing what
the last visit added (the re-applied patch, with `git apply -R`, which is exact because the
tree was clean under it) and stashing anything the benchmark left behind. Leaving, whatever
happened (an error, Ctrl-C), undoes the patch, checks the old HEAD out and pops the user's
stash. Nothing here resets or cleans: whatever is in the way goes into a stash.

Git commands run with SIGINT held back: a git killed mid-checkout leaves `index.lock` and a
half-written tree. Ctrl-C lands between git commands, or while the benchmark runs.
"""
from __future__ import annotations

from types import TracebackType
from typing import Callable

from envsnap.errors import HostError
from envsnap.hostops.git import (
    GitFailure,
    checkout,
    complaint,
    current_branch,
    head,
    porcelain,
    run,
    stash_changes,
    stash_ref,
)
from envsnap.hostops.patch import Patch, apply, remove, take_out, upload
from envsnap.hostops.shell import Shell
from envsnap.hostops.signals import sigint_deferred
from envsnap.text import plural


class Tree:
    """`with Tree(shell, top, patch, message, note) as tree:` ... `tree.visit(sha)` ..."""

    def __init__(self, shell: Shell, top: str, patch: Patch | None, message: str,
                 note: Callable[[str], None], keep_untracked: bool = False) -> None:
        self.shell, self.top, self.patch, self.message, self.note = shell, top, patch, message, note
        self.keep_untracked = keep_untracked
        self.untracked_stashed = 0
        self.branch: str | None = None
        self.head: str | None = None
        self.stash: str | None = None
        self.quoted: str | None = None     # the patch, uploaded once
        self.at: str | None = None         # the commit the last visit checked out
        self.applied = False
        self.leftovers: list[str] = []     # stashes of what the benchmark left in the tree

    def __enter__(self) -> Tree:
        try:
            with sigint_deferred():
                self.branch = current_branch(self.shell, self.top)
                self.head = head(self.shell, self.top)
                self.stash_work()
                if self.patch is not None and self.patch.data:
                    self.quoted = upload(self.shell, self.patch)
        except BaseException as exc:   # `with` calls __exit__ only once __enter__ returned
            self.__exit__(type(exc), exc, exc.__traceback__)
            raise
        return self

    def stash_work(self) -> None:
        entries = porcelain(self.shell, self.top)
        untracked = 0 if self.keep_untracked else sum(e.startswith("??") for e in entries)
        self.stash = stash_changes(self.shell, self.top, self.message, not self.keep_untracked)
        if self.stash:
            self.untracked_stashed = untracked
            changed = plural(len(entries) - untracked, "changed file")
            kept = "" if self.keep_untracked else f" and {plural(untracked, 'untracked file')}"
            self.note(f"{self.top}: stashed {changed}{kept} as {self.stash[:12]} "
                      f"({self.message!r}); put back at the end, or by hand: "
                      f"git -C {self.top} stash apply --index {self.stash[:12]}")

    def visit(self, sha: str) -> str | None:
        """Check `sha` out (and re-apply the patch): None when ready, else why to skip it."""
        if self.at == sha:
            return None
        with sigint_deferred():
            self.put_away()
            checkout(self.shell, self.top, sha)
            self.at = sha
            if self.quoted is None or self.patch is None:
                return None
            try:
                apply(self.shell, self.top, self.patch, self.quoted)
            except GitFailure as exc:
                return f"the good snapshot's patch does not apply here: {exc}"
            self.applied = True
        return None

    def put_away(self) -> None:
        """Undo the patch; stash whatever else the benchmark changed, so checkout can move."""
        if self.applied and self.quoted is not None:
            problem = take_out(self.shell, self.top, self.quoted)
            if problem:
                self.note(f"{self.top}: could not take the patch back out "
                          f"({problem}): it goes into a stash instead")
        self.applied = False
        # Only changes to tracked files block a checkout; new files the benchmark wrote (logs,
        # results) stay, as they would after running it by hand.
        if any(not entry.startswith("??") for entry in porcelain(self.shell, self.top)):
            self.stash_leftovers()

    def stash_leftovers(self) -> None:
        where = (self.at or "HEAD")[:12]
        message = f"envsnap bisect: changes the benchmark made at {where}"
        kept = stash_changes(self.shell, self.top, message, untracked=False)
        if kept:
            self.leftovers.append(kept)
            self.note(f"{self.top}: the benchmark changed tracked files at {where}: kept in "
                      f"stash {kept[:12]} ({message!r})")

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        with sigint_deferred():
            problems = self.put_back()
            if self.quoted is not None:
                try:
                    remove(self.shell, self.quoted)
                except HostError:
                    pass   # a temp file under ~/.cache/envsnap/tmp: not worth failing for
        if problems:
            said = "interrupted, and " if isinstance(error, KeyboardInterrupt) else ""
            raise HostError(f"{self.top}: bisect {said}could not put everything back: "
                            + "; ".join(problems)) from error

    def put_back(self) -> list[str]:
        """Every step is tried, whatever failed before it; what failed comes back as text."""
        problems = []
        for step in (self.put_away, self.checkout_back, self.pop_stash):
            try:
                step()
            except (GitFailure, HostError) as exc:
                problems.append(str(exc))
        return problems

    def checkout_back(self) -> None:
        if self.head is None:
            return
        checkout(self.shell, self.top, self.head, self.branch or "")
        self.at = None
        where = f"{self.branch} at {self.head[:12]}" if self.branch else self.head[:12]
        self.note(f"{self.top}: HEAD back to {where}")

    def pop_stash(self) -> None:
        if not self.stash:
            return
        ref = stash_ref(self.shell, self.top, self.stash)
        if ref is None:
            raise GitFailure(f"stash {self.stash[:12]} with your work is gone from the stash "
                             f"list: git -C {self.top} stash apply --index {self.stash[:12]}")
        popped = run(self.shell, self.top, "stash", "pop", "--index", "-q", ref)
        if popped.exit_code != 0:   # staged and unstaged cannot be told apart again: merge them
            popped = run(self.shell, self.top, "stash", "pop", "-q", ref)
        if popped.exit_code != 0:
            raise GitFailure(f"your work is safe in {ref} ({self.stash[:12]}) but did not pop "
                             f"back ({complaint(popped)}): git -C {self.top} stash pop {ref}")
        self.note(f"{self.top}: your work is back (stash {self.stash[:12]} popped)")
