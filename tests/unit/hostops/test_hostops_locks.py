"""hostops.locks on a real home: one lock per checkout, its holder named, the dead taken over."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from envsnap.errors import HostError
from envsnap.hostops.locks import LOCKS_DIR, CheckoutLocks, LockHolder
from envsnap.hosts.inventory import Host
from envsnap.hosts.transport import LocalTransport


def locks(touched: list[str], wait: float = 0.0) -> CheckoutLocks:
    host = Host(name="local")
    return CheckoutLocks(LocalTransport(host), host, touched, wait, sleep=lambda _s: None)


def lock_folders(home: Path) -> list[Path]:
    folder = home / LOCKS_DIR
    return sorted(folder.iterdir()) if folder.is_dir() else []


def test_a_taken_checkout_is_refused_naming_its_holder(tmp_path: Path,
                                                       isolated_home: Path) -> None:
    checkout = str(tmp_path / "sglang")
    with locks([checkout]):
        (held,) = lock_folders(isolated_home)
        assert held.name.startswith("sglang-") and held.name.endswith(".lock")
        owner = LockHolder.parse((held / "owner").read_text())
        assert owner.pid == os.getpid() and owner.controller == socket.gethostname()
        with pytest.raises(HostError, match=f"holds the lock on {checkout} "
                                            f"\\(pid {os.getpid()} on "):
            with locks([checkout], wait=1.0):
                pass
        assert locks([checkout]).holders() == [(checkout, owner)]
    assert lock_folders(isolated_home) == []          # released on the way out
    assert locks([checkout]).holders() == []


def test_two_checkouts_lock_apart_and_two_spellings_of_one_share_its_lock(
        tmp_path: Path, isolated_home: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    (tmp_path / "alias").symlink_to(one)
    with locks([str(one)]), locks([str(two)]):
        assert len(lock_folders(isolated_home)) == 2
        with pytest.raises(HostError, match=f"holds the lock on {tmp_path / 'alias'}"):
            with locks([str(tmp_path / "alias")]):
                pass


def test_a_lock_left_by_a_dead_envsnap_here_is_taken_over(tmp_path: Path,
                                                          isolated_home: Path) -> None:
    checkout = str(tmp_path / "sglang")
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead = LockHolder(controller=socket.gethostname(), pid=int(gone.stdout), command="envsnap")
    assert dead.is_dead()
    with locks([checkout]):
        (held,) = lock_folders(isolated_home)    # where this checkout's lock lives
    held.mkdir()                                 # ... and a killed envsnap left it there
    (held / "owner").write_text(dead.text() + "\n")
    with locks([checkout]):
        assert LockHolder.parse((held / "owner").read_text()).pid == os.getpid()


def test_the_holder_reads_every_owner_file_it_may_meet() -> None:
    assert LockHolder.parse("gpu-ctl 4242") == LockHolder("gpu-ctl", 4242)
    assert LockHolder.parse("") == LockHolder("?", None)
    assert LockHolder.parse("").describe() == "owner not written yet"
    written = LockHolder("ctl", 7, "envsnap restore good", "2026-01-01T00:00:00+00:00")
    assert LockHolder.parse(written.text()) == written
    assert json.loads(written.text())["command"] == "envsnap restore good"
    assert written.describe() == ("pid 7 on ctl, 'envsnap restore good', since "
                                  "2026-01-01T00:00:00+00:00")
    assert not LockHolder("another-machine", 1).is_dead()   # never taken over from afar
