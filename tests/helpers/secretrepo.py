"""A git checkout whose remote URL holds a token, which no snapshot may keep
(tests/cli/test_capture_cli.py, tests/e2e/test_ansible_collection.py)."""
from __future__ import annotations

import subprocess
from pathlib import Path

SECRET = "hf_" + "S3cr3tT0kenValue" * 3


def make_repo(path: Path) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@x", "HOME": str(path.parent), "PATH": "/usr/bin:/bin"}
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True, env=env)
    (path / "pynccl.py").write_text("ALGO = 'Ring'\n")
    subprocess.run(["git", "-C", str(path), "add", "."], check=True, env=env)
    subprocess.run(["git", "-C", str(path), "commit", "-qm", "first"], check=True, env=env)
    subprocess.run(["git", "-C", str(path), "remote", "add", "origin",
                    f"https://bob:{SECRET}@example.invalid/sglang.git"], check=True, env=env)
    return subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()
