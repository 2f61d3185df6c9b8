"""The Python environment of the interpreter running the agent, which is the target one.

Packages are found as importlib.metadata finds them (each sys.path folder's *.dist-info and
*.egg-info folders, in its order, and an .egg folder's EGG-INFO), by a scan of its own here:
importlib.metadata itself (with email, zipfile and pathlib) would be a third of the agent's
start-up on the host, which every capture pays. A zip on sys.path is still
read through importlib.metadata. Each METADATA is read as text: Distribution.metadata parses
the whole file as an email message (most of a second for thousands of packages), while the
Name and Version headers sit in its first lines. Nothing is imported except the stdlib:
sitecustomize and usercustomize are located with find_spec, which does not run them.

The customize story is told as Python sees it: the file of each hook that is imported (or
would be), with its real path (Debian's /usr/lib/python3.X/sitecustomize.py is a link into
/etc), and every other file of that name on sys.path, which never runs because the first one
wins (on stock Debian and Ubuntu the standard library's own sitecustomize.py comes before a
venv's site-packages, so a venv's sitecustomize.py is dead). `user_site` says whether
usercustomize can run at all (a venv turns the user site off).
"""
from __future__ import annotations

import collections
import importlib.machinery
import json
import os
import re
import site
import sys

from .redact import redact_code, redact_url
from .util import escaped, listed, sha256_bytes

TYPE_CHECKING = False   # typing's own, without its import: see runner.py
if TYPE_CHECKING:
    from typing import Any, Dict, Iterable, Iterator, List, NamedTuple, Optional, Protocol, Tuple

    class Distribution(Protocol):
        """What is read of an installed distribution: importlib.metadata's, or Found."""

        def read_text(self, filename: str) -> Optional[str]: ...

        def locate_file(self, path: str) -> Any: ...

CONTENT_CAP = 64 * 1024
READ_CAP = 16 << 20  # a customize file larger than this is not worth hashing whole
HEADER_END = re.compile(r"\r?\n[ \t]*\r?\n")
CUSTOMIZE_MODULES = ("sitecustomize", "usercustomize")
AGENT_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


if TYPE_CHECKING:
    class DistRecord(NamedTuple):
        name: str  # normalised (PEP 503)
        version: str
        location: str
        direct_url: Optional[Dict[str, Any]]
else:   # the same tuple, without typing's import (see runner.py)
    DistRecord = collections.namedtuple("DistRecord", "name version location direct_url")


def collect(config: Dict[str, Any]) -> Dict[str, Any]:
    # Run in a fork of the controller (hosts/headstart.py), the agent came from the target's
    # own installation of envsnap, not from a folder put on sys.path for it: nothing to drop.
    search_path = target_sys_path(None if config.get("in_process") else AGENT_ROOT)
    site_dirs = site_directories()
    facts: Dict[str, Any] = {
        "interpreter": interpreter_facts(),
        "sys_path": search_path,
        "site_dirs": site_dirs,
        "customize": {name: describe_module(name, search_path) for name in CUSTOMIZE_MODULES},
        "customize_shadowed": shadowed_customize(search_path),
        "user_site": {"enabled": bool(site.ENABLE_USER_SITE),
                      "path": getattr(site, "USER_SITE", None)},
        "startup_pth": find_startup_pth(site_dirs),
    }
    facts.update(package_facts(distributions(search_path), site_dirs))
    return {"facts": facts, "volatile": {}}


def target_sys_path(own_root: Optional[str] = AGENT_ROOT) -> List[str]:
    """sys.path as the target's programs see it, without what is there only for the agent.

    That is the entry Python put first for the program it runs (the agent's payload folder,
    the working folder under -m, the script's folder), and `own_root`, the folder the agent
    was put on the path from, wherever else it shows. The working folder is dropped only
    from the front: it may be on PYTHONPATH too, and where the capture happens to run from
    must not change what is recorded.
    """
    started_with_own_entry = not (sys.flags.isolated or getattr(sys.flags, "safe_path", False))
    rest = sys.path[1:] if started_with_own_entry else sys.path
    return [entry for entry in rest if entry and os.path.abspath(entry) != own_root]


