"""Hot paths on real histories (issue 24): pulls of real public projects (tests/data/histories,
real commits), replayed through the CLI: clone, reset to where the checkout stood, capture,
pull, capture, diff. The commit on the communication path is named first, configured paths
before every default, no docs- or test-only commit is called hot, counts and file lists are
git's own, and every line of the text form fits 80 columns (but for an unbreakable path)."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import Cli
from helpers.folded import item, overlong, words
from helpers.gitrepos import Repo, clone, count, git_env, init
from helpers.paths import DATA, ROOT

HISTORIES = DATA / "histories"
VLLM_ASCEND = HISTORIES / "vllm-ascend.bundle"
NCCL_TESTS = HISTORIES / "nccl-tests.bundle"
SGLANG_JAX = HISTORIES / "sglang-jax.bundle"
# github.com/vllm-project/vllm-ascend, 20 commits, exactly one on vllm_ascend/distributed/
SMALL_PULL = ("493768eb30438eb10bae75cf216d47226898b7a7",
              "997f156a51816a8c9303a1b85c0f25ad6e8bf865")
COMMUNICATION_FIX = "89c1a0f00691ce4cda87cc7eb6f5e558e926a455"
# the same, 150 commits, four on vllm_ascend/distributed/
BIG_PULL = ("68fb63428b8b972dd60ad9189538909b0eb1fcc8",
            "e1123172d12afa15f306ba6e1e4c9d0c6d1d799e")
# github.com/NVIDIA/nccl-tests, 26 commits with merges
NCCL_PULL = ("f67c258e8bc073b4271b681884743b0e64d4ad7f",
             "a0b82b2260cf5152b9f8c061bbf7eaf0ba096432")
# github.com/sgl-project/sglang-jax, 21 commits, none on a communication path; the bundle is
# shallow: its oldest commit is logged without its parents
JAX_PULL = ("669b56905ac46856238bb38899013c4287c19b11",
            "262cd5b98e6c88bf5b79f8a568a8efd3a8d1a639")
JAX_BOUNDARY = "6ada59595aca47a3a528b6dfe4c55b32c4984b00"
# github.com/vllm-project/vllm: the 150 commits up to a release (the histories README says
# why these); the bundles are shallow and blobless
VLLM_16 = HISTORIES / "vllm-0.16.bundle"
VLLM_16_PULL = ("f67ee8b859215df4b521c67b9f26e27f30c9739f",
                "2d5be1dd5ce2e44dfea53ea03ff61143da5137eb")
VLLM_16_BOUNDARY = "e57ef99b409ba651695a515f6022c9badf25b2a2"
VLLM_19 = HISTORIES / "vllm-0.19.bundle"
VLLM_19_PULL = ("b73b5b06290c0d1439b09db71eef15fe59bc1fbb",
                "2a69949bdadf0e8942b7a1619b229cb475beef20")
VLLM_19_BOUNDARY = "0f0e03890ed7edd41eb0b5e2de21447b3f70586c"
HOT_SHOWN = 12   # hot commits the default view lists: a dozen, the guide says
WHY = re.compile(r"([0-9a-f]{7}) (.*?) \(touches (\S+): ([a-z ]+)\)")


@pytest.fixture
def gcli(cli: Cli) -> Cli:
    cli.env["PYTHONPATH"] = str(ROOT)
    return cli


@dataclass
class Pull:
    """A checkout before and after a real pull, and what git itself says about it."""

    checkout: Repo
    old: str
    new: str

    def commits(self) -> list[str]:
        return self.checkout.git("rev-list", f"{self.old}..{self.new}").split()

    def files(self, sha: str) -> list[str]:
        """As git lists them without rename detection: a rename is both of its paths."""
        return sorted(self.checkout.git("diff", "--no-renames", "--name-only",
                                        f"{sha}^..{sha}").split("\n"))


def replay(cli: Cli, root: Path, bundle: Path, branch: str, old: str, new: str,
           *capture_args: str, shallow: str = "", blobless: bool = False) -> Pull:
    """The upstream branch where it stood after the pull, a checkout where it stood before.
    A shallow bundle's edge is declared before it is fetched (git clone cannot)."""
    root = root / "git"
    env = git_env(root / "home")
    (root / "home").mkdir(parents=True)
    upstream = init(root / "upstream.git", env, bare=True)
    if shallow:
        (upstream.path / "shallow").write_text(shallow + "\n")
    if blobless:   # no fetch: its check would miss the blobs the bundle leaves out
        upstream.git("bundle", "unbundle", str(bundle))
    else:
        upstream.git("fetch", "-q", str(bundle), f"{branch}:{branch}")
    upstream.git("symbolic-ref", "HEAD", f"refs/heads/{branch}")
    upstream.git("update-ref", f"refs/heads/{branch}", new)
    checkout = sparse_clone(upstream, root / "checkout", branch) if blobless else \
        clone(upstream.path, root / "checkout", env, "-b", branch)
    checkout.git("reset", "-q", "--hard", old)
    capture(cli, "good", checkout, *capture_args)
    checkout.git("-c", "pull.rebase=false", "pull", "-q", "origin", branch)
    assert checkout.head() == new
    capture(cli, "bad", checkout, *capture_args)
    return Pull(checkout, old, new)


