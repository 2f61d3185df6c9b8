"""A stand-in benchmark for the tests: a throughput read from files, with a little noise.

argv: a file with the base speed, then optional files with factors (all multiplied)."""
import random
import sys

value = 1.0
for path in sys.argv[1:]:
    with open(path) as handle:
        value *= float(handle.read())
# +-1%: 3 runs a side then always bound a no-change within the 5% threshold ("same");
# at +-2% about 7 in 100 such comparisons came out "can't tell", and a test flaked.
print(f"gen throughput (token/s): {value * random.uniform(0.99, 1.01):.2f}")