def interpreter_facts() -> Dict[str, Any]:
    flags = sys.flags
    return {
        "executable": sys.executable,
        "executable_real": os.path.realpath(sys.executable) if sys.executable else None,
        "version": "%d.%d.%d" % sys.version_info[:3],
        "build": sys.version,
        "implementation": sys.implementation.name,
        "prefix": sys.prefix,
        "base_prefix": sys.base_prefix,
        "venv": sys.prefix != sys.base_prefix,
        # The agent's own flags: under -I or -s, user site and PYTHONPATH are not seen.
        "flags": {"isolated": bool(flags.isolated), "no_site": bool(flags.no_site),
                  "no_user_site": bool(flags.no_user_site),
                  "ignore_environment": bool(flags.ignore_environment)},
    }


def site_directories() -> List[str]:
    """site-packages folders whose .pth files run at startup, user site last, as site.py does."""
    dirs = list(getattr(site, "getsitepackages", lambda: [])())  # old virtualenv lacks it
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    unique = []
    for folder in dirs:
        if folder not in unique and os.path.isdir(folder):
            unique.append(folder)
    return unique


# --- packages -------------------------------------------------------------------------------

def normalise_name(name: str) -> str:
    """PEP 503: 'Foo.Bar_baz' -> 'foo-bar-baz', so one project has one key however spelled."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_metadata_headers(text: str) -> Tuple[Optional[str], Optional[str]]:
    """(Name, Version) from METADATA / PKG-INFO headers, which end at the first blank line."""
    found: Dict[str, str] = {}
    # Only the header block: the long description after it can be hundreds of KiB.
    for line in HEADER_END.split(text, maxsplit=1)[0].splitlines():
        key, colon, value = line.partition(":")
        if colon and key.lower() in ("name", "version") and key.lower() not in found:
            found[key.lower()] = value.strip()
    return found.get("name"), found.get("version")


def parse_direct_url(text: Optional[str]) -> Optional[Dict[str, Any]]:
    """PEP 610 direct_url.json -> {"editable": path} or {"url", "vcs", "commit"}."""
    if not text:
        return None
    try:
        data = json.loads(text)
        url = str(data["url"])
    except (ValueError, KeyError, TypeError):
        return {"error": "unreadable direct_url.json"}
    if (data.get("dir_info") or {}).get("editable"):
        return {"editable": file_url_path(url)}
    info: Dict[str, Any] = {"url": redact_url(url)}
    vcs = data.get("vcs_info") or {}
    if vcs:
        info.update(vcs=vcs.get("vcs"), commit=vcs.get("commit_id"))
    return info


def file_url_path(url: str) -> str:
    from urllib.parse import unquote, urlparse  # on use: only a direct_url.json needs it

    parsed = urlparse(url)
    return unquote(parsed.path) if parsed.scheme == "file" else redact_url(url)


class Found:
    """A distribution's metadata folder, as importlib.metadata's PathDistribution reads it."""

    def __init__(self, folder: str, location: str) -> None:
        self.folder, self.location = folder, location

    def read_text(self, filename: str) -> Optional[str]:
        try:
            with open(os.path.join(self.folder, filename), encoding="utf-8") as handle:
                return handle.read()
        except (OSError, UnicodeDecodeError):
            return None

    def locate_file(self, path: str) -> str:
        return os.path.join(self.location, path) if path else self.location


def distributions(search_path: List[str]) -> Iterator[Distribution]:
    """importlib.metadata.distributions(path=search_path), in its order: per sys.path entry,
    its metadata folders grouped by name (first seen first), then an .egg's EGG-INFO."""
    for entry in search_path:
        root = entry or "."
        if not os.path.isdir(root):
            if os.path.isfile(root):   # a zip on sys.path: rare, read as Python reads it
                from importlib import metadata

                yield from metadata.distributions(path=[entry])
            continue
        try:
            children = os.listdir(root)
        except OSError:
            continue
        by_name: Dict[str, List[str]] = {}
        eggs: List[str] = []
        is_egg = os.path.basename(root).lower().endswith(".egg")
        for child in children:
            low = child.lower()
            if low.endswith((".dist-info", ".egg-info")):
                name = low.rpartition(".")[0].partition("-")[0]
                by_name.setdefault(re.sub(r"[-_.]+", "_", name), []).append(child)
            elif is_egg and low == "egg-info":
                eggs.append(child)
        location = path_text(root)
        for child in [child for group in by_name.values() for child in group] + eggs:
            folder = os.path.join(root, child)
            if os.path.isdir(folder):   # an .egg-info file names no readable METADATA
                yield Found(folder, location)


