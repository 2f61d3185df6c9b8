"""A benchmark for bisect's drift tests: the checkout's speed.txt, on a machine that slows
down as it is used (a neighbour's job growing, a GPU warming up).

Run in the checkout. argv[1]: the change per run (-0.01: each run 1% slower than the one
before, whatever the commit); argv[2]: the noise of one run (0.01: +-1%). The runs so far
are counted in $HOME/.bisect-drift-runs.
"""
import os
import pathlib
import random
import sys

per_run, noise = float(sys.argv[1]), float(sys.argv[2])
counter = pathlib.Path(os.environ["HOME"]) / ".bisect-drift-runs"
runs = int(counter.read_text()) if counter.exists() else 0
counter.write_text(str(runs + 1))
speed = float(pathlib.Path("speed.txt").read_text())
value = speed * (1 + per_run) ** runs * random.uniform(1 - noise, 1 + noise)
print(f"gen throughput (token/s): {value:.2f}")
