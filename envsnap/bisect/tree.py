"""The checkout during a bisect: the user's work stashed, one commit at a time, put back.

Entering stashes the user's work (untracked files included, with a message that says where
HEAD was) and remembers HEAD and its branch. `visit` moves to a commit, first undoing what
the last visit added (the re-applied patch, with `git apply -R`, which is exact because the
tree was clean under it) and stashing anything the benchmark left behind. Leaving, whatever
happened (an error, Ctrl-C), undoes the patch, checks the old HEAD out and pops the user's
stash. Nothing here resets or cleans: whatever is in the way goes into a stash.

What the benchmark writes into the checkout (bytecode, a results file) is told apart from the
user's own untracked and ignored files by their content, recorded on entry (workfiles.py):
on the way out it is moved aside into a folder kept on the host, so it never blocks the
checkout or the stash coming back, and the user's files that stayed in place get their
content back. A put-back that stops short after a complete run raises PutBackError, with
what is left and the commands that finish it.

Git commands run with SIGINT held back: a git killed mid-checkout leaves `index.lock` and a
half-written tree. Ctrl-C lands between git commands, or while the benchmark runs.
"""
from __future__ import annotations

import shlex
from types import TracebackType
from typing import Callable

from envsnap.bisect import workfiles
from envsnap.errors import HostError, PutBackError
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
                 note: Callable[[str], None], keep_untracked: bool = False,
                 command: str = "bisect") -> None:
        self.shell, self.top, self.patch, self.message, self.note = shell, top, patch, message, note
        self.keep_untracked, self.command = keep_untracked, command
        self.recorded: workfiles.Recorded | None = None   # the user's files, before any move
        self.aside = workfiles.Aside(shell, top, command)
        self.popped = False
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
                self.recorded = workfiles.record(self.shell, self.top, not self.keep_untracked)
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
            self.move_to(sha)
            self.at = sha
            if self.quoted is None or self.patch is None:
                return None
            try:
                apply(self.shell, self.top, self.patch, self.quoted)
            except GitFailure as exc:
                return f"the good snapshot's patch does not apply here: {exc}"
            self.applied = True
        return None

    def move_to(self, sha: str, branch: str = "") -> None:
        """Check `sha` out; when files the benchmark wrote are in the way, they are moved
        aside and it is tried once more."""
        try:
            checkout(self.shell, self.top, sha, branch)
        except GitFailure:
            if self.recorded is None or not self.set_aside():
                raise
            checkout(self.shell, self.top, sha, branch)

    def set_aside(self) -> list[str]:
        """The benchmark's files out of the way (workfiles.set_aside): the paths moved."""
        assert self.recorded is not None
        moved = workfiles.set_aside(self.shell, self.top, self.recorded, self.aside)
        if moved:
            shown = ", ".join(moved[:3]) + (" ..." if len(moved) > 3 else "")
            self.note(f"{self.top}: {plural(len(moved), 'file')} the benchmark wrote ({shown}) "
                      f"moved aside to {self.aside.folder}")
        return moved

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
            if self.recorded is not None:
                try:
                    workfiles.drop_marker(self.shell, self.recorded)
                except HostError:
                    pass   # an empty file under ~/.cache/envsnap/tmp: not worth failing for
            if self.quoted is not None:
                try:
                    remove(self.shell, self.quoted)
                except HostError:
                    pass   # a temp file under ~/.cache/envsnap/tmp: not worth failing for
        if problems:
            said = "interrupted, and " if isinstance(error, KeyboardInterrupt) else ""
            what = (f"{self.top}: {self.command} {said}could not put everything back: "
                    + "; ".join(problems))
            finishing = PutBackError(what, tuple(self.finish_commands()))
            if error is None:   # the run was complete: its answer is out, this is the rest
                raise finishing
            raise HostError(str(finishing)) from error

    def put_back(self) -> list[str]:
        """Every step is tried, whatever failed before it; what failed comes back as text."""
        problems = []
        for step in (self.put_away, self.checkout_back, self.clear_benchmark_files,
                     self.restore_own, self.pop_stash):
            try:
                step()
            except (GitFailure, HostError) as exc:
                problems.append(str(exc))
        return problems

    def finish_commands(self) -> list[str]:
        """The commands that finish what the put-back left, in order: the benchmark's files
        that could not be moved aside kept in a tar file and taken out of the way, HEAD (and
        branch) back, then the user's stash popped."""
        git = f"git -C {shlex.quote(self.top)}"
        keep = self.aside.finish_command()
        commands = [keep] if keep else []
        if self.at is not None and self.head is not None:
            commands.append(f"{git} checkout {self.branch or self.head}")
        if self.stash and not self.popped:
            ref = stash_ref(self.shell, self.top, self.stash) or self.stash
            commands.append(f"{git} stash pop --index {ref}" if ref != self.stash
                            else f"{git} stash apply --index {self.stash}")
        return commands

    def clear_benchmark_files(self) -> None:
        if self.recorded is not None:
            self.set_aside()

    def restore_own(self) -> None:
        """The user's files that stayed in place, with the content they had."""
        if self.recorded is None:
            return
        moved = self.aside.moved
        problems, back = workfiles.restore_own(self.shell, self.top, self.recorded, self.aside)
        if back:
            kept = f" (its versions moved aside to {self.aside.folder})" \
                if self.aside.moved > moved else ""
            self.note(f"{self.top}: {plural(len(back), 'file')} of yours the benchmark changed "
                      f"written back as they were ({', '.join(back[:3])}"
                      f"{' ...' if len(back) > 3 else ''}){kept}")
        if problems:
            raise GitFailure("; ".join(problems))

    def checkout_back(self) -> None:
        if self.head is None:
            return
        self.move_to(self.head, self.branch or "")
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
        in_the_way = workfiles.in_the_way(self.shell, self.top, self.stash)
        if in_the_way:   # git would restore the others, then stop: half a pop, never
            shown = ", ".join(in_the_way[:5]) + (" ..." if len(in_the_way) > 5 else "")
            raise GitFailure(f"your work is safe in {ref} ({self.stash[:12]}), not popped: "
                             f"files of the same names are in the way ({shown})")
        popped = run(self.shell, self.top, "stash", "pop", "--index", "-q", ref)
        if popped.exit_code != 0:   # staged and unstaged cannot be told apart again: merge them
            popped = run(self.shell, self.top, "stash", "pop", "-q", ref)
        if popped.exit_code != 0:
            raise GitFailure(f"your work is safe in {ref} ({self.stash[:12]}) but did not pop "
                             f"back ({complaint(popped)})")
        self.popped = True
        self.note(f"{self.top}: your work is back (stash {self.stash[:12]} popped)")