def path_text(path: str) -> str:
    """A folder as pathlib writes it (what importlib.metadata's locate_file gives): no
    doubled or trailing slashes, no `.` parts."""
    parts = [part for part in path.split("/") if part not in ("", ".")]
    return ("/" if path.startswith("/") else "") + "/".join(parts) or "."


def read_distribution(dist: Distribution) -> Optional[DistRecord]:
    text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or ""
    name, version = parse_metadata_headers(text)
    if not name:
        return None  # a dist-info left half-removed by an interrupted install
    return DistRecord(normalise_name(name), version or "", str(dist.locate_file("")),
                      parse_direct_url(dist.read_text("direct_url.json")))


def index_distributions(records: Iterable[Optional[DistRecord]]) -> Dict[str, Any]:
    """Records in sys.path order -> packages, editable, direct_urls, shadowed maps.

    The first copy of a name wins, as it does for import; the later ones are "shadowed".
    """
    winners: Dict[str, DistRecord] = {}
    copies: Dict[str, List[Dict[str, str]]] = {}
    for record in records:
        if record is None:
            continue
        winners.setdefault(record.name, record)
        copies.setdefault(record.name, []).append(
            {"version": record.version, "location": record.location})
    urls = {name: r.direct_url for name, r in winners.items() if r.direct_url}
    return {
        "packages": {name: r.version for name, r in sorted(winners.items())},
        "editable": {name: u["editable"] for name, u in urls.items() if "editable" in u},
        "direct_urls": {name: u for name, u in urls.items() if "editable" not in u},
        "shadowed": {name: found for name, found in copies.items() if len(found) > 1},
    }


def package_facts(dists: Iterable[Distribution],
                  site_dirs: List[str]) -> Dict[str, Any]:
    records = [read_distribution(dist) for dist in dists]
    facts = index_distributions(records)
    facts["outside_site"] = outside_site(records, site_dirs)
    for name, path in read_egg_links(site_dirs).items():
        if name in facts["packages"]:  # legacy `setup.py develop`: no direct_url.json
            facts["editable"].setdefault(name, path)
    return facts


def outside_site(records: List[Optional[DistRecord]], site_dirs: List[str]) -> List[str]:
    """The packages whose copy that imports lies outside the site folders (a PYTHONPATH
    entry, a checkout on sys.path): a later look into the site folders alone cannot tell
    whether they are gone (the timeline's removals)."""
    roots = [os.path.join(os.path.realpath(folder), "") for folder in site_dirs]
    seen: Dict[str, str] = {}
    for record in records:
        if record is not None:
            seen.setdefault(record.name, os.path.join(os.path.realpath(record.location), ""))
    return sorted(name for name, where in seen.items()
                  if not any(where.startswith(root) for root in roots))


def read_egg_links(site_dirs: List[str]) -> Dict[str, str]:
    links: Dict[str, str] = {}
    for folder in site_dirs:
        for path in sorted(listed(folder, lambda name: name.endswith(".egg-link"))):
            loaded = read_capped(path, 4096)
            lines = escaped(loaded[0]).split() if loaded else []
            if lines:  # the first line is the project folder
                name = normalise_name(os.path.basename(path)[:-len(".egg-link")])
                links.setdefault(name, lines[0])
    return links


# --- code that runs at startup ----------------------------------------------------------------

