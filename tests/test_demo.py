"""`envsnap demo`, the README's first command, end to end through the real CLI."""
from __future__ import annotations

import re

from conftest import Cli


def test_demo_tells_the_story_and_cleans_up(cli: Cli) -> None:
    result = cli("demo", timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    assert re.search(r"code moved: 9 commits pulled into .*Fix PCG MoE Error", out)
    assert "verified: checkouts and sitecustomize match the snapshot" in out
    assert "benchmark rerun: same" in out
    assert re.search(r"first bad commit: [0-9a-f]{7,} Fix PCG MoE Error", out), out[-2000:]
    folder = re.search(r"^in (\S+)$", out, re.MULTILINE)
    assert folder is not None
    assert not __import__("pathlib").Path(folder.group(1)).exists()
