"""`potrun bench CORPUS`: throughput of potrun beside in-process exec."""

from __future__ import annotations

import argparse
import json
from typing import Any

from potrun.cli.common import add_sandbox_options, make_sandbox, positive_int, split_fields
from potrun.cli.exits import EXIT_OK


def cmd_bench(args: argparse.Namespace) -> int:
    from potrun.check.records import CODE_FIELDS
    from potrun.tools.bench import run_bench

    report = run_bench(
        args.corpus,
        sandbox_factory=lambda: make_sandbox(args),
        limit=args.limit,
        code_fields=split_fields(args.code_field, CODE_FIELDS),
    )
    print(json.dumps(report, indent=2))
    return EXIT_OK


def add_command(commands: Any) -> None:
    """`potrun bench`'s arguments."""
    bench = commands.add_parser("bench", help="throughput of potrun beside in-process exec on a corpus")
    bench.add_argument("corpus", help="JSON Lines of records with programs (as for check)")
    bench.add_argument("--code-field", default=None)
    bench.add_argument("--limit", type=positive_int, default=None, help="use at most this many programs")
    add_sandbox_options(bench)
    bench.set_defaults(handler=cmd_bench)