def describe_module(name: str, search_path: List[str]) -> Optional[Dict[str, Any]]:
    """Where a top-level module is or would be loaded from, and its source; None when absent.

    A module imported at startup is described by its own spec; otherwise PathFinder looks
    for it without running it.
    """
    module = sys.modules.get(name)
    try:
        spec = (module.__spec__ if module is not None
                else importlib.machinery.PathFinder.find_spec(name, search_path))
    except (ImportError, ValueError) as exc:
        return {"error": "%s: %s" % (type(exc).__name__, exc)}
    if spec is None:
        return None
    info: Dict[str, Any] = {"imported": module is not None}
    if not spec.origin or not os.path.isfile(spec.origin):
        info.update(path=spec.origin, error="no source file")
        return info
    info.update(describe_source(spec.origin))
    return info


def customize_files(name: str, search_path: List[str]) -> List[str]:
    """Every `name`.py on the search path, in the order import looks at them."""
    found = []
    for entry in search_path:
        path = os.path.join(entry, name + ".py")
        if os.path.isfile(path) and path not in found:
            found.append(path)
    return found


def shadowed_customize(search_path: List[str]) -> Dict[str, Any]:
    """{path: its record} for each sitecustomize.py/usercustomize.py that never runs, with
    the file that runs in its place (`shadowed_by`, and that one's real path)."""
    shadowed: Dict[str, Any] = {}
    for name in CUSTOMIZE_MODULES:
        module = sys.modules.get(name)
        spec = getattr(module, "__spec__", None)
        files = customize_files(name, search_path)
        winner = spec.origin if spec is not None and spec.origin else (files[0] if files else None)
        for path in files:
            if winner is None or os.path.realpath(path) == os.path.realpath(winner):
                continue
            info = describe_source(path)
            info.update(module=name, shadowed_by=winner,
                        shadowed_by_real=os.path.realpath(winner))
            shadowed[path] = info
    return shadowed


def describe_source(path: str) -> Dict[str, Any]:
    loaded = read_capped(path, READ_CAP)
    if loaded is None:
        return {"path": path, "real_path": os.path.realpath(path), "error": "unreadable"}
    raw, complete = loaded
    shown, digest, redacted = redact_with_digest(raw)
    encoded = shown.encode("utf-8")
    return {"path": path, "real_path": os.path.realpath(path),
            "size": len(raw) if complete else None,
            "sha256": digest if complete else None,
            "redacted": redacted, "truncated": len(encoded) > CONTENT_CAP,
            "content": encoded[:CONTENT_CAP].decode("utf-8", "ignore")}


def redact_with_digest(raw: bytes) -> Tuple[str, str, bool]:
    """(text with secrets masked, sha256, whether anything was masked).

    The digest is of the masked text when something was masked: a hash of the original next
    to the rest of its content would let anyone confirm a guessed secret.
    """
    text = raw.decode("utf-8", "replace")
    shown = redact_code(text)
    if shown == text:
        return text, sha256_bytes(raw), False
    return shown, sha256_bytes(shown.encode("utf-8")), True


def startup_lines(text: str) -> List[str]:
    """The .pth lines that site.py executes rather than adds to sys.path."""
    return [line.rstrip() for line in text.splitlines() if line.startswith(("import ", "import\t"))]


def find_startup_pth(site_dirs: List[str]) -> Dict[str, Any]:
    found: Dict[str, Any] = {}
    for folder in site_dirs:
        for path in sorted(listed(folder, lambda name: name.endswith(".pth"))):
            loaded = read_capped(path, READ_CAP)
            if loaded is None:
                found[path] = {"error": "unreadable"}
                continue
            shown, digest, _ = redact_with_digest(loaded[0])
            lines = startup_lines(shown)
            if lines:
                found[path] = {"sha256": digest, "code_lines": lines}
    return found


def read_capped(path: str, limit: int) -> Optional[Tuple[bytes, bool]]:
    """(at most `limit` bytes, whether that is the whole file), or None when unreadable."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError:
        return None
    return data[:limit], len(data) <= limit