def sparse_clone(upstream: Repo, path: Path, branch: str) -> Repo:
    """A blobless, sparse clone of a shallow, blobless upstream, as `git clone --filter=blob:none
    --sparse` leaves one: objects shared with the upstream, only the root's files checked out,
    and the blobs left out promised by a remote. That remote leads nowhere, so a read of a
    missing blob fails at once (an older git would otherwise fetch it from the upstream,
    which lacks it too, and fetch again from inside that fetch). Made by hand: git clone will
    not clone a shallow repository locally, and its transport would look for every blob."""
    checkout = init(path, upstream.env)
    checkout.git("symbolic-ref", "HEAD", f"refs/heads/{branch}")
    checkout.git("config", "core.repositoryformatversion", "1")
    checkout.git("remote", "add", "origin", str(upstream.path))
    checkout.git("remote", "add", "promised", str(path.parent / "promised.git"))
    checkout.git("config", "remote.promised.promisor", "true")
    checkout.git("config", "extensions.partialClone", "promised")
    git_dir = path / ".git"
    (git_dir / "objects" / "info" / "alternates").write_text(f"{upstream.path / 'objects'}\n")
    if (upstream.path / "shallow").exists():
        (git_dir / "shallow").write_text((upstream.path / "shallow").read_text())
    tip = upstream.git("rev-parse", f"refs/heads/{branch}")
    checkout.git("update-ref", f"refs/remotes/origin/{branch}", tip)
    checkout.git("config", f"branch.{branch}.remote", "origin")
    checkout.git("config", f"branch.{branch}.merge", f"refs/heads/{branch}")
    checkout.git("sparse-checkout", "init", "--cone")
    return checkout


def capture(cli: Cli, label: str, checkout: Repo, *args: str) -> None:
    result = cli("capture", "local", "--label", label, "--repo", str(checkout.path), *args)
    assert result.returncode == 0, result.stderr


def diff_json(cli: Cli) -> dict[str, Any]:
    result = cli("diff", "good", "bad", "--json", "--section", "git")
    assert result.returncode == 1, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def head_of(document: dict[str, Any]) -> dict[str, Any]:
    found = [f for f in document["findings"] if f["path"][-1:] == ["head"]]
    assert len(found) == 1, document["findings"]
    return found[0]


def named(verdict: str) -> list[tuple[str, str, str]]:
    """(sha, file, why) of each commit the verdict names, in its order."""
    listed = verdict.split(" on a hot path", 1)[1]
    return [(sha, path, why) for sha, _, path, why in WHY.findall(listed)]


