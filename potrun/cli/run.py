"""`potrun run PROGRAM`: run one program file and print its result as JSON."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from potrun.cli.common import add_sandbox_options, make_sandbox
from potrun.cli.exits import run_exit_code
from potrun.types import UsageError


def cmd_run(args: argparse.Namespace) -> int:
    try:
        source = Path(args.program).read_text(encoding="utf-8") if args.program != "-" else sys.stdin.read()
    except OSError as exc:
        raise UsageError(f"cannot read {args.program}: {exc.strerror}") from None
    with make_sandbox(args, workers=1) as sandbox:
        result = sandbox.run(source)
    print(json.dumps(result.to_json()))
    return run_exit_code(result.status)


def add_command(commands: Any) -> None:
    """`potrun run`'s arguments."""
    run = commands.add_parser(
        "run",
        help="run one program file and print its result as JSON (exit 0 only "
        "for status ok, 1 for any other, 3 for sandbox_error or no sandbox here)",
    )
    run.add_argument("program", help="a Python file, or - for standard input")
    add_sandbox_options(run)
    run.set_defaults(handler=cmd_run)
