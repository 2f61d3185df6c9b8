"""A benchmark for the bisect tests: its speed is the checkout's speed.txt, with a little noise.

Run in the checkout. speed.txt holds a number, or `broken` (the run fails, like a build that
does not compile), or `noisy` (values from a fixed wide cycle: no verdict can ever form).
A tune.txt beside it multiplies the value (the tests' "local patch"). argv[1], if given,
is seconds to sleep first (something to interrupt).
"""
import os
import pathlib
import random
import sys
import time

CYCLE = [10, 150, 77, 40, 115]

if len(sys.argv) > 1:
    time.sleep(float(sys.argv[1]))
speed = pathlib.Path("speed.txt").read_text().strip()
if speed == "broken":
    print("error: the build failed", file=sys.stderr)
    sys.exit(1)
if speed == "noisy":
    counter = pathlib.Path(os.environ["HOME"]) / ".bisect-noise-counter"
    n = int(counter.read_text()) if counter.exists() else 0
    counter.write_text(str(n + 1))
    value = float(CYCLE[n % len(CYCLE)])
else:
    value = float(speed) * random.uniform(0.98, 1.02)
tune = pathlib.Path("tune.txt")
if tune.exists():
    value *= float(tune.read_text())
print(f"gen throughput (token/s): {value:.2f}")
build = pathlib.Path("build.txt")   # a tracked file a build step rewrites
if build.exists():
    build.write_text("rebuilt\n")
