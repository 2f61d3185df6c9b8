"""tests/helpers/toyserver.py, the server the managed-server and explain tests run: its speed
follows
the `delay` of the repo's toy_speed.py and the server's env; SIGTERM ends it cleanly."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from helpers.paths import TESTS

TOYSERVER = TESTS / "helpers" / "toyserver.py"

SPEED = """\
def delay(env):
    return 0.004 if env.get("TOY_FAST") == "1" else 0.02
"""


def throughput(url_file: Path) -> float:
    out = subprocess.run([sys.executable, str(TOYSERVER), "client", "--url-file", str(url_file),
                          "--seconds", "0.5"], capture_output=True, text=True, timeout=30,
                         check=True).stdout
    found = re.fullmatch(r"throughput: ([0-9.]+) req/s\n"
                         r"latency: min ([0-9.]+) ms, median ([0-9.]+) ms\n", out)
    assert found, out
    fastest, median = float(found.group(2)), float(found.group(3))
    assert 0 < fastest <= median
    return float(found.group(1))


def serve(repo: Path, url_file: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(TOYSERVER), "serve", "--port", "0", "--repo",
                             str(repo), "--url-file", str(url_file)],
                            env={"PATH": "/usr/bin:/bin", **env}, stdout=subprocess.PIPE,
                            text=True)


def test_the_toy_server_is_as_fast_as_its_code_and_env_say(tmp_path: Path) -> None:
    (tmp_path / "toy_speed.py").write_text(SPEED)
    rates = {}
    for fast in ("1", "0"):
        url_file = tmp_path / f"url-{fast}"
        server = serve(tmp_path, url_file, {"TOY_FAST": fast})
        try:
            assert server.stdout is not None
            ready = server.stdout.readline()
            assert re.fullmatch(r"listening on http://127\.0\.0\.1:\d+/\n", ready), ready
            assert url_file.read_text().strip() == ready.split()[-1]
            rates[fast] = throughput(url_file)
            server.terminate()
            assert server.wait(timeout=10) == 0
        finally:
            server.kill()
            server.wait()
    # 0.004 s against 0.02 s a request: a 5x gap; at least 2x whatever the load
    assert rates["1"] > 2 * rates["0"] > 0, rates
