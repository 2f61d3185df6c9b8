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


def test_the_readme_stays_short() -> None:
    """The README is read in minutes; the rest is the guide's."""
    lines = len((ROOT / "README.md").read_text().splitlines())
    assert lines <= 150, f"README.md has {lines} lines: move the detail to docs/guide/"


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
    return {anchor(line.lstrip("#")) for line in path.read_text().splitlines()
            if line.startswith("#")}


def anchor(title: str) -> str:
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


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


# A pointer from the package (a message, a help text, a docstring, a comment) to the docs:
# a README or a page of docs/ (docs/guide/*.md, docs/STORY.md...), then the section when one
# is named: `#anchor`, `, "Title"`, or `README: Title`. Lower-case docs/x.md paths are
# sglang's (the demo's commits, hot-path examples), not ours.
POINTER = re.compile(r'((?:[\w-]+/)*README\.md|docs/(?:guide/[a-z-]+|[A-Z]+)\.md|\bREADME\b)'
                     r'(?:#([\w-]+)|,\s+"([^"]+)"|: ([A-Z][\w-]*(?: [A-Z][\w-]*)*))?')
SOURCE_SUFFIXES = (".py", ".md", ".yml", ".yaml", ".txt")


def source_pointers() -> list[tuple[str, Path, str | None]]:
    """(where, the file it names, the section's anchor or None) for each pointer in envsnap/."""
    found = []
    for path in sorted((ROOT / "envsnap").rglob("*")):
        if path.suffix not in SOURCE_SUFFIXES or "__pycache__" in path.parts:
            continue
        text = path.read_text()
        for match in POINTER.finditer(text):
            name, hashed, quoted, titled = match.groups()
            named = "README.md" if name == "README" else name
            target = ROOT / named   # from the repository's root, else beside the file
            if not target.exists() and (path.parent / named).exists():
                target = path.parent / named
            section = hashed or (anchor(quoted or titled) if quoted or titled else None)
            where = f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 1}"
            found.append((f"{where}: {match.group(0)}", target, section))
    return found


def test_every_pointer_of_the_source_to_the_docs_leads_somewhere() -> None:
    """A message or docstring that sends the reader to a page names one that exists, and a
    section the page has: the docs move, and a pointer left behind sends people nowhere."""
    pointers = source_pointers()
    assert any(section for _, _, section in pointers), "the pattern finds the pointers"
    broken = [where for where, target, section in pointers
              if not target.is_file() or (section and section not in anchors(target))]
    assert not broken, broken
