import sys

from envsnap.cli import main

sys.exit(main())
