"""Headless Chromium for the report tests, and the screenshot in docs/.

Chromium runs with the network blocked (every host name resolves to nothing, every proxied
request goes to a closed port), so a page that needed anything from the network would show
it missing. The screenshots are read back with a small PNG decoder (zlib and the five PNG
row filters), so a test can tell whether the charts were painted without an image library.

    .venv/bin/python tests/helpers/browser.py docs/report.png    # the README's screenshot, again
"""
from __future__ import annotations

import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from helpers.paths import ROOT

OFFLINE = ["--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9",
           "--proxy-bypass-list=<-loopback>"]
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--no-first-run", "--disable-extensions", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", *OFFLINE]
DOCS_WINDOW = (1000, 1750)     # the summary, the benchmark and its chart, GPU charts begin


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        raise RuntimeError("chromium is not installed: tests/run.sh installs it "
                           "(as root: apt-get install -y chromium)")
    return found


def run(args: list[str], profile: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([chromium(), *FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=120)


def dump_dom(page: Path, profile: Path) -> str:
    """The DOM after the page loaded (and its own scripts, if it had any, ran)."""
    done = run(["--dump-dom", page.resolve().as_uri()], profile)
    if done.returncode != 0:
        raise RuntimeError(f"chromium --dump-dom failed: {done.stderr[-2000:]}")
    return done.stdout


def screenshot(page: Path, png: Path, window: tuple[int, int], profile: Path,
               scale: float = 1.0) -> None:
    done = run([f"--screenshot={png}", f"--window-size={window[0]},{window[1]}",
                f"--force-device-scale-factor={scale}", page.resolve().as_uri()], profile)
    if done.returncode != 0 or not png.exists():
        raise RuntimeError(f"chromium --screenshot failed: {done.stderr[-2000:]}")


# ---- PNG ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Image:
    width: int
    height: int
    channels: int
    rows: list[bytes]

    def pixels(self) -> list[tuple[int, int, int]]:
        step = self.channels
        return [(row[i], row[i + 1], row[i + 2]) for row in self.rows
                for i in range(0, len(row), step)]


def paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else b if pb <= pc else c


def unfilter(kind: int, row: bytearray, above: bytes, step: int) -> bytes:
    if kind == 1:
        for i in range(step, len(row)):
            row[i] = (row[i] + row[i - step]) & 0xFF
    elif kind == 2:
        row = bytearray((x + y) & 0xFF for x, y in zip(row, above))
    elif kind == 3:
        for i in range(len(row)):
            left = row[i - step] if i >= step else 0
            row[i] = (row[i] + ((left + above[i]) >> 1)) & 0xFF
    elif kind == 4:
        for i in range(len(row)):
            left = row[i - step] if i >= step else 0
            upper_left = above[i - step] if i >= step else 0
            row[i] = (row[i] + paeth(left, above[i], upper_left)) & 0xFF
    return bytes(row)


def read_png(path: Path) -> Image:
    """8-bit RGB or RGBA, not interlaced: what Chromium writes."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is no PNG"
    at, idat, header = 8, b"", b""
    while at < len(data):
        (length,), kind = struct.unpack(">I", data[at:at + 4]), data[at + 4:at + 8]
        body = data[at + 8:at + 8 + length]
        header = body if kind == b"IHDR" else header
        idat += body if kind == b"IDAT" else b""
        at += 12 + length
    width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and color in (2, 6) and interlace == 0, (depth, color, interlace)
    channels = 3 if color == 2 else 4
    raw, stride = zlib.decompress(idat), width * channels
    rows, above = [], bytes(stride)
    for y in range(height):
        start = y * (stride + 1)
        above = unfilter(raw[start], bytearray(raw[start + 1:start + 1 + stride]), above,
                         channels)
        rows.append(above)
    return Image(width, height, channels, rows)


def near(pixel: tuple[int, int, int], color: str, tolerance: int = 24) -> bool:
    wanted = tuple(int(color[i:i + 2], 16) for i in (1, 3, 5))
    return all(abs(a - b) <= tolerance for a, b in zip(pixel, wanted))


# ---- the screenshot in docs/ --------------------------------------------------------------------

def docs_screenshot(target: Path) -> None:
    """The example story's report (`envsnap demo`'s snapshots), story-bad against story-good."""
    root = ROOT
    with tempfile.TemporaryDirectory() as folder:
        here = Path(folder)
        subprocess.run([sys.executable, "-c", "import sys; from envsnap.demo.snapshots import "
                        "write_examples; write_examples(sys.argv[1])", folder], check=True,
                       cwd=root)
        page = here / "report.html"
        subprocess.run([sys.executable, "-m", "envsnap", "report", str(here / "story-bad.yaml"),
                        "--vs", str(here / "story-good.yaml"), "--format", "html", "-o",
                        str(page)], check=True, cwd=root, stdout=subprocess.DEVNULL)
        screenshot(page, target, DOCS_WINDOW, here / "profile")


if __name__ == "__main__":
    docs_screenshot(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/report.png"))
