"""`potrun bench CORPUS`: throughput of potrun beside in-process exec."""

from __future__ import annotations

import argparse
import json

from potrun.cli.common import (
    _fields,
    _sandbox,
)
from potrun.cli.exits import (
    EXIT_OK,
)


def cmd_bench(args: argparse.Namespace) -> int:
    from potrun.check.records import CODE_FIELDS
    from potrun.tools.bench import run_bench

    report = run_bench(
        args.corpus,
        sandbox_factory=lambda: _sandbox(args),
        limit=args.limit,
        code_fields=_fields(args.code_field, CODE_FIELDS),
    )
    print(json.dumps(report, indent=2))
    return EXIT_OK
