import sys

from envsnap.cli.main import main

sys.exit(main())
