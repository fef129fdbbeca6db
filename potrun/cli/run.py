"""`potrun run PROGRAM`: run one program file and print its result as JSON."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from potrun.cli.common import (
    _sandbox,
)
from potrun.cli.exits import (
    run_exit_code,
)
from potrun.types import (
    UsageError,
)


def cmd_run(args: argparse.Namespace) -> int:
    try:
        source = Path(args.program).read_text(encoding="utf-8") if args.program != "-" else sys.stdin.read()
    except OSError as exc:
        raise UsageError(f"cannot read {args.program}: {exc.strerror}") from None
    with _sandbox(args, workers=1) as sandbox:
        result = sandbox.run(source)
    print(json.dumps(result.to_json()))
    return run_exit_code(result.status)
