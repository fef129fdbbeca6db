"""`python -m potrun`: the `potrun` command."""

import sys

from potrun.cli import main

sys.exit(main())
