"""`python -m potrun.tools.image ...` is `potrun image ...`: one command, one set of exit codes. The
script, not the image tooling, imports the command line (which imports the tooling)."""

import sys

from potrun.cli import main

sys.exit(main(["image", *sys.argv[1:]]))
