"""A small HTTP server whose speed depends on its code and its environment, and its client.

Stdlib only, so it runs wherever the agent runs. Two roles:

    python tests/helpers/toyserver.py serve --port 0 --repo DIR [--url-file PATH]
        Serves on 127.0.0.1; prints `listening on http://127.0.0.1:PORT/` once it accepts
        connections. GET /work sleeps `delay(os.environ)` seconds, `delay` being the function
        of that name in DIR/toy_speed.py (the code under test, imported once at start), then
        answers 200. SIGTERM stops it cleanly (exit 0).

    python tests/helpers/toyserver.py client --url URL|--url-file PATH [--seconds 1.0] [--threads 1]
        Sends GET /work for that long and prints `throughput: N req/s`, then
        `latency: min X ms, median Y ms`. The minimum hardly moves with the load of a shared
        machine (a request is never faster than its delay): the metric for tests that need
        "same" to be provable, not only a large gap.

A delay of 0.004 s against 0.02 s is a 5x gap that survives the noise of a loaded machine.
For a variable to be recorded in the server's worker env (and so be a difference envsnap can
put back), give it a name the agent selects (agent/env.py: NCCL_*, CUDA_*, ...), such as
NCCL_TOY_FAST.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import sys
import threading
import time
import urllib.request
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType
from typing import Callable

Delay = Callable[[Mapping[str, str]], float]


def load_delay(repo: Path) -> Delay:
    """The `delay` function of repo/toy_speed.py, loaded from that file (never a cached copy)."""
    spec = importlib.util.spec_from_file_location("toy_speed", repo / "toy_speed.py")
    if spec is None or spec.loader is None:
        raise SystemExit(f"toyserver: cannot load {repo / 'toy_speed.py'}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    delay: Delay = module.delay
    return delay


def make_handler(delay: Delay) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the name http.server calls)
            if self.path.rstrip("/") == "/work":
                time.sleep(delay(os.environ))
            body = b"ok\n"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # one line per request would drown the ready line in the output tail

    return Handler


def serve(port: int, repo: Path, url_file: Path | None) -> int:
    server = ThreadingHTTPServer(("127.0.0.1", port), make_handler(load_delay(repo)))
    server.daemon_threads = True
    url = f"http://127.0.0.1:{server.server_address[1]}/"

    def stop(signum: int, frame: FrameType | None) -> None:
        # shutdown() waits for serve_forever, which runs in this thread: ask from another one
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    if url_file is not None:
        # written whole under a temporary name, so a reader never sees half a URL
        partial = url_file.with_name(url_file.name + ".partial")
        partial.write_text(url + "\n")
        partial.replace(url_file)
    print(f"listening on {url}", flush=True)
    try:
        server.serve_forever(poll_interval=0.05)
    finally:
        server.server_close()
    return 0


def read_url(url: str | None, url_file: Path | None) -> str:
    if url:
        return url
    if url_file is None:
        raise SystemExit("toyserver client: give --url or --url-file")
    return url_file.read_text().strip()


def client(url: str, seconds: float, threads: int) -> int:
    target = url.rstrip("/") + "/work"
    deadline = time.monotonic() + seconds
    counts = [0] * threads
    latencies: list[float] = []

    def hammer(index: int) -> None:
        while time.monotonic() < deadline:
            sent = time.perf_counter()
            with urllib.request.urlopen(target, timeout=30) as answer:
                answer.read()
            latencies.append(time.perf_counter() - sent)
            counts[index] += 1

    started = time.monotonic()
    workers = [threading.Thread(target=hammer, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    elapsed = time.monotonic() - started
    print(f"throughput: {sum(counts) / elapsed:.1f} req/s", flush=True)
    if latencies:
        latencies.sort()
        print(f"latency: min {latencies[0] * 1000:.2f} ms, "
              f"median {latencies[len(latencies) // 2] * 1000:.2f} ms", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="toyserver")
    roles = parser.add_subparsers(dest="role", required=True)
    server = roles.add_parser("serve")
    server.add_argument("--port", type=int, default=0)
    server.add_argument("--repo", type=Path, required=True)
    server.add_argument("--url-file", type=Path)
    hitter = roles.add_parser("client")
    hitter.add_argument("--url")
    hitter.add_argument("--url-file", type=Path)
    hitter.add_argument("--seconds", type=float, default=1.0)
    hitter.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    if args.role == "serve":
        return serve(args.port, args.repo, args.url_file)
    return client(read_url(args.url, args.url_file), args.seconds, args.threads)


if __name__ == "__main__":
    sys.exit(main())