def docs_or_tests(path: str) -> bool:
    """What the issue calls never hot by default, written here apart from envsnap's table."""
    *folders, name = path.split("/")
    return name.endswith((".md", ".rst")) or name.startswith("test_") or \
        name.endswith("_test.py") or bool({"docs", "doc", "test", "tests", "examples",
                                            "benchmark", "benchmarks", ".github"} & set(folders))


def on_distributed(files: list[str]) -> bool:
    return any("distributed" in f.split("/")[:-1] and not docs_or_tests(f) for f in files)


def text_of(cli: Cli, *args: str) -> str:
    result = cli("diff", "good", "bad", "--section", "git", *args)
    assert result.returncode == 1, result.stderr
    return result.stdout


def assert_exact(pull: Pull, head: dict[str, Any]) -> None:
    """Every count and file list is git's own."""
    added = head["detail"]["added"]
    assert [c["sha"] for c in added] == pull.commits()
    assert len(added) == count(pull.checkout, f"{pull.old}..{pull.new}")
    for commit in added:
        assert sorted(commit["files"]) == pull.files(commit["sha"]), commit["sha"]


def assert_no_docs_or_tests_hot(head: dict[str, Any]) -> None:
    for commit in head["detail"]["added"]:
        if all(docs_or_tests(f) for f in commit["files"]):
            assert commit["hot"] == [], commit
        assert not any(docs_or_tests(f) for f in commit["hot_files"]), commit


def shown_hot(head: dict[str, Any]) -> list[dict[str, Any]]:
    """The hot commits the default view lists: the dozen of highest score (ties: the newer),
    in history order."""
    hot = [c for c in head["detail"]["added"] if c["hot"]]
    top = {c["sha"] for c in sorted(hot, key=lambda c: -c["score"])[:HOT_SHOWN]}
    return [c for c in hot if c["sha"] in top]


def assert_readable(text: str, head: dict[str, Any]) -> None:
    """Each line within 80 columns; a hot commit's line (folded: the line and the lines under
    it): its hot files, each with the pattern that named it, then how many files it leaves
    out. At most a dozen hot commits, those of highest score; the rest counted on one line."""
    assert overlong(text) == []
    shas = [line.split()[1] for line in text.splitlines() if line.lstrip().startswith("* ")]
    hot = [c for c in head["detail"]["added"] if c["hot"]]
    shown = shown_hot(head)
    assert sorted(shas) == sorted(c["sha"][:7] for c in shown)
    if len(hot) > len(shown):
        assert f"more, {len(hot) - len(shown)} of them on a hot path (--all lists them)" \
            in words(text), text
    for commit in shown:
        line = item(text, f"* {commit['sha'][:7]}")
        listed = [p for p in commit["hot_files"]
                  if f"{p} [{commit['hot_patterns'][p]}]" in line]
        assert listed, line
        others = len(commit["files"]) - len(listed)
        assert (f"+{others} other file" in line) == (others > 0), line


# ---- vllm-ascend ------------------------------------------------------------------------------

def test_a_20_commit_pull_names_its_one_communication_commit_first(gcli: Cli,
                                                                    tmp_path: Path) -> None:
    pull = replay(gcli, tmp_path, VLLM_ASCEND, "main", *SMALL_PULL)
    on_path = [sha for sha in pull.commits() if on_distributed(pull.files(sha))]
    assert len(pull.commits()) == 20 and on_path == [COMMUNICATION_FIX]

    document = diff_json(gcli)
    head = head_of(document)
    assert_exact(pull, head)
    assert_no_docs_or_tests_hot(head)
    verdict = document["verdict"]
    assert f"20 commits pulled into {pull.checkout.path}" in verdict, verdict
    first = named(verdict)[0]
    assert first == (COMMUNICATION_FIX[:7], "vllm_ascend/distributed/communication_op.py",
                     "communication"), verdict
    text = text_of(gcli)
    assert_readable(text, head)
    # the human form breaks the verdict between words only: the same sentence
    assert " ".join(text.split("\n\n")[1].split("\n")) == verdict
    assert f"* {COMMUNICATION_FIX[:7]} " in text and \
        "vllm_ascend/distributed/communication_op.py [distributed/]" in text


