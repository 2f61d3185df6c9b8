from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import sys
from pathlib import Path
from typing import Any

from conftest import Cli

from envsnap.agent import python_env as pe
from envsnap.agent.redact import redact_code

TOKEN = "hf_" + "yR7cK2pWv9" * 3   # random-looking: a run of one letter is a fill-in

METADATA = """Metadata-Version: 2.1
Name: Flash_Attn
Version: 2.7.4.post1
Summary: Flash Attention

Name: not-a-header
Version: 0.0
"""


def test_normalise_name_follows_pep_503() -> None:
    assert pe.normalise_name("Flash_Attn") == "flash-attn"
    assert pe.normalise_name("zope.interface") == "zope-interface"
    assert pe.normalise_name("a-_.b") == "a-b"


def test_parse_metadata_headers_reads_only_the_header_block() -> None:
    assert pe.parse_metadata_headers(METADATA) == ("Flash_Attn", "2.7.4.post1")
    assert pe.parse_metadata_headers("Name: x\r\nVersion: 1\r\n\r\nName: y") == ("x", "1")
    assert pe.parse_metadata_headers("Summary: nothing") == (None, None)


def test_parse_direct_url_editable_vcs_and_archive() -> None:
    editable = '{"url": "file:///root/my%20sglang/python", "dir_info": {"editable": true}}'
    assert pe.parse_direct_url(editable) == {"editable": "/root/my sglang/python"}
    vcs = json.dumps({"url": f"https://oauth2:{TOKEN}@github.com/x/y.git",
                      "vcs_info": {"vcs": "git", "commit_id": "bba2fc4"}})
    parsed = pe.parse_direct_url(vcs)
    assert parsed == {"url": "https://oauth2:<secret>@github.com/x/y.git", "vcs": "git",
                      "commit": "bba2fc4"}
    assert pe.parse_direct_url('{"url": "https://h/x.whl", "archive_info": {}}') == {
        "url": "https://h/x.whl"}
    assert pe.parse_direct_url("not json") == {"error": "unreadable direct_url.json"}
    assert pe.parse_direct_url(None) is None


def record(name: str, version: str, location: str,
           url: dict[str, Any] | None = None) -> pe.DistRecord:
    return pe.DistRecord(name, version, location, url)


def test_index_distributions_first_on_path_wins() -> None:
    facts = pe.index_distributions([
        record("torch", "2.10.0+cu128", "/venv/site"),
        record("sglang", "0.5.3", "/venv/site", {"editable": "/root/sglang/python"}),
        None,
        record("flashinfer", "0.2", "/venv/site", {"url": "https://x", "vcs": "git",
                                                   "commit": "abc"}),
        record("torch", "2.9.0", "/usr/lib/site"),
    ])
    assert facts["packages"] == {"flashinfer": "0.2", "sglang": "0.5.3", "torch": "2.10.0+cu128"}
    assert facts["editable"] == {"sglang": "/root/sglang/python"}
    assert facts["direct_urls"] == {"flashinfer": {"url": "https://x", "vcs": "git",
                                                   "commit": "abc"}}
    assert facts["shadowed"] == {"torch": [
        {"version": "2.10.0+cu128", "location": "/venv/site"},
        {"version": "2.9.0", "location": "/usr/lib/site"}]}


def test_startup_lines_are_the_import_lines() -> None:
    text = "/some/path\nimport os; os.environ['X'] = '1'\n# import no\nimport\tsys\nimported\n"
    assert pe.startup_lines(text) == ["import os; os.environ['X'] = '1'", "import\tsys"]


def test_redact_code_masks_values_on_secret_lines() -> None:
    source = ('import os\nos.environ["HF_TOKEN"] = "weak-one"\n'
              f"os.environ.setdefault('NCCL_PROTO', 'LL')\nx = '{TOKEN}'\n")
    shown = redact_code(source)
    assert 'os.environ["HF_TOKEN"] = "<secret>"' in shown
    assert "'NCCL_PROTO', 'LL'" in shown
    assert "weak-one" not in shown and TOKEN not in shown


def test_redact_with_digest_hashes_original_only_when_clean() -> None:
    clean = b"import os\n"
    assert pe.redact_with_digest(clean) == ("import os\n", hashlib.sha256(clean).hexdigest(),
                                            False)
    shown, digest, redacted = pe.redact_with_digest(b"API_KEY = 'abc'\n")
    assert redacted and "abc" not in shown
    assert digest == hashlib.sha256(shown.encode()).hexdigest()


def make_site(root: Path) -> Path:
    site_dir = root / "site-packages"
    info = site_dir / "My_Pkg-1.2.3.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: My_Pkg\nVersion: 1.2.3\n")
    (info / "direct_url.json").write_text(
        json.dumps({"url": (root / "src").as_uri(), "dir_info": {"editable": True}}))
    legacy = root / "legacy"
    (legacy / "old_pkg.egg-info").mkdir(parents=True)
    (legacy / "old_pkg.egg-info" / "PKG-INFO").write_text("Name: old-pkg\nVersion: 0.1\n")
    (site_dir / "old-pkg.egg-link").write_text(f"{legacy}\n.\n")
    (site_dir / "paths.pth").write_text("/opt/extra\n")
    (site_dir / "nccl.pth").write_text("import os; os.environ.setdefault('NCCL_PROTO', 'LL')\n")
    return site_dir


