"""A stand-in benchmark for the tests: a throughput read from files, with a little noise.

argv: a file with the base speed, then optional files with factors (all multiplied)."""
import random
import sys

value = 1.0
for path in sys.argv[1:]:
    with open(path) as handle:
        value *= float(handle.read())
print(f"gen throughput (token/s): {value * random.uniform(0.98, 1.02):.2f}")