def test_a_150_commit_pull_names_communication_then_counts_and_lists_exactly(
        gcli: Cli, tmp_path: Path) -> None:
    pull = replay(gcli, tmp_path, VLLM_ASCEND, "main", *BIG_PULL)
    on_path = [sha for sha in pull.commits() if on_distributed(pull.files(sha))]
    assert len(pull.commits()) == 150 and len(on_path) == 4

    document = diff_json(gcli)
    head = head_of(document)
    assert_exact(pull, head)
    assert_no_docs_or_tests_hot(head)
    hot = [c for c in head["detail"]["added"] if c["hot"]]
    verdict = document["verdict"]
    assert f", {len(hot)} on a hot path, hottest first: " in verdict, verdict
    assert f" and {len(hot) - 3} more" in verdict
    names = named(verdict)
    assert len(names) == 3 and {sha for sha, _, _ in names} <= {s[:7] for s in on_path}
    assert all(why == "communication" and path.startswith("vllm_ascend/distributed/")
               for _, path, why in names), verdict
    text = text_of(gcli)
    assert_readable(text, head)
    markdown = gcli("diff", "good", "bad", "--section", "git", "--markdown").stdout
    # the markdown's verdict goes on to name the sections --section left out; data in it is
    # escaped (a subject's [bugfix] would be a link)
    assert f"**Verdict:** {verdict.removesuffix('.')}" in re.sub(r"\\(.)", r"\1", markdown)
    listed = [line.split()[1] for line in markdown.splitlines() if line.lstrip().startswith("* ")]
    assert listed == [c["sha"][:7] for c in shown_hot(head)]   # the text form's, in its order

    full = text_of(gcli, "--all")   # every file of every commit, one a line
    listed_files = {line.split()[0] for line in full.splitlines() if line.strip()}
    for commit in head["detail"]["added"]:
        assert set(commit["files"]) <= listed_files, commit["sha"]


def test_a_configured_path_names_its_commits_before_every_default(gcli: Cli,
                                                                   tmp_path: Path) -> None:
    scheduler = "vllm_ascend/core/scheduler.py"
    pull = replay(gcli, tmp_path, VLLM_ASCEND, "main", *BIG_PULL, "--hot-path", scheduler)
    touching = [sha for sha in pull.commits() if scheduler in pull.files(sha)]
    assert len(touching) >= 3

    head = head_of(diff_json(gcli))
    assert head["rank"] == 100
    names = named(diff_json(gcli)["verdict"])
    assert len(names) == 3 and {sha for sha, _, _ in names} <= {s[:7] for s in touching}
    assert all((path, why) == (scheduler, "configured hot path") for _, path, why in names)
    configured = [c for c in head["detail"]["added"] if "configured" in c["hot"]]
    assert sorted(c["sha"] for c in configured) == sorted(touching)


# ---- nccl-tests -------------------------------------------------------------------------------

def test_nccl_tests_merges_counted_exactly_readme_edits_never_hot(gcli: Cli,
                                                                  tmp_path: Path) -> None:
    pull = replay(gcli, tmp_path, NCCL_TESTS, "master", *NCCL_PULL)
    assert len(pull.commits()) == 26
    assert pull.checkout.git("rev-list", "--merges", "--count", f"{pull.old}..{pull.new}") != "0"

    document = diff_json(gcli)
    head = head_of(document)
    assert_exact(pull, head)
    assert_no_docs_or_tests_hot(head)
    readme_only = [c for c in head["detail"]["added"] if c["files"] == ["README.md"]]
    assert readme_only and all(c["hot"] == [] for c in readme_only)
    all_reduce = [sha for sha in pull.commits() if "src/all_reduce.cu" in pull.files(sha)]
    names = named(document["verdict"])
    assert names and all((path, why) == ("src/all_reduce.cu", "communication")
                         for _, path, why in names)
    assert {sha for sha, _, _ in names} <= {s[:7] for s in all_reduce}
    assert_readable(text_of(gcli), head)


