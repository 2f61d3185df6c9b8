"""The cuda_nccl collector: versions read without importing torch, checked against what
torch itself said on the recorded H200 (tests/data/h200/torch_truth.json), and on fake
torch packages, wheels and libnccl builds here."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.paths import DATA

from envsnap.agent import cuda_nccl, util

DATA = DATA / "h200"
FAKE_NCCL_C = "int ncclGetVersion(int *version) { *version = %d; return 0; }\n"
# a build whose ncclGetVersion crashes its caller (a broken or mismatched library)
CRASHING_NCCL_C = "int ncclGetVersion(int *version) { *(volatile int *)0 = 1; return 0; }\n"


def text(name: str) -> str:
    return (DATA / name).read_text()


@pytest.mark.parametrize("code, version", [
    (22705, "2.27.5"), (22809, "2.28.9"), (21003, "2.10.3"), (2708, "2.7.8"), (2400, "2.4.0"),
])
def test_nccl_version_codes(code: int, version: str) -> None:
    assert cuda_nccl.decode_nccl_version(code) == version


def test_recorded_torch_version_py() -> None:
    values = cuda_nccl.parse_torch_version_py(text("torch_version.py.txt"))
    assert (values["__version__"], values["cuda"], values["hip"]) == ("2.11.0+cu130", "13.0", None)
    assert values["git_version"] == "70d99e998b4955e0049d13a98d77ae1b14db1f45"


def test_computed_values_in_version_py_are_skipped() -> None:
    values = cuda_nccl.parse_torch_version_py("import os\n__version__ = '2.5.1'\n"
                                              "cuda = os.environ.get('X')\nx, y = 1, 2\n")
    assert values == {"__version__": "2.5.1"}


def test_recorded_agent_agrees_with_what_torch_said_on_the_h200() -> None:
    truth = json.loads(text("torch_truth.json"))
    agent = json.loads(text("agent.json"))["collectors"]["cuda_nccl"]
    facts = agent["facts"]
    assert agent["error"] is None and agent["volatile"] == {}
    assert truth["find_spec_imported_torch"] is False
    assert (facts["torch"]["version"], facts["torch"]["cuda"]) == (truth["version"], truth["cuda"])
    assert facts["nccl"]["torch"]["version"] == truth["nccl"]
    assert facts["nccl"]["torch"]["source"].startswith("ncclGetVersion:")
    code = truth["cudnn"]  # torch.backends.cudnn.version(): 91900 is 9.19.0
    cudnn = f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    wheel_header = [v for k, v in facts["cudnn"]["headers"].items() if "site-packages" in k]
    assert wheel_header == [cudnn]


def test_recorded_ldconfig_nvcc_and_cuda_layout() -> None:
    found = cuda_nccl.parse_ldconfig(text("ldconfig_p.txt"), "libnccl")
    assert found == {"/lib/x86_64-linux-gnu/libnccl.so.2": "libnccl.so.2",
                     "/lib/x86_64-linux-gnu/libnccl.so": "libnccl.so"}
    assert cuda_nccl.parse_nvcc_version(text("nvcc_version.txt")) == "13.0.88"


def test_cuda_version_files() -> None:
    assert cuda_nccl.parse_cuda_version_json(
        '{"cuda": {"name": "CUDA SDK", "version": "12.8.1"}}') == "12.8.1"
    assert cuda_nccl.parse_cuda_version_json("{}") is None
    assert cuda_nccl.parse_cuda_version_txt("CUDA Version 10.2.89\n") == "10.2.89"
    assert cuda_nccl.parse_nvcc_version("Cuda compilation tools, release 11.8") == "11.8"


def test_toolkit_found_by_version_json_dist_info_or_cuda_h(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "cuda-13.1"
    (root / "include").mkdir(parents=True)
    (root / "include" / "cuda.h").write_text("#define CUDA_VERSION 13010\n")
    assert cuda_nccl.cuda_header_version(str(root)) == {
        "version": "13.1", "path": str(root), "source": str(root / "include" / "cuda.h")}
    (root / "dist-info" / "nvidia_cuda_nvcc-13.1.80.dist-info").mkdir(parents=True)
    monkeypatch.setenv("CUDA_HOME", str(root))
    assert cuda_nccl.cuda_toolkit(5.0)["version"] == "13.1.80"
    (root / "version.json").write_text('{"cuda": {"version": "13.1.0"}}')
    assert cuda_nccl.cuda_toolkit(5.0) == {"version": "13.1.0", "path": str(root),
                                           "source": str(root / "version.json")}


def test_cudnn_header() -> None:
    header = "#define CUDNN_MAJOR 9\n#define CUDNN_MINOR 19\n#define CUDNN_PATCHLEVEL 0\n"
    assert cuda_nccl.parse_cudnn_header(header) == "9.19.0"
    assert cuda_nccl.parse_cudnn_header("#define CUDNN_MAJOR 9\n") is None


def test_version_from_library_file_name() -> None:
    assert cuda_nccl.version_from_file_name("/usr/lib/libnccl.so.2.28.3") == "2.28.3"
    assert cuda_nccl.version_from_file_name("/usr/lib/libnccl.so.2") is None


# ---- a fake environment: torch package, wheels, libnccl ----------------------------------

def make_site(tmp_path: Path) -> Path:
    """A site-packages with a torch that must never be imported, and nvidia wheels."""
    site = tmp_path / "site-packages"
    torch = site / "torch"
    (torch / "lib").mkdir(parents=True)
    (torch / "__init__.py").write_text("raise RuntimeError('torch must not be imported')\n")
    (torch / "version.py").write_text("from typing import Optional\n__version__ = '2.10.0+cu128'"
                                      "\ncuda: Optional[str] = '12.8'\ngit_version = 'abc'\n")
    for name, version in (("nvidia_nccl_cu12", "2.27.5"), ("nvidia_cudnn_cu12", "9.10.2.21")):
        info = site / f"{name}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}"
                                       f"\nVersion: {version}\n")
    return site


def build_nccl(path: Path, code: int, source_text: str = FAKE_NCCL_C) -> None:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build a stand-in libnccl")
    path.parent.mkdir(parents=True, exist_ok=True)
    source = path.parent / f"stub{code}.c"
    source.write_text(source_text % code if "%d" in source_text else source_text)
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(path), str(source)], check=True)


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = make_site(tmp_path)
    monkeypatch.syspath_prepend(str(folder))
    return folder


def test_torch_is_read_as_text_never_imported(site: Path) -> None:
    folder = cuda_nccl.torch_dir()
    assert folder == str(site / "torch")
    facts = cuda_nccl.torch_facts(folder)
    assert (facts["version"], facts["cuda"], facts["git_version"]) == \
        ("2.10.0+cu128", "12.8", "abc")
    assert "torch" not in sys.modules


def test_nccl_of_torch_from_the_wheel_beside_it(site: Path) -> None:
    build_nccl(site / "nvidia" / "nccl" / "lib" / "libnccl.so.2", 22705)
    facts = cuda_nccl.collect({})["facts"]
    library = str(site / "nvidia" / "nccl" / "lib" / "libnccl.so.2")
    assert facts["nccl"]["torch"] == {"version": "2.27.5", "source": "ncclGetVersion:" + library}
    assert facts["nccl"]["wheels"]["nvidia-nccl-cu12"]["version"] == "2.27.5"
    assert facts["cudnn"]["wheels"]["nvidia-cudnn-cu12"]["version"] == "9.10.2.21"
    assert facts["nvidia_wheels"]["nvidia-nccl-cu12"] == "2.27.5"
    assert "torch" not in sys.modules


def test_nccl_bundled_in_torch_lib_wins_over_the_wheel(site: Path) -> None:
    build_nccl(site / "nvidia" / "nccl" / "lib" / "libnccl.so.2", 22705)
    build_nccl(site / "torch" / "lib" / "libnccl.so.2", 21805)
    used = cuda_nccl.nccl_facts(str(site / "torch"), {}, "", 10.0)["torch"]
    assert used["version"] == "2.18.5" and "/torch/lib/" in used["source"]


def test_a_library_without_nccl_falls_back_to_its_file_name(site: Path) -> None:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler")
    lib = site / "nvidia" / "nccl" / "lib" / "libnccl.so.2.26.2"
    lib.parent.mkdir(parents=True)
    (site / "empty.c").write_text("int nothing(void) { return 0; }\n")
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(lib), str(site / "empty.c")],
                   check=True)
    entry = cuda_nccl.nccl_facts(str(site / "torch"), {}, "", 10.0)["torch"]
    assert entry["version"] == "2.26.2" and entry["source"].startswith("file name:")
    assert "undefined symbol" in entry["error"]


def test_no_torch_is_not_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cuda_nccl, "torch_dir", lambda: None)
    facts: dict[str, Any] = cuda_nccl.collect({})["facts"]
    assert facts["torch"] == {"version": None, "reason": "torch not found"}
    assert facts["nccl"]["torch"] == {"version": None, "reason": "torch not found"}


def test_a_wheel_nccl_without_torch_is_listed_not_attributed_to_torch(site: Path) -> None:
    shutil.rmtree(site / "torch")
    build_nccl(site / "nvidia" / "nccl" / "lib" / "libnccl.so.2", 22809)
    facts = cuda_nccl.nccl_facts(None, {}, "", 10.0)
    library = str(site / "nvidia" / "nccl" / "lib" / "libnccl.so.2")
    assert facts["libraries"][library]["version"] == "2.28.9"
    assert facts["torch"]["version"] is None


# ---- the probe's own process: a fork of the collector's, or a fresh python ----------------

@pytest.fixture(params=["fork", "fresh python"])
def probed_in(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Each way the probe runs: forked where the collector runs alone in its process (as
    the runner forks it), a fresh python where other threads run (the collectors in turn)."""
    forked = request.param == "fork"
    forks: list[str] = []
    real = util.run_forked
    monkeypatch.setattr(util, "lone_thread", lambda: forked)
    monkeypatch.setattr(util, "run_forked", lambda *args: forks.append(args[0]) or real(*args))
    yield str(request.param)
    assert forks == (["the NCCL probe"] if forked else [])


