"""Record, on a real GPU host, what `watch` keeps across a worker restart and what a capture's
`report --format collect-env` says beside torch's own collect_env of the same minute.

Run from the repository root, with envsnap importable:  python3 tests/data/record_watch.py OUT
[WHEELS_DIR]. It writes into OUT (copy them to tests/data/h200/watch/):
  collect_env.txt          `python -m torch.utils.collect_env`, then at once
  capture.yaml             `envsnap capture local` of the same minute, and
  report_collect_env.txt   `envsnap report capture --format collect-env` of it
  watch.txt                `envsnap watch local --proc TAG` while a worker started with
                           NCCL_PROTO=LL is restarted without it, and one pip install of
                           the wheels in WHEELS_DIR (one transaction) goes into a venv
  status.txt, history_list.txt, timeline.txt   `watch --status`, `history list`, `timeline`
  history.tar.gz           the store's history folder (the records the timeline read)
  log.json                 each command's exit code and seconds
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
import uuid
from pathlib import Path

TAG = f"envsnap-recorded-worker-{uuid.uuid4().hex[:8]}"
NCCL = {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"}


def envsnap(*args: str) -> list[str]:
    return [sys.executable, "-m", "envsnap", *args]


def main(out: Path, wheels: Path | None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    store = out / "store"
    env = {**os.environ, "ENVSNAP_STORE": str(store)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)   # as users run it
    log: list[dict[str, object]] = []

    def run(name: str, argv: list[str], **kwargs: object) -> str:
        started = time.time()
        done = subprocess.run(argv, env=kwargs.pop("env", env), capture_output=True,
                              text=True, timeout=300, **kwargs)  # type: ignore[call-overload]
        log.append({"name": name, "argv": argv, "exit": done.returncode,
                    "seconds": round(time.time() - started, 2)})
        (out / f"{name}.txt").write_text(done.stdout + (f"\n--- stderr\n{done.stderr}"
                                                        if done.stderr else ""))
        return str(done.stdout)

    run("collect_env", [sys.executable, "-m", "torch.utils.collect_env"])
    run("capture", envsnap("capture", "local", "--label", "capture"))
    shutil.copy(store / "capture.yaml", out / "capture.yaml")
    run("report_collect_env", envsnap("report", "capture", "--format", "collect-env"))

    venv = out / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                   check=True)
    worker_env = {**env, **NCCL}
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", TAG],
                              env=worker_env)
    time.sleep(1)
    watch = subprocess.Popen(envsnap("watch", "local", "--proc", TAG, "--python",
                                     str(venv / "bin" / "python"), "--every", "10m",
                                     "--for", "40s"),
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
    time.sleep(8)
    worker.terminate()   # the worker this script started
    worker.wait()
    worker_env.pop("NCCL_PROTO")
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", TAG],
                              env=worker_env)
    time.sleep(6)
    if wheels is not None:
        # without the PYTHONPATH envsnap ran with: the wheels there read as installed
        run("pip_install", [str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
                            "--no-index", "--find-links", str(wheels),
                            *sorted(str(w) for w in wheels.glob("*.whl"))],
            env={name: value for name, value in env.items() if name != "PYTHONPATH"})
    watched, _ = watch.communicate(timeout=120)
    (out / "watch.txt").write_text(watched)
    log.append({"name": "watch", "exit": watch.returncode})
    run("status", envsnap("watch", "local", "--status"))
    run("history_list", envsnap("history", "list"))
    run("timeline", envsnap("timeline", "local", "--since", "1h", "--proc", TAG,
                            "--python", str(venv / "bin" / "python"), "-v"))
    worker.terminate()
    worker.wait()
    with tarfile.open(out / "history.tar.gz", "w:gz") as tar:
        tar.add(store / "history", arcname="history")
    (out / "log.json").write_text(json.dumps(log, indent=1) + "\n")
    shutil.rmtree(venv, ignore_errors=True)
    shutil.rmtree(store, ignore_errors=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) > 2 else None)
