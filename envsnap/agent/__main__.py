# Kept to syntax that any python3 can parse, so an old interpreter gets a clear message
# instead of a SyntaxError from the collectors.
import sys

from envsnap.agent.exits import PYTHON_TOO_OLD

if sys.version_info < (3, 8):
    sys.stderr.write("envsnap agent needs Python >= 3.8, found %s\n" % sys.version.split()[0])
    sys.exit(PYTHON_TOO_OLD)

import time  # noqa: E402  (after the check: an old python's time has no monotonic)

# The agent's start-up, as the snapshot records it (meta.agent.startup_seconds): the CPU the
# interpreter spent before this line (its own start, site, .pth files), then the wall time
# of the runner's own imports, up to the collectors' start (each imports its module itself:
# runner.py).
STARTED = (time.monotonic(), time.process_time())

from envsnap.agent.runner import main  # noqa: E402

sys.exit(main(sys.argv[1:], STARTED))
