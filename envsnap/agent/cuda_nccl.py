"""CUDA toolkit, torch, NCCL and cuDNN versions, each with the source it was read from.

torch is never imported (5 s, and it would initialise CUDA): its version is read from
torch/version.py as text. NCCL's own answer comes from ncclGetVersion() in a child
process, so a library that crashes on load costs one reading, not the whole agent.

On a host without NCCL or cuDNN nothing is run: `ldconfig -p` lists the loader's cache,
and it is asked once, only where that cache names a libnccl or a libcudnn at all (its run
would otherwise cost every capture).
Folders are listed by util.listed, not glob (its import and a regex per pattern).
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import sys

from . import util

TYPE_CHECKING = False   # typing's own, without its import: see runner.py
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional, Tuple

CUDA_ROOTS_ENV = ("CUDA_HOME", "CUDA_PATH")
DEFAULT_CUDA_ROOT = "/usr/local/cuda"
SYSTEM_LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64",
                   "/usr/local/lib")   # each one's libnccl.so*
NCCL_FILE = "libnccl.so"
# What `ldconfig -p` prints is this file's (glibc's ld.so.cache): its names are plain bytes.
LOADER_CACHE = "/etc/ld.so.cache"
LISTED_LIBRARIES = (b"libnccl", b"libcudnn")
DIST_INFO = re.compile(r"^(?P<name>[A-Za-z0-9_.]+)-(?P<version>[^-]+)\.dist-info$")
PROBE_TIMEOUT = 10.0
# Runs by util.run_python, in a process of its own, never in the agent itself.
NCCL_PROBE = """
import ctypes, json, sys
out = {}
for path in sys.argv[1:]:
    try:
        code = ctypes.c_int()
        rc = ctypes.CDLL(path).ncclGetVersion(ctypes.byref(code))
        out[path] = code.value if rc == 0 else "ncclGetVersion returned %d" % rc
    except Exception as exc:
        out[path] = "%s: %s" % (type(exc).__name__, exc)