def test_nccl_tests_configured_harness_comes_before_the_collectives(gcli: Cli,
                                                                     tmp_path: Path) -> None:
    pull = replay(gcli, tmp_path, NCCL_TESTS, "master", *NCCL_PULL, "--hot-path", "src/common.*")
    harness = [sha for sha in pull.commits()
               if any(f.startswith("src/common.") for f in pull.files(sha))]
    document = diff_json(gcli)
    head = head_of(document)
    configured = [c["sha"] for c in head["detail"]["added"] if "configured" in c["hot"]]
    assert sorted(configured) == sorted(harness) and len(harness) >= 3
    names = named(document["verdict"])
    assert len(names) == 3 and all(why == "configured hot path" and path.startswith("src/common.")
                                   for _, path, why in names), document["verdict"]
    assert_readable(text_of(gcli), head)


# ---- sglang-jax -------------------------------------------------------------------------------

def test_sglang_jax_test_and_ci_edits_are_never_hot_kernels_are_named(gcli: Cli,
                                                                       tmp_path: Path) -> None:
    """SGLang's JAX port: in four of the pull's commits "attention" is only in the names of
    test or benchmark files (test_flashattention.py...); a substring table called them hot."""
    pull = replay(gcli, tmp_path, SGLANG_JAX, "main", *JAX_PULL, shallow=JAX_BOUNDARY)
    assert len(pull.commits()) == 21
    attention_tests = [sha for sha in pull.commits()
                       if (named_so := [f for f in pull.files(sha) if "attention" in f])
                       and all(docs_or_tests(f) for f in named_so)]
    assert len(attention_tests) == 4

    document = diff_json(gcli)
    head = head_of(document)
    assert_exact(pull, head)
    assert head["detail"]["complete"] is True   # the shallow edge lies below the old HEAD
    assert_no_docs_or_tests_hot(head)
    names = named(document["verdict"])
    assert names and all(why == "kernel family" for _, _, why in names), document["verdict"]
    assert not {sha for sha, _, _ in names} & {s[:7] for s in attention_tests}
    added = {c["sha"]: c for c in head["detail"]["added"]}
    assert all(added[sha]["hot"] == [] for sha in attention_tests)
    assert_readable(text_of(gcli), head)




# ---- vllm -------------------------------------------------------------------------------------

def code_files(files: list[str]) -> list[str]:
    return [f for f in files if not docs_or_tests(f)]


def all_reduce_named(path: str) -> bool:
    name = path.rsplit("/", 1)[-1].lower()
    return "all_reduce" in name or "allreduce" in name


def replay_vllm(gcli: Cli, tmp_path: Path, bundle: Path, branch: str, pull: tuple[str, str],
                boundary: str) -> tuple[Pull, dict[str, Any], str]:
    """A vLLM release's last commits pulled into a blobless, sparse clone: the pull, the
    diff's verdict and head finding (JSON), its text form."""
    replayed = replay(gcli, tmp_path, bundle, branch, *pull, shallow=boundary, blobless=True)
    assert len(replayed.commits()) == 150
    document = diff_json(gcli)
    head = head_of(document)
    assert_exact(replayed, head)
    assert head["detail"]["complete"] is True   # the shallow edge lies below the old HEAD
    assert_no_docs_or_tests_hot(head)
    return replayed, document, text_of(gcli)


