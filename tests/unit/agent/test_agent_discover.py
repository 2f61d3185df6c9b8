"""agent/discover.py's pieces on real files: the script a python command line runs, the
work tree a path lies in (a `.git` folder or a linked worktree's `.git` file), a venv's
interpreter named as the venv's, and site-packages found from an interpreter's path."""
from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from envsnap.agent.discover import interpreter_of, script_of, site_dirs_of, work_tree_of


@pytest.mark.parametrize(("argv", "script"), [
    (["python3", "serve.py", "--port", "1"], "serve.py"),
    (["python3", "-u", "-X", "dev", "/srv/app/main.py"], "/srv/app/main.py"),
    (["python3", "-m", "sglang.launch_server"], None),
    (["python3", "-c", "import time"], None),
    (["python3"], None),
])
def test_the_script_a_command_line_runs(argv: list[str], script: str | None) -> None:
    assert script_of(argv) == script


def test_the_work_tree_a_path_lies_in(tmp_path: Path) -> None:
    main, linked, none = tmp_path / "main", tmp_path / "linked", tmp_path / "none"
    (main / ".git").mkdir(parents=True)
    (main / "pkg" / "deep").mkdir(parents=True)
    (main / "pkg" / "deep" / "run.py").write_text("")
    linked.mkdir()
    (linked / ".git").write_text("gitdir: /elsewhere\n")   # a linked worktree's
    none.mkdir()
    seen: dict[str, str | None] = {}
    assert work_tree_of(str(main / "pkg" / "deep" / "run.py"), seen) == str(main)
    assert work_tree_of(str(main / "pkg"), seen) == str(main)          # from what was seen
    assert work_tree_of(str(linked), seen) == str(linked)
    found = work_tree_of(str(none), seen)
    assert found is None or not found.startswith(str(tmp_path))


def test_a_venv_python_is_named_as_the_venvs_and_its_packages_found(tmp_path: Path) -> None:
    venv.EnvBuilder(with_pip=False, symlinks=True).create(tmp_path / "env")
    python = tmp_path / "env" / "bin" / "python3"
    exe = os.path.realpath(python)
    assert interpreter_of([str(python), "serve.py"], exe) == str(python)
    assert interpreter_of(["python3", "serve.py"], exe) == exe   # not a path: the exe
    site = subprocess.run([str(python), "-c", "import site; print(site.getsitepackages()[0])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert site in site_dirs_of(str(python))
    assert site_dirs_of(sys.executable)   # the suite's own interpreter has some