def test_the_probe_reads_each_library_s_version_either_way(site: Path, probed_in: str) -> None:
    wheel = site / "nvidia" / "nccl" / "lib" / "libnccl.so.2"
    bundled = site / "torch" / "lib" / "libnccl.so.2"
    build_nccl(wheel, 22705)
    build_nccl(bundled, 21805)
    assert cuda_nccl.probe_nccl([str(wheel), str(bundled)], 10.0) == \
        {str(wheel): 22705, str(bundled): 21805}


def test_a_library_that_crashes_the_probe_costs_its_version_not_the_facts(
        site: Path, probed_in: str) -> None:
    library = site / "nvidia" / "nccl" / "lib" / "libnccl.so.2.26.2"
    build_nccl(library, 0, CRASHING_NCCL_C)
    facts = cuda_nccl.nccl_facts(str(site / "torch"), {}, "", 10.0)
    assert facts["torch"]["version"] == "2.26.2"   # from its file name
    assert facts["torch"]["source"].startswith("file name:")
    assert facts["torch"]["error"].startswith("probe exit -11")


def test_cudnn_libraries_are_the_loader_cache_files_as_collect_env_lists_them(
        tmp_path: Path) -> None:
    """`ldconfig -p` names each library by its soname link and its plain .so link; the
    script resolves them and keeps each file once: so does the capture."""
    names = ["libcudnn", "libcudnn_adv"]
    listing = ["2 libs found in cache `/etc/ld.so.cache'"]
    for name in names:
        real = tmp_path / f"{name}.so.9.14.0"
        real.write_bytes(b"")
        for link in (f"{name}.so.9", f"{name}.so"):
            (tmp_path / link).symlink_to(real.name)
            listing.append(f"\t{link} (libc6,x86-64) => {tmp_path / link}")
    listing.append(f"\tlibcudnn_gone.so.9 (libc6,x86-64) => {tmp_path / 'gone.so.9'}")
    found = cuda_nccl.cudnn_libraries("\n".join(listing))
    assert found == {str(tmp_path / f"{name}.so.9.14.0"): "9.14.0" for name in names}


def test_the_cudnn_torch_loads_is_its_wheel_beside_it(site: Path) -> None:
    lib = site / "nvidia" / "cudnn" / "lib"
    lib.mkdir(parents=True)
    (lib / "libcudnn.so.9").write_bytes(b"")
    wheels = {"nvidia-cudnn-cu12": {"version": "9.10.2.21", "source": "importlib.metadata"}}
    used = cuda_nccl.torch_cudnn(str(site / "torch"), wheels, {})
    assert used == {"version": "9.10.2.21", "path": str(lib / "libcudnn.so.9"),
                    "source": "nvidia-cudnn-cu12 metadata"}
    assert cuda_nccl.torch_cudnn(None, wheels, {})["reason"] == "torch not found"
    (lib / "libcudnn.so.9").unlink()
    assert cuda_nccl.torch_cudnn(str(site / "torch"), wheels, {})["version"] is None