def assert_short_hot_list(head: dict[str, Any], text: str) -> None:
    """Fewer than half the pull hot, few of them only for the package of every model or a
    file named scheduler.py (as the JSON names why); a dozen listed, the rest counted on one
    line."""
    added = head["detail"]["added"]
    hot = [c for c in added if c["hot"]]
    assert 0 < 2 * len(hot) < len(added), len(hot)
    broad = [c for c in hot
             if set(c["hot_patterns"].values()) <= {"model_executor/", "scheduler.py"}]
    assert 4 * len(broad) < len(hot), [c["sha"] for c in broad]
    assert_readable(text, head)
    listed = [line for line in text.splitlines() if line.lstrip().startswith("* ")]
    assert len(listed) == HOT_SHOWN < len(hot)
    assert f"{len(added) - HOT_SHOWN} more, {len(hot) - HOT_SHOWN} of them on a hot path " \
           "(--all lists them)" in words(text)


def test_vllm_a_big_pull_lists_a_dozen_hot_commits_and_counts_the_rest(gcli: Cli,
                                                                       tmp_path: Path) -> None:
    """The pull up to the older release: a table that called every file under model_executor/
    hot marked more than half the pull, and the diff ran to hundreds of lines."""
    _, document, text = replay_vllm(gcli, tmp_path, VLLM_16, "v0.16.0", VLLM_16_PULL,
                                    VLLM_16_BOUNDARY)
    head = head_of(document)
    assert_short_hot_list(head, text)
    names = named(document["verdict"])
    assert len(names) == 3 and all(why == "communication" and path.startswith("vllm/distributed/")
                                   for _, path, why in names), document["verdict"]
    full = text_of(gcli, "--all")   # --all lists every hot commit
    hot = [c["sha"][:7] for c in head["detail"]["added"] if c["hot"]]
    assert sorted(line.split()[1] for line in full.splitlines()
                  if line.lstrip().startswith("* ")) == sorted(hot)


def test_vllm_a_one_file_distributed_fix_ranks_before_a_refactor_that_brushes_all_reduce(
        gcli: Cli, tmp_path: Path) -> None:
    """The communication path judged by what a commit changes there: a reorganisation of
    dozens of files that moves one file named for all-reduce outside vllm/distributed/ stands
    after every commit whose one code file lies in vllm/distributed/."""
    pull, document, text = replay_vllm(gcli, tmp_path, VLLM_16, "v0.16.0", VLLM_16_PULL,
                                       VLLM_16_BOUNDARY)
    files = {sha: pull.files(sha) for sha in pull.commits()}
    brushing = [sha for sha, found in files.items() if len(code_files(found)) >= 30
                and any(all_reduce_named(f) for f in code_files(found))
                and not any(f.startswith("vllm/distributed/") for f in code_files(found))]
    one_file = [sha for sha, found in files.items()
                if [f.startswith("vllm/distributed/") for f in code_files(found)] == [True]]
    assert brushing and len(one_file) >= 2

    head = head_of(document)
    score = {c["sha"]: c["score"] for c in head["detail"]["added"]}
    assert min(score[sha] for sha in one_file) > max(score[sha] for sha in brushing)
    named_shas = {sha for sha, _, _ in named(document["verdict"])}
    assert not named_shas & {sha[:7] for sha in brushing}
    listed = {line.split()[1] for line in text.splitlines() if line.lstrip().startswith("* ")}
    assert {sha[:7] for sha in one_file} <= listed and not listed & {s[:7] for s in brushing}


def test_vllm_held_out_release_names_the_distributed_layer_first(gcli: Cli,
                                                                 tmp_path: Path) -> None:
    """The pull up to the newer release, held out: the weights were set before it was read."""
    pull, document, text = replay_vllm(gcli, tmp_path, VLLM_19, "main", VLLM_19_PULL,
                                       VLLM_19_BOUNDARY)
    head = head_of(document)
    assert_short_hot_list(head, text)
    on_path = {sha[:7] for sha in pull.commits()
               if any(f.startswith("vllm/distributed/") for f in code_files(pull.files(sha)))}
    names = named(document["verdict"])
    assert len(names) == 3 and {sha for sha, _, _ in names} <= on_path
    assert all(why == "communication" for _, _, why in names), document["verdict"]
