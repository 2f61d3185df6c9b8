"""The commands of README.md and docs/guide/*.md, run as a reader would run them.

Every ```console block of those pages is run through the real CLI (git lines through git),
in one sandbox with its own HOME and store, a real sshd on loopback for `root@gpu-box` and
the inventory's hosts, the example snapshots and real git checkouts (tests/helpers/docpages.py
holds the convention and the sandbox). A block marked `# offline` runs where no name lookup
leaves the machine; where that cannot be made, its commands are not run and the page says so
as a skip, after its other commands passed. Each command must exit as its page says, and print
each output line the page shows. The pages run in one module-scoped sandbox, in order,
because a page's commands use what earlier ones made (`good`, `bad`, `hosts.yml`).
"""
from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ROOT
from helpers.docpages import Command, Page, make_sandbox, missing_lines, pages, read_page
from helpers.offline import offline_available
from helpers.sshd import start_sshd

# One worker builds the sandbox and runs every page (tests/run.sh: --dist loadgroup).
pytestmark = pytest.mark.xdist_group("docs")

Ran = list[tuple[Command, subprocess.CompletedProcess[str]]]
PAGES = [read_page(path) for path in pages()]


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, Ran]]]:
    """Every page's commands, run once, in page order; what each printed and its exit code."""
    root = tmp_path_factory.mktemp("docs")
    sshd = start_sshd(root / "sshd")
    try:
        sandbox = make_sandbox(root, sshd)
        results: dict[str, Ran] = {}
        for page in PAGES:
            sandbox.write(page.files)
            results[page.name] = [(command, sandbox.run(command)) for command in page.commands
                                  if runnable(command)]
        yield sandbox.home, results
    finally:
        sshd.stop()


def runnable(command: Command) -> bool:
    return not command.offline or offline_available() is None


def test_every_page_of_the_guide_has_commands_that_run() -> None:
    """A page of the guide starts with its commands: each holds some, and the convention holds
    README.md to it too."""
    empty = [page.name for page in PAGES
             if page.name != "docs/guide/README.md" and not page.commands]
    assert not empty, f"pages without a ```console block: {empty}"


@pytest.mark.ssh
@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_page_commands_exit_and_print_as_shown(page: Page,
                                               ran: tuple[Path, dict[str, Ran]]) -> None:
    home, results = ran
    failures = []
    for command, result in results[page.name]:
        printed = result.stdout + "\n" + result.stderr
        where = f"{command.page}:{command.line}: {' '.join(command.argv)}"
        if result.returncode != command.exit_code:
            failures.append(f"{where}: exit {result.returncode}, the page says "
                            f"{command.exit_code}\n{printed}")
        missing = missing_lines(command, printed, home)
        if missing:
            failures.append(f"{where}: not printed: {missing}\n{printed}")
    assert not failures, "\n\n".join(failures)
    not_run = [command for command in page.commands if not runnable(command)]
    if not_run:
        pytest.skip(f"{len(not_run)} `# offline` command(s) not run: no offline namespace "
                    f"({offline_available()})")


LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(path: Path) -> set[str]:
    """GitHub's ids of a page's headings: lower case, punctuation dropped, spaces as dashes."""
    return {re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
            for line in path.read_text().splitlines() if line.startswith("#")}


def test_every_relative_link_of_the_pages_leads_somewhere() -> None:
    broken = []
    for path in pages():
        for target in LINK.findall(path.read_text()):
            if "://" in target:
                continue
            file, _, anchor = target.partition("#")
            linked = (path.parent / file).resolve() if file else path
            if not linked.exists() or (anchor and linked.suffix == ".md"
                                       and anchor not in anchors(linked)):
                broken.append(f"{path.relative_to(ROOT)}: {target}")
    assert not broken, broken