sys.stdout.write(json.dumps(out))
"""


# ---- pure parsers ----------------------------------------------------------------------

def decode_nccl_version(code: int) -> str:
    """ncclGetVersion's int: major*10000+minor*100+patch since 2.9, major*1000+... before."""
    if code >= 10000:
        return "%d.%d.%d" % (code // 10000, code % 10000 // 100, code % 100)
    return "%d.%d.%d" % (code // 1000, code % 1000 // 100, code % 100)


def parse_torch_version_py(text: str) -> Dict[str, Any]:
    """torch/version.py as text -> its literal assignments (__version__, cuda, ...)."""
    import ast  # on use: a host without torch never needs it (2 ms of start-up)

    values: Dict[str, Any] = {}
    for node in ast.parse(text).body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 \
            else getattr(node, "target", None) if isinstance(node, ast.AnnAssign) else None
        value = getattr(node, "value", None)
        if isinstance(target, ast.Name) and value is not None:
            try:
                values[target.id] = ast.literal_eval(value)
            except ValueError:
                continue  # a computed value: not a version we can trust as text
    return values


def parse_cuda_version_json(text: str) -> Optional[str]:
    try:
        return str(json.loads(text)["cuda"]["version"])
    except (ValueError, KeyError, TypeError):
        return None


def parse_cuda_version_txt(text: str) -> Optional[str]:
    match = re.search(r"CUDA Version\s+(\d+(?:\.\d+)+)", text)
    return match.group(1) if match else None


def parse_nvcc_version(text: str) -> Optional[str]:
    """`nvcc --version`: "... release 12.8, V12.8.93" -> "12.8.93"."""
    match = re.search(r"release \d+\.\d+, V(\d+(?:\.\d+)+)", text) or \
        re.search(r"release (\d+\.\d+)", text)
    return match.group(1) if match else None


def parse_ldconfig(text: str, prefix: str) -> Dict[str, str]:
    """`ldconfig -p` -> {path: library name} for names starting with prefix: keyed by path,
    since the caller wants each file once; a path listed under several names keeps the first."""
    found: Dict[str, str] = {}
    for line in text.splitlines():
        match = re.match(r"\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S+)", line)
        if match and match.group(1).startswith(prefix):
            found.setdefault(match.group(3), match.group(1))
    return found


def version_from_file_name(path: str) -> Optional[str]:
    match = re.search(r"\.so\.(\d+\.\d+\.\d+)$", path)
    return match.group(1) if match else None


def parse_cudnn_header(text: str) -> Optional[str]:
    parts = [re.search(r"#define\s+CUDNN_%s\s+(\d+)" % key, text)
             for key in ("MAJOR", "MINOR", "PATCHLEVEL")]
    if not all(parts):
        return None
    return ".".join(match.group(1) for match in parts if match)


def canonical_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


# ---- reading ----------------------------------------------------------------------------

def listdir(folder: str) -> List[str]:
    try:
        return sorted(os.listdir(folder))
    except OSError:
        return []


def metadata_version(name: str) -> Optional[str]:
    try:
        from importlib import metadata
        return metadata.version(name)
    except Exception:  # an unreadable METADATA must not lose the other wheels
        return None


def nvidia_wheels() -> Dict[str, Dict[str, str]]:
    """Every installed nvidia-* wheel. The dist-info folder names find them without reading
    all the environment's metadata; importlib.metadata then gives the version."""
    wheels: Dict[str, Dict[str, str]] = {}
    for folder in sys.path:
        for entry in listdir(folder) if os.path.isdir(folder) else []:
            match = DIST_INFO.match(entry)
            name = canonical_name(match.group("name")) if match else ""
            if match and name.startswith("nvidia-") and name not in wheels:
                version = metadata_version(name)
                wheels[name] = {"version": version or match.group("version"),
                                "source": "importlib.metadata" if version else entry}
    return wheels


def cuda_roots() -> List[str]:
    roots = [os.environ[name] for name in CUDA_ROOTS_ENV if os.environ.get(name)]
    return roots + [DEFAULT_CUDA_ROOT]


def nvcc_dist_info(root: str) -> Optional[Dict[str, Any]]:
    # CUDA 13 toolkits assembled from wheels carry dist-info folders instead of version.json
    for path in sorted(util.listed(os.path.join(root, "dist-info"),
                                   lambda name: name.startswith("nvidia_cuda_nvcc-"))):
        match = DIST_INFO.match(os.path.basename(path))
        if match:
            return {"version": match.group("version"), "source": path,
                    "path": os.path.realpath(root)}
    return None


def toolkit_version_at(root: str) -> Optional[Dict[str, Any]]:
    for name, parse in (("version.json", parse_cuda_version_json),
                        ("version.txt", parse_cuda_version_txt)):
        text = util.read_text(os.path.join(root, name))
        version = parse(text) if text else None
        if version:
            return {"version": version, "source": os.path.join(root, name),
                    "path": os.path.realpath(root)}
    return nvcc_dist_info(root)


def cuda_header_version(root: str) -> Optional[Dict[str, Any]]:
    """include/cuda.h's CUDA_VERSION (13000 -> "13.0"): every layout has it, but it says
    only major.minor, so it is the last resort."""
    path = os.path.join(root, "include", "cuda.h")
    match = re.search(r"#define\s+CUDA_VERSION\s+(\d+)", util.read_text(path) or "")
    if not match:
        return None
    code = int(match.group(1))
    return {"version": "%d.%d" % (code // 1000, code % 1000 // 10), "source": path,
            "path": os.path.realpath(root)}


def nvcc_version(timeout: float) -> Optional[Dict[str, Any]]:
    nvcc = util.which("nvcc") or next(
        (os.path.join(r, "bin", "nvcc") for r in cuda_roots()
         if os.access(os.path.join(r, "bin", "nvcc"), os.X_OK)), None)
    text = util.run_text([nvcc, "--version"], timeout=timeout) if nvcc else None
    version = parse_nvcc_version(text) if text else None
    return {"version": version, "source": "%s --version" % nvcc} if version else None


def cuda_toolkit(timeout: float) -> Dict[str, Any]:
    """The first of: a version file, the nvcc in charge, cuda.h."""
    for root in cuda_roots():
        found = toolkit_version_at(root)
        if found:
            return found
    found = nvcc_version(timeout) or next(
        (h for h in map(cuda_header_version, cuda_roots()) if h), None)
    return found or {"version": None, "source": None}


def installed_toolkits() -> Dict[str, Optional[str]]:
    found = {}
    for root in sorted(util.listed("/usr/local", lambda name: name.startswith("cuda-"))):
        toolkit = toolkit_version_at(root) or cuda_header_version(root)
        found[root] = toolkit["version"] if toolkit else None
    return found


def torch_dir() -> Optional[str]:
    # find_spec of a top-level name locates the package without running its __init__
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def torch_facts(folder: Optional[str]) -> Dict[str, Any]:
    if folder is None:
        return {"version": None, "reason": "torch not found"}
    path = os.path.join(folder, "version.py")
    text = util.read_text(path)
    if text is None:
        return {"version": None, "path": folder, "reason": "no torch/version.py"}
    try:
        values = parse_torch_version_py(text)
    except SyntaxError as exc:
        return {"version": None, "source": path, "reason": "SyntaxError: %s" % exc}
    return {"version": values.get("__version__"), "cuda": values.get("cuda"),
            "hip": values.get("hip"), "git_version": values.get("git_version"),
            "debug": values.get("debug"), "path": folder, "source": path}


def nccl_files(folder: str) -> List[str]:
    """glob's folder/libnccl.so*, in the folder's order."""
    return util.listed(folder, lambda name: name.startswith(NCCL_FILE))


def libraries_in(folders: List[str]) -> List[str]:
    found: Dict[str, str] = {}  # resolved -> first path seen: libnccl.so is libnccl.so.2
    for folder in folders:
        for path in sorted(nccl_files(folder)):
            found.setdefault(os.path.realpath(path), path)
    return list(found.values())


def wheel_nccl_folders() -> List[str]:
    return [os.path.join(p, "nvidia", "nccl", "lib") for p in sys.path if p]


def torch_nccl_candidates(folder: Optional[str]) -> List[str]:
    """Where torch finds libnccl, in its order: bundled in torch/lib, then the
    nvidia-nccl wheel beside torch (its RPATH), then that wheel anywhere on sys.path."""
    if folder is None:
        return []
    return libraries_in([os.path.join(folder, "lib"),
                         os.path.join(os.path.dirname(folder), "nvidia", "nccl", "lib")]
                        + wheel_nccl_folders())


def loader_listing(timeout: float) -> str:
    """`ldconfig -p`, asked once for NCCL and cuDNN, and only where the loader's cache may
    name one of them; "" otherwise."""
    ldconfig = util.which("ldconfig") or next(
        (p for p in ("/sbin/ldconfig", "/usr/sbin/ldconfig") if os.access(p, os.X_OK)), None)
    asked = ldconfig if ldconfig and cache_may_list(LOADER_CACHE, LISTED_LIBRARIES) else None
    return (util.run_text([asked, "-p"], timeout=timeout) if asked else None) or ""


def system_nccl(listing: str) -> Dict[str, str]:
    """{resolved path: how it was found} for libnccl outside Python packages."""
    found: Dict[str, str] = {}
    for path in parse_ldconfig(listing, "libnccl"):
        found.setdefault(os.path.realpath(path), "ldconfig -p: %s" % path)
    for folder in SYSTEM_LIB_DIRS:
        for path in nccl_files(folder):
            found.setdefault(os.path.realpath(path), "file: %s" % path)
    return found


def cache_may_list(cache: str, names: Tuple[bytes, ...]) -> bool:
    """Whether `ldconfig -p` may list a library whose name starts with one of `names`: its
    cache holds those bytes, or cannot be read here (another libc's ldconfig: it is asked)."""
    try:
        with open(cache, "rb") as handle:
            content = handle.read()
    except OSError:
        return True
    return any(name in content for name in names)


def probe_nccl(paths: List[str], timeout: float) -> Dict[str, Any]:
    """{path: version code or error text}, read by ncclGetVersion (no CUDA init), in a
    process of its own (util.run_python): a library that crashes its loader costs the
    probe, not the facts."""
    if not paths:
        return {}
    try:
        code, out, err = util.run_python("the NCCL probe", NCCL_PROBE, paths, timeout)
    except util.CollectorError as exc:
        return {path: str(exc) for path in paths}
    if code != 0:  # a library that crashes its loader (a segfault is exit -11)
        reason = "probe exit %d: %s" % (code, util.escaped(err)[-200:])
        return {path: reason for path in paths}
    try:
        reasons: Dict[str, Any] = json.loads(out.decode("utf-8", "replace"))
        return reasons
    except ValueError:
        return {path: "probe printed no JSON" for path in paths}


def library_source(how: str, path: str) -> str:
    """A libnccl entry's `source`, text for whoever reads the snapshot or its diff:
    "ncclGetVersion:/usr/lib/.../libnccl.so.2". Code that needs the path takes it from the
    key of `libraries`, not from this text (torch's entry is a copy of its library's)."""
    return "%s:%s" % (how, path)


def library_entry(path: str, probed: Any) -> Dict[str, Any]:
    if isinstance(probed, int):
        return {"version": decode_nccl_version(probed),
                "source": library_source("ncclGetVersion", path)}
    return {"version": version_from_file_name(os.path.realpath(path)),
            "source": library_source("file name", path), "error": probed}


def torch_reason(folder: Optional[str]) -> str:
    return "torch not found" if folder is None else \
        "no libnccl beside torch (absent or linked statically)"


def nccl_facts(folder: Optional[str], wheels: Dict[str, Dict[str, str]],
               listing: str, timeout: float) -> Dict[str, Any]:
    for_torch = torch_nccl_candidates(folder)
    system = system_nccl(listing)
    others = libraries_in(wheel_nccl_folders()) + list(system)
    paths = for_torch + [p for p in others if p not in for_torch]
    probed = probe_nccl(paths, timeout)
    libraries = {path: library_entry(path, probed.get(path)) for path in paths}
    for path, how in system.items():
        libraries[path]["found_by"] = how
    used = dict(libraries[for_torch[0]]) if for_torch else \
        {"version": None, "reason": torch_reason(folder)}
    return {"torch": used, "libraries": libraries,
            "wheels": {n: w for n, w in wheels.items() if n.startswith("nvidia-nccl")}}


def cudnn_facts(folder: Optional[str], wheels: Dict[str, Dict[str, str]],
                listing: str) -> Dict[str, Any]:
    headers: Dict[str, Optional[str]] = {}
    for path in sorted(set(cudnn_headers(folder))):
        text = util.read_text(path)
        headers[path] = parse_cudnn_header(text) if text else None
    cudnn_wheels = {n: w for n, w in wheels.items() if n.startswith("nvidia-cudnn")}
    return {"headers": headers, "wheels": cudnn_wheels,
            "libraries": cudnn_libraries(listing),
            "torch": torch_cudnn(folder, cudnn_wheels, headers)}


def cudnn_libraries(listing: str) -> Dict[str, Optional[str]]:
    """{real path: version from its file name} of every libcudnn the loader's cache lists:
    what collect_env prints (it too resolves `ldconfig -p`'s paths and keeps files)."""
    found: Dict[str, Optional[str]] = {}
    for path in parse_ldconfig(listing, "libcudnn"):
        real = os.path.realpath(path)
        if os.path.isfile(real):
            found[real] = version_from_file_name(real)
    return dict(sorted(found.items()))


def torch_cudnn(folder: Optional[str], wheels: Dict[str, Dict[str, str]],
                headers: Dict[str, Optional[str]]) -> Dict[str, Any]:
    """The libcudnn torch loads: its nvidia-cudnn wheel's beside torch (torch's RPATH is
    searched before the loader's cache), with the wheel's version, else its header's. Without
    that wheel torch loads what the loader finds, which `libraries` lists."""
    if folder is None:
        return {"version": None, "reason": "torch not found"}
    wheel_lib = os.path.join(os.path.dirname(folder), "nvidia", "cudnn", "lib")
    libraries = sorted(util.listed(wheel_lib, lambda name: name.startswith("libcudnn.so")))
    if not libraries:
        return {"version": None, "reason": "no nvidia-cudnn wheel beside torch"}
    header = os.path.join(os.path.dirname(wheel_lib), "include", "cudnn_version.h")
    wheel = next(iter(wheels.values()), None)
    version = (wheel or {}).get("version") or headers.get(header) or \
        version_from_file_name(os.path.realpath(libraries[0]))
    source = "%s metadata" % next(iter(wheels)) if wheel else header if headers.get(header) \
        else "file name"
    return {"version": version, "path": libraries[0], "source": source}


def cudnn_headers(folder: Optional[str]) -> List[str]:
    """/usr/include/cudnn_version*.h, /usr/include/*-linux-gnu/cudnn_version*.h, and each
    CUDA root's and torch's wheel's include/cudnn_version.h that is there."""
    def header(name: str) -> bool:
        return name.startswith("cudnn_version") and name.endswith(".h") and len(name) >= 15

    found = util.listed("/usr/include", header)
    for arch in util.listed("/usr/include", lambda name: name.endswith("-linux-gnu")):
        found += util.listed(arch, header)
    exact = [os.path.join(r, "include", "cudnn_version.h") for r in cuda_roots()]
    if folder:
        exact.append(os.path.join(os.path.dirname(folder), "nvidia", "cudnn", "include",
                                  "cudnn_version.h"))
    return found + [path for path in exact if os.path.lexists(path)]


def collect(config: Dict[str, Any]) -> Dict[str, Any]:
    timeout = float((config.get("cuda_nccl") or {}).get("timeout", PROBE_TIMEOUT))
    folder = torch_dir()
    wheels = nvidia_wheels()
    listing = loader_listing(timeout)
    facts = {
        "cuda_toolkit": cuda_toolkit(timeout),
        "cuda_toolkits_installed": installed_toolkits(),
        "torch": torch_facts(folder),
        "nccl": nccl_facts(folder, wheels, listing, timeout),
        "cudnn": cudnn_facts(folder, wheels, listing),
        "nvidia_wheels": {name: wheel["version"] for name, wheel in wheels.items()},
    }
    return {"facts": facts, "volatile": {}}
