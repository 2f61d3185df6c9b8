"""The git collector's pure parsers, on literal git output (including the awkward cases)."""
from __future__ import annotations

import base64
import hashlib
from pathlib import Path

from envsnap.agent import gitparse
from envsnap.agent.git import tail_lines

SHA_A = "a" * 40
SHA_B = "b" * 40


def test_status_branch_headers_and_entries() -> None:
    data = (b"# branch.oid " + SHA_A.encode() + b"\0# branch.head main\0"
            b"# branch.upstream origin/main\0# branch.ab +2 -9\0"
            b"1 .M N... 100644 100644 100644 1111 1111 engine file.py\0"
            b"2 R. N... 100644 100644 100644 2222 2222 R100 new name.py\0old name.py\0"
            b"u UU N... 100644 100644 100644 100644 3333 4444 5555 conflict.py\0"
            b"? caf\xe9.txt\0? dir/notes.txt\0")
    state = gitparse.parse_status(data)
    assert (state["head"], state["branch"], state["upstream"]) == (SHA_A, "main", "origin/main")
    assert (state["ahead"], state["behind"]) == (2, 9)
    assert state["tracked"] == {"engine file.py": ".M", "new name.py": "R.", "conflict.py": "UU"}
    assert state["untracked"] == [b"caf\xe9.txt", b"dir/notes.txt"]


def test_status_detached_and_unborn() -> None:
    detached = gitparse.parse_status(b"# branch.oid " + SHA_A.encode() + b"\0"
                                     b"# branch.head (detached)\0")
    assert (detached["head"], detached["branch"], detached["ahead"]) == (SHA_A, None, None)
    unborn = gitparse.parse_status(b"# branch.oid (initial)\0# branch.head main\0")
    assert (unborn["head"], unborn["branch"]) == (None, "main")


def commit(sha: str, parents: str, subject: str) -> bytes:
    return gitparse.COMMIT_MARK + b"\0".join(
        [sha.encode(), parents.encode(), b"1700000000", b"Ada", subject.encode()]) + b"\0"


def test_history_files_merges_and_odd_names() -> None:
    data = (commit(SHA_A, SHA_B + " " + "c" * 40, "Merge branch 'x'")
            + commit(SHA_B, "c" * 40, "Fix PCG MoE Error") + b"\npynccl.py\0caf\xe9 x.py\0\nlead\0"
            + commit("c" * 40, "", "root") + b"\nREADME.md\0")
    history = gitparse.parse_history(data)
    assert [c["sha"] for c in history] == [SHA_A, SHA_B, "c" * 40]
    assert history[0]["files"] == [] and len(history[0]["parents"]) == 2
    # a name that itself starts with a newline keeps it: only the first file loses one
    assert history[1]["files"] == ["pynccl.py", "caf\\xe9 x.py", "\nlead"]
    assert history[2] == {"sha": "c" * 40, "parents": [], "time": 1700000000, "author": "Ada",
                          "subject": "root", "files": ["README.md"]}


def test_history_subject_with_token_is_redacted() -> None:
    subject = "use ghp_" + "Wq4rT7yU1iO9pA3sD6fG8hJ2kL5zX0cV1bN4"
    entry = gitparse.parse_history(commit(SHA_A, "", subject))[0]
    assert entry["subject"] == "use <secret>"


def test_reflog_lines_newest_first_with_selectors() -> None:
    lines = [b"0" * 40 + b" " + SHA_A.encode() + b" Ada T <a@x> 1700000000 +0100\tclone: from x",
             b"garbage line",
             SHA_A.encode() + b" " + SHA_B.encode() + b" Ada <a@x> 1700000100 +0000\t"
             b"pull origin main: Fast-forward"]
    entries = gitparse.parse_reflog(lines)
    assert [e["selector"] for e in entries] == ["HEAD@{0}", "HEAD@{2}"]
    assert entries[0] == {"old": SHA_A, "new": SHA_B, "time": 1700000100, "tz": "+0000",
                          "message": "pull origin main: Fast-forward", "selector": "HEAD@{0}"}
    assert entries[1]["tz"] == "+0100" and entries[1]["old"] == "0" * 40


def test_detached_state_at_and_from() -> None:
    reflog = [{"message": "checkout: moving from main to v1.2", "new": SHA_A}]
    assert gitparse.detached_state(SHA_A, reflog) == {"detached_at": SHA_A,
                                                      "detached_at_name": "v1.2"}
    assert gitparse.detached_state(SHA_B, reflog) == {"detached_from": SHA_A,
                                                      "detached_from_name": "v1.2"}
    assert gitparse.detached_state(SHA_A, []) == {}


def test_stash_list_and_remotes() -> None:
    data = (SHA_A.encode() + b"\0" + (SHA_B + " c d").encode() + b"\x001700000000\0On main: x\0"
            + SHA_B.encode() + b"\0" + (SHA_A + " c").encode() + b"\x001690000000\0WIP on main")
    stashes = gitparse.parse_stash_list(data)
    assert stashes["stash@{0}"] == {"sha": SHA_A, "base": SHA_B, "has_untracked": True,
                                    "time": 1700000000, "message": "On main: x"}
    assert stashes["stash@{1}"]["has_untracked"] is False
    remotes = gitparse.parse_remotes(b"remote.origin.url\nhttps://github.com/x/y\0"
                                     b"remote.my.fork.url\nhttps://u:secret@h/z\0")
    assert remotes == {"origin": "https://github.com/x/y", "my.fork": "https://u:<secret>@h/z"}


def test_blob_text_base64_and_truncated_character() -> None:
    assert gitparse.blob_of(b"plain\n")["text"] == "plain\n"
    latin = gitparse.blob_of(b"caf\xe9")
    assert base64.b64decode(latin["base64"]) == b"caf\xe9" and "text" not in latin
    cut = "é".encode()[:1]  # truncation split a two-byte character: drop the half, keep text
    blob = gitparse.encode_blob(b"ab" + cut, 100, "f" * 64, True)
    assert (blob["text"], blob["truncated"], blob["bytes"]) == ("ab", True, 100)


def test_blob_redaction_keeps_original_hash() -> None:
    data = b"HF_TOKEN=hf_" + b"zM4qP8rT2v" * 3 + b"\n\xff"
    blob = gitparse.blob_of(data)
    assert blob["redacted"] is True and blob["sha256"] == hashlib.sha256(data).hexdigest()
    assert b"hf_zM4q" not in base64.b64decode(blob["base64"])


def test_uncommitted_digest_depends_on_untracked_contents() -> None:
    one = gitparse.uncommitted_digest("p", {"a": {"sha256": "1"}})
    assert one != gitparse.uncommitted_digest("p", {"a": {"sha256": "2"}})
    assert one != gitparse.uncommitted_digest("q", {"a": {"sha256": "1"}})


def test_tail_lines_reads_only_the_end(tmp_path: Path) -> None:
    log = tmp_path / "HEAD"
    log.write_bytes(b"".join(b"line %d\n" % n for n in range(20_000)))
    lines, older = tail_lines(str(log), 3)
    assert (lines, older) == ([b"line 19997", b"line 19998", b"line 19999"], True)
    assert tail_lines(str(log), 20_000)[1] is False
    assert len(tail_lines(str(log), 25_000)[0]) == 20_000
