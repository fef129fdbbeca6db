"""`potrun validate GOLDS`: check gold programs."""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import ExitStack

from potrun.cli.common import (
    _check_presets,
    _compare_options,
    _fields,
)
from potrun.cli.exits import (
    EXIT_FAILED,
    EXIT_OK,
)
from potrun.types import (
    UsageError,
)


def cmd_validate(args: argparse.Namespace) -> int:
    from potrun.check.output import STDOUT, OutputWriter, check_output_path
    from potrun.check.records import ANSWER_FIELDS, ID_FIELDS, PROGRAM_FIELDS, count_records, is_stream
    from potrun.reports.table import Progress
    from potrun.validation import ValidationSummary, render_summary, validate, write_fixed_copy

    _check_presets([args.compare])
    if args.fix_answers and is_stream(args.gold):
        raise UsageError("--fix-answers reads GOLDS a second time: give a file, not a stream")
    for option, path in (("--out", args.out), ("--fix-answers", args.fix_answers)):
        if path:
            check_output_path(option, path, inputs=[args.gold])
    answer_fields = _fields(args.answer_field, ANSWER_FIELDS)
    reports = validate(
        args.gold,
        program_field=_fields(args.program_field, PROGRAM_FIELDS),
        answer_field=answer_fields,
        id_field=_fields(args.id_field, ID_FIELDS),
        compare=args.compare,
        compare_options=_compare_options(args),
        slow_fraction=args.slow_fraction,
        ignore=_fields(args.ignore, ()),
        policy=args.policy,
        timeout=args.timeout,
        wall_timeout=args.wall_timeout,
        memory_mb=args.memory,
        workers=args.workers,
        backend=args.backend,
        image=args.image,
        isolation=args.isolation,
        entry=args.entry,
        benchmark=args.benchmark,
    )
    summary = ValidationSummary()
    with ExitStack() as closing:
        # An interrupt closes the pools now (workers, cgroups and scratch gone), not when collected.
        closing.callback(getattr(reports, "close", lambda: None))
        # Each line in one write as it comes; a full disk is exit 2 naming the path, whole lines kept.
        out = OutputWriter(args.out) if args.out and args.out != STDOUT else None
        if out is not None:
            closing.callback(out.close)
        with Progress(count_records(args.gold), enabled=not args.quiet) as progress:
            for report in reports:
                summary.add(report)
                progress.advance()
                if out is not None:
                    out.write_json(report.to_json())
                else:
                    sys.stdout.write(json.dumps(report.to_json()) + "\n")
                    sys.stdout.flush()
    summary.finish()
    if not args.quiet:
        render_summary(summary)
    if args.fix_answers:
        fixes = {ordinal: value for ordinal, _, _, _, value in summary.fixable}
        write_fixed_copy(args.gold, args.fix_answers, fixes, answer_fields)
        print(
            f"potrun: {len(fixes)} recorded answer(s) replaced by the executed value in {args.fix_answers}",
            file=sys.stderr,
        )
        for _, line, record_id, answer, value in summary.fixable:
            print(f"  line {line} (id {record_id}): {json.dumps(answer)} -> {json.dumps(value)}", file=sys.stderr)
    if summary.with_errors or (args.strict and summary.with_warnings_only):
        return EXIT_FAILED
    return EXIT_OK
