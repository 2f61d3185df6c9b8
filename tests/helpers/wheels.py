"""A real, minimal wheel built in the test (no network, no build backend), for pip to install
and upgrade: the pip-restore and timeline tests."""
from __future__ import annotations

import zipfile
from pathlib import Path


def make_wheel(folder: Path, version: str, package: str = "tinypkg") -> Path:
    """A real, minimal wheel of `package`, built by hand (no network, no build backend)."""
    name = f"{package}-{version}.dist-info"
    path = folder / f"{package}-{version}-py3-none-any.whl"
    files = {f"{package}/__init__.py": f"VERSION = {version!r}\n",
             f"{name}/METADATA": f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n",
             f"{name}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                              "Tag: py3-none-any\n"}
    with zipfile.ZipFile(path, "w") as wheel:
        for member, text in files.items():
            wheel.writestr(member, text)
        wheel.writestr(f"{name}/RECORD", "".join(f"{m},,\n" for m in files) + f"{name}/RECORD,,\n")
    return path
