from __future__ import annotations

import io
import os
import subprocess
import sys
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from envsnap.hosts import payload


def clear_caches() -> None:
    for cached in (payload.read_once, payload.zipped_agent, payload.files_digest):
        cached.cache_clear()


def test_payload_is_deterministic_and_complete() -> None:
    clear_caches()
    first, digest = payload.build_payload()
    clear_caches()
    second, again = payload.build_payload()
    assert first == second and digest == again == payload.agent_digest()
    names = zipfile.ZipFile(io.BytesIO(first)).namelist()
    assert "__main__.py" in names and "envsnap/agent/runner.py" in names
    assert "pynvml.py" in names      # vendored from nvidia-ml-py


def test_the_digest_is_known_without_zipping() -> None:
    """A capture of a host that has the agent cached (all but the first) only names it."""
    clear_caches()
    digest = payload.agent_digest()
    assert payload.zipped_agent.cache_info().currsize == 0
    assert payload.build_payload()[1] == digest


def install_and_run(home: Path) -> tuple[subprocess.CompletedProcess[str], str, str]:
    """Upload the payload into `home` as SFTP would, then unpack and run it as the host does:
    (the result, the payload's digest, the uploaded zip's path)."""
    data, digest = payload.build_payload()
    (home / payload.CACHE_DIR).mkdir(parents=True, exist_ok=True)
    uploaded = payload.zip_path(digest)
    (home / uploaded).write_bytes(data)
    command = payload.install_and_run_command(sys.executable, digest, uploaded,
                                              {"collectors": ["system"]})
    result = subprocess.run(["sh", "-c", command], env={"HOME": str(home)},
                            capture_output=True, text=True, timeout=60)
    return result, digest, uploaded


def test_shipped_agent_runs_from_its_unpacked_folder(tmp_path: Path) -> None:
    result, digest, uploaded = install_and_run(tmp_path)
    assert result.returncode == 0, result.stderr
    assert '"system"' in result.stdout
    assert (tmp_path / payload.agent_dir(digest) / "__main__.py").exists()
    assert not (tmp_path / uploaded).exists()

    again = subprocess.run(["sh", "-c", payload.run_command(sys.executable, digest, {})],
                           env={"HOME": str(tmp_path)}, capture_output=True, text=True)
    assert again.returncode == 0 and '"hostname"' in again.stdout


def test_missing_payload_asks_to_be_shipped(tmp_path: Path) -> None:
    command = payload.run_command(sys.executable, "0" * 16, {})
    result = subprocess.run(["sh", "-c", command], env={"HOME": str(tmp_path)})
    assert result.returncode == payload.PAYLOAD_MISSING_EXIT


def test_installing_clears_agents_unused_for_a_month(tmp_path: Path) -> None:
    cache = tmp_path / payload.CACHE_DIR
    old, recent = cache / "agent-0000000000000000", cache / "agent-1111111111111111"
    for folder in (old, recent):
        (folder / "envsnap").mkdir(parents=True)
    month_ago = time.time() - 31 * 86400
    os.utime(old, (month_ago, month_ago))
    result, _, _ = install_and_run(tmp_path)
    assert result.returncode == 0, result.stderr
    assert not old.exists() and recent.exists()


def test_workers_asking_at_once_build_the_payload_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fleet capture's workers all ask for the payload as they start: one builds it."""
    clear_caches()
    built = []
    files = payload.payload_files

    def counted() -> dict[str, bytes]:
        built.append(1)
        time.sleep(0.05)   # long enough for every worker to ask while the first builds
        return files()
    monkeypatch.setattr(payload, "payload_files", counted)
    with ThreadPoolExecutor(max_workers=8) as pool:
        digests = {digest for _, digest in pool.map(lambda _: payload.build_payload(), range(8))}
        digests |= set(pool.map(lambda _: payload.agent_digest(), range(8)))
    clear_caches()
    assert len(digests) == 1 and len(built) == 1
