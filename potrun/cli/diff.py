"""`potrun diff A B`: the verdicts that changed between two runs, and McNemar's test."""

from __future__ import annotations

import argparse
import json
from typing import Any

from potrun.cli.common import positive_int
from potrun.cli.exits import EXIT_OK


def cmd_diff(args: argparse.Namespace) -> int:
    """`potrun diff A.jsonl B.jsonl [--json]`: the records whose verdict changed, and McNemar's test."""
    from potrun.reports.diff import diff_runs, render_diff

    diff = diff_runs(args.a, args.b)
    if args.json:
        print(json.dumps(diff.to_json(), indent=2))
    else:
        render_diff(diff, show=args.show)
    return EXIT_OK


def add_command(commands: Any) -> None:
    diff = commands.add_parser(
        "diff",
        help="compare two runs' --out files: the verdicts that changed, and whether the difference is significant",
    )
    diff.add_argument("a", help="the --out file of run A")
    diff.add_argument("b", help="the --out file of run B (same records)")
    diff.add_argument("--json", action="store_true", help="print the comparison as JSON, every change included")
    diff.add_argument("--show", type=positive_int, default=20, help="changes listed each way (default 20)")
    diff.set_defaults(handler=cmd_diff)
