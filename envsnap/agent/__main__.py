# Kept to syntax that any python3 can parse, so an old interpreter gets a clear message
# instead of a SyntaxError from the collectors.
import sys

from envsnap.agent.exits import PYTHON_TOO_OLD

if sys.version_info < (3, 8):
    sys.stderr.write("envsnap agent needs Python >= 3.8, found %s\n" % sys.version.split()[0])
    sys.exit(PYTHON_TOO_OLD)

from envsnap.agent.runner import main  # noqa: E402

sys.exit(main(sys.argv[1:]))
