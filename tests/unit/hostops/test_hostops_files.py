"""hostops' files on real folders: the write policy (treefile), plain files, sitecustomize."""
from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest
from helpers.pythons import venv_with_own_sitecustomize

from envsnap.errors import HostError
from envsnap.hostops import files, site, treefile
from envsnap.hostops.shell import HostShell, quote_path, upload
from envsnap.hosts.inventory import Host
from envsnap.hosts.transport import LocalTransport


def local(python: str = "python3") -> HostShell:
    host = Host(name="local", vars={"python": python})
    return HostShell(host, LocalTransport(host))


@pytest.fixture
def shell() -> HostShell:
    return local()


def test_upload_lands_in_a_private_temp_file_under_home(shell: HostShell,
                                                        isolated_home: Path) -> None:
    path = upload(shell, b"\x00data", "patch", ".diff")
    assert path.startswith("~/.cache/envsnap/tmp/patch-") and path.endswith(".diff")
    assert (isolated_home / path[2:]).read_bytes() == b"\x00data"
    assert quote_path(path) == f"\"$HOME\"/{path[2:]}"


def test_a_write_backs_up_what_it_replaces_and_put_back_undoes_it(shell: HostShell,
                                                                  tmp_path: Path) -> None:
    root = tmp_path / "tree"
    (root / "src").mkdir(parents=True)
    (root / "src" / "old.py").write_bytes(b"OLD\n")
    os.chmod(root / "src" / "old.py", 0o750)
    backup = treefile.backup_dir("pre-restore-test")
    assert treefile.write(shell, str(root), "src/old.py", b"NEW\n", backup) == "updated"
    assert treefile.write(shell, str(root), "src/new.py", b"MADE\n", backup,
                          record_absent=True) == "created"
    assert treefile.write(shell, str(root), "src/new.py", b"MADE\n", backup) == "same"
    assert (root / "src" / "old.py").read_bytes() == b"NEW\n"
    assert os.stat(root / "src" / "old.py").st_mode & 0o777 == 0o750   # the old mode kept
    planned = treefile.put_back(shell, str(root), backup, None, dry=True)
    assert (planned.restored, planned.removed) == (["src/old.py"], ["src/new.py"])
    assert (root / "src" / "new.py").exists()                          # dry: nothing moved
    done = treefile.put_back(shell, str(root), backup, None)
    assert (done.restored, done.removed) == (["src/old.py"], ["src/new.py"])
    assert (root / "src" / "old.py").read_bytes() == b"OLD\n"
    assert not (root / "src" / "new.py").exists()


@pytest.mark.parametrize("path, why", [
    ("../outside.py", "'..' in the path"),
    ("/etc/passwd", "absolute, outside the folder"),
    (".git/config", "under .git"),
    ("sub/.GIT/hooks/post-checkout", "under .git"),
    ("link/escape.py", "is a symlink or a file, not a folder"),
])
def test_the_policy_refuses_paths_that_leave_the_root(shell: HostShell, tmp_path: Path,
                                                      path: str, why: str) -> None:
    root, outside = tmp_path / "tree", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "link").symlink_to(outside)
    with pytest.raises(treefile.TreeRefused, match=why.replace("(", "\\(").replace(")", "\\)")):
        treefile.write(shell, str(root), path, b"x\n", None)
    assert list(outside.iterdir()) == [] and not (tmp_path / "outside.py").exists()


def test_reading_through_a_last_symlink_only_when_asked(shell: HostShell,
                                                        tmp_path: Path) -> None:
    root = tmp_path / "tree"
    root.mkdir()
    (tmp_path / "real.py").write_bytes(b"REAL\n")
    (root / "site.py").symlink_to(tmp_path / "real.py")
    assert treefile.read(shell, str(root), "site.py", follow_last=True).data == b"REAL\n"
    with pytest.raises(treefile.TreeRefused, match="is a symlink"):
        treefile.read(shell, str(root), "site.py")


def test_a_plain_file_is_written_atomically_with_a_stamped_backup(shell: HostShell,
                                                                  tmp_path: Path) -> None:
    target = tmp_path / "etc" / "app.conf"
    assert files.read_file(shell, str(target)).kind == "absent"
    assert files.read_file(shell, str(tmp_path)).kind == "other"
    assert files.write_file(shell, str(target), b"one\n", mode="640") == ""
    assert files.read_file(shell, str(target)) == files.FileState("file", b"one\n", "640")
    saved = files.write_file(shell, str(target), b"two\n", stamp="20260101-000000")
    assert saved == f"{target}.envsnap-backup-20260101-000000"
    assert Path(saved).read_bytes() == b"one\n" and target.read_bytes() == b"two\n"
    assert files.read_file(shell, str(target)).mode == "640"   # the new file took the old mode
    assert files.write_file(shell, str(target), b"three\n") == ""   # no stamp: no backup
    assert sorted(p.name for p in target.parent.iterdir()) == [
        "app.conf", "app.conf.envsnap-backup-20260101-000000"]


