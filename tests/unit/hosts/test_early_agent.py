"""The agent `capture local` starts early is handed to its capture by hand
(hosts/headstart.py: EarlyAgent, capture()'s `early`): that capture reads it, and a capture
it was not handed to runs its own agent, though it would run the very same command."""
from __future__ import annotations

import io
import subprocess
import zipfile
from pathlib import Path

import yaml

from envsnap.hosts import headstart, payload
from envsnap.hosts.capture import CaptureOptions, capture
from envsnap.hosts.inventory import Host
from envsnap.snapshot.store import Store


def agent_pid(store: Store, label: str) -> int:
    document = yaml.safe_load(store.path_for(label).read_text())
    return int(document["meta"]["agent"]["pid"])


def test_only_the_capture_handed_the_early_agent_reads_it(
        tmp_path: Path, spawned: list[subprocess.Popen[bytes]]) -> None:
    zipped, digest = payload.build_payload()   # cached: the early agent answers at once
    zipfile.ZipFile(io.BytesIO(zipped)).extractall(Path.home() / payload.agent_dir(digest))
    store, local = Store(tmp_path / "store"), [Host("local")]
    with headstart.agent_started_early(local, CaptureOptions()) as early:
        assert early is not None
        [own] = capture(local, store, CaptureOptions(label="own"))
        [handed] = capture(local, store, CaptureOptions(label="handed"), early=early)
    assert own.ok and handed.ok, (own.error, handed.error)
    [agent] = spawned
    assert agent_pid(store, "handed") == agent.pid   # sh exec'd the agent's python
    assert agent_pid(store, "own") != agent.pid