def test_package_facts_on_a_real_site_folder(tmp_path: Path) -> None:
    site_dir = make_site(tmp_path)
    paths = [str(site_dir), str(tmp_path / "legacy")]
    facts = pe.package_facts(importlib.metadata.distributions(path=paths), [str(site_dir)])
    assert facts["packages"] == {"my-pkg": "1.2.3", "old-pkg": "0.1"}
    assert facts["editable"] == {"my-pkg": str(tmp_path / "src"),
                                 "old-pkg": str(tmp_path / "legacy")}


def test_find_startup_pth_lists_only_code_running_files(tmp_path: Path) -> None:
    site_dir = make_site(tmp_path)
    found = pe.find_startup_pth([str(site_dir)])
    path = str(site_dir / "nccl.pth")
    assert list(found) == [path]
    assert found[path]["code_lines"] == ["import os; os.environ.setdefault('NCCL_PROTO', 'LL')"]
    assert found[path]["sha256"] == hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_describe_module_reads_without_running_it(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    name = f"envsnap_test_customize_{os.getpid()}"
    source = f"open({str(marker)!r}, 'w').close()\nimport os\nos.environ['HF_TOKEN'] = '{TOKEN}'\n"
    (tmp_path / (name + ".py")).write_text(source)
    info = pe.describe_module(name, [str(tmp_path)])
    assert info is not None and not marker.exists() and name not in sys.modules
    assert info["path"] == str(tmp_path / (name + ".py")) and info["imported"] is False
    assert info["redacted"] and TOKEN not in json.dumps(info)
    assert info["truncated"] is False and info["size"] == len(source)
    assert pe.describe_module(name + "_absent", [str(tmp_path)]) is None


def test_describe_module_caps_large_content(tmp_path: Path) -> None:
    (tmp_path / "bigcustomize.py").write_text("# x\n" * 40000)
    info = pe.describe_module("bigcustomize", [str(tmp_path)])
    assert info is not None and info["truncated"] is True
    assert len(info["content"].encode()) == pe.CONTENT_CAP and info["size"] == 160000
    assert info["sha256"] == hashlib.sha256(b"# x\n" * 40000).hexdigest()


def test_collect_on_this_interpreter() -> None:
    result = pe.collect({})
    json.dumps(result)
    facts = result["facts"]
    assert facts["interpreter"]["executable"] == sys.executable
    assert facts["interpreter"]["version"] == "{}.{}.{}".format(*sys.version_info[:3])
    assert facts["packages"]["pytest"] == importlib.metadata.version("pytest")
    assert pe.AGENT_ROOT not in facts["sys_path"]
    assert set(facts["customize"]) == {"sitecustomize", "usercustomize"}
    assert all(name == pe.normalise_name(name) for name in facts["packages"])


def test_sys_path_does_not_depend_on_where_the_capture_runs(cli: Cli, tmp_path: Path) -> None:
    # The first capture unpacks the agent from $HOME, the next runs it from the caller's
    # folder; a folder on PYTHONPATH that is also the caller's must be recorded both times.
    job = tmp_path / "job"
    job.mkdir()
    cli.env["PYTHONPATH"] += os.pathsep + str(job)
    cli.cwd = job
    paths = []
    for label in ("first", "cached"):
        assert cli("capture", "local", "--label", label).returncode == 0
        result = cli("show", label, "--json")
        paths.append(json.loads(result.stdout)["facts"]["python_env"]["sys_path"])
    assert str(job) in paths[0] and paths[0] == paths[1]
    assert not any(entry.startswith(cli.env["HOME"]) for entry in paths[0])


def test_the_agents_scan_finds_what_importlib_metadata_finds(tmp_path: Path) -> None:
    """Its own scan (importlib.metadata costs the agent's start-up a third): the same
    distributions, in the same order, with the same locations, on this interpreter's
    sys.path, a made site folder and an .egg folder."""
    egg = tmp_path / "Old_Egg-1.0-py3.egg"
    (egg / "EGG-INFO").mkdir(parents=True)
    (egg / "EGG-INFO" / "PKG-INFO").write_text("Name: old-egg\nVersion: 1.0\n")
    (tmp_path / "loose.egg-info").write_text("Name: loose\nVersion: 2\n")   # a file: no dist
    paths = [*sys.path, str(make_site(tmp_path)), str(tmp_path / "legacy"), str(egg),
             str(tmp_path) + "//", str(tmp_path / "missing")]
    def records(dists: Any) -> list[Any]:   # None: nothing readable (the loose file)
        return [record for record in map(pe.read_distribution, dists) if record]
    ours = records(pe.distributions(paths))
    assert ours == records(importlib.metadata.distributions(path=paths)) and len(ours) > 3
    assert {"my-pkg", "old-pkg", "old-egg", "pytest"} <= {record.name for record in ours}