def test_sitecustomize_goes_only_where_the_python_reads_it() -> None:
    found = treefile.SitePython(["/venv/lib/python3.12/site-packages"], None,
                                ["/venv/lib/python3.12/site-packages"], version="3.12")
    assert site.destination(found, "/venv/lib/python3.12/site-packages/sitecustomize.py") == \
        ("/venv/lib/python3.12/site-packages", "")
    folder, note = site.destination(found, "/home/ann/venv/site-packages/sitecustomize.py")
    assert folder == "/venv/lib/python3.12/site-packages" and "this python loads" in note
    with pytest.raises(site.SiteRefused, match="not written; restore it by hand"):
        site.destination(found, "/home/ann/.bashrc")
    assert site.folders(found) == ["/venv/lib/python3.12/site-packages"]


def test_a_host_wide_sitecustomize_is_written_only_when_named() -> None:
    """Debian's: the stdlib one, a link into /etc, before the venv's site-packages."""
    debian = treefile.SitePython(["/venv/lib/python3.12/site-packages"],
                                 "/usr/lib/python3.12/sitecustomize.py",
                                 ["/venv/lib/python3.12/site-packages"],
                                 "/etc/python3.12/sitecustomize.py", False, "3.12", True)
    with pytest.raises(site.SiteRefused, match=r"the venv's own .* would be shadowed by "
                       r"/usr/lib/python3.12/sitecustomize.py \(-> /etc/python3.12/"
                       r"sitecustomize.py\): it would never run; not written: ways that work: "
                       r"a .pth startup line.*host-wide: loaded by every python3.12 on this host"):
        site.destination(debian, "/venv/lib/python3.12/site-packages/sitecustomize.py")
    with pytest.raises(site.SiteRefused, match="--host-wide writes it"):
        site.destination(debian, "/usr/lib/python3.12/sitecustomize.py")
    folder, note = site.destination(debian, "/usr/lib/python3.12/sitecustomize.py",
                                    host_wide=True)
    assert folder == "/etc/python3.12" and "host-wide: loaded by every python3.12" in note
    # the same stdlib file after the venv's folder (a .pth put it first): the venv's runs
    ordered = replace(debian, shadows_own=False)
    assert site.destination(ordered, "/venv/lib/python3.12/site-packages/sitecustomize.py") \
        == ("/venv/lib/python3.12/site-packages", "")
    # a python that is no venv: all of it is host-wide
    system = treefile.SitePython(["/usr/local/lib/python3.12/dist-packages"], None,
                                 version="3.12")
    with pytest.raises(site.SiteRefused, match=r"is not in a venv \(host-wide"):
        site.destination(system, "/usr/local/lib/python3.12/dist-packages/sitecustomize.py")


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    """A python of its own, so its sitecustomize is this test's to write (and the one that
    runs, on Debian's python too)."""
    folder = tmp_path / "venv"
    venv_with_own_sitecustomize(folder)
    return folder


def test_sitecustomize_written_then_put_back_as_it_was(venv: Path, isolated_home: Path) -> None:
    shell = local(str(venv / "bin" / "python"))
    site_dirs = treefile.site_python(shell).site_dirs
    (packages,) = [folder for folder in site_dirs if folder.startswith(str(venv))]
    recorded = f"{packages}/sitecustomize.py"
    backup = treefile.backup_dir("explain-test")
    planned = site.write(shell, b"import os\n", recorded, backup, dry=True)
    assert planned.path == recorded and planned.before == files.FileState("absent")
    assert not Path(recorded).exists()
    done = site.write(shell, b"import os\n", recorded, backup)
    assert Path(recorded).read_bytes() == b"import os\n" and done.before is not None
    assert site.write(shell, b"import os\n", recorded, backup).before is None   # as wanted
    restored, removed = site.put_back(shell, backup, None)
    assert (restored, removed) == ([], [recorded]) and not Path(recorded).exists()
    assert (isolated_home / backup[2:]).is_dir()
    treefile.drop_backup(shell, backup)
    assert not (isolated_home / backup[2:]).exists()


def test_sitecustomize_through_a_symlinked_folder_is_refused(venv: Path,
                                                             tmp_path: Path) -> None:
    shell = local(str(venv / "bin" / "python"))
    (packages,) = [folder for folder in treefile.site_python(shell).site_dirs
                   if folder.startswith(str(venv))]
    elsewhere = tmp_path / "elsewhere.py"
    elsewhere.write_bytes(b"theirs\n")
    Path(packages, "sitecustomize.py").symlink_to(elsewhere)
    with pytest.raises(site.SiteRefused, match="sitecustomize refused: .* is a symlink"):
        site.write(shell, b"mine\n", f"{packages}/sitecustomize.py", None)
    assert elsewhere.read_bytes() == b"theirs\n"


@pytest.mark.parametrize("answer", ['{"states": {"a.py": "x"}}', '{"states": ["a.py"]}', "[]"])
def test_a_host_answer_of_wrong_shape_is_one_host_error(tmp_path: Path, answer: str) -> None:
    """The host python's answer is read once, where it arrives: each file's state must be an
    object before anything reads its fields."""
    python = tmp_path / "python-answers"
    python.write_text(f"#!/bin/sh\necho '{answer}'\n")
    python.chmod(0o755)
    with pytest.raises(HostError, match=r"^local: unreadable answer from the host's python"):
        treefile.read_many(local(str(python)), str(tmp_path), ["a.py"])
