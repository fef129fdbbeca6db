"""`python -m potrun.cli`: the `potrun` command, as `python -m potrun`."""

import sys

from potrun.cli import main

sys.exit(main())
